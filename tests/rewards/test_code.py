"""The ``code`` reward: code extraction, test formats, statuses, partial credit and the isolation floor.

Runs real code in the real sandbox; the one stub replaces the isolation report to check the refusal path.
"""

from __future__ import annotations

import doctest
import json

import pytest

import rewards.code as code_mod
from harness import Sample, get_reward
from rewards.code import extract_code, outputs_match, parse_tests
from sandbox import IsolationReport


@pytest.fixture(scope="module")
def fn():
    return get_reward("code", timeout=2.0)


def test_module_doctests_run():
    result = doctest.testmod(code_mod)
    assert result.failed == 0 and result.attempted >= 4


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("```python\na = 1\n```", "a = 1\n"),
        ("text\n```py\nfirst\n```\nmore\n```\nsecond\n```\nend", "second\n"),
        ("no fences at all", "no fences at all"),
        ("```python\nunclosed = True\n", "unclosed = True\n"),
        ("```\nclosed\n```\n```python\nopen_tail\n", "open_tail\n"),
    ],
)
def test_extract_code(completion, expected):
    assert extract_code(completion) == expected


def test_parse_tests_shapes():
    assert parse_tests("assert f() == 1") == ("python", "assert f() == 1")
    assert parse_tests(["assert f() == 1", "assert g() == 2"]) == ("python", "assert f() == 1\nassert g() == 2")
    assert parse_tests([{"input": "1", "output": "2"}]) == ("stdio", [("1", "2")])
    assert parse_tests({"inputs": ["a", "b"], "outputs": ["c", "d"]}) == ("stdio", [("a", "c"), ("b", "d")])
    assert parse_tests(json.dumps([{"input": "x", "output": "y"}])) == ("stdio", [("x", "y")])
    assert parse_tests({"stdin": "1\n", "stdout": "2\n"}) == ("stdio", [("1\n", "2\n")])
    assert parse_tests([{"input": ["a", "b"], "expected_output": "c"}]) == ("stdio", [("a\nb\n", "c")])


@pytest.mark.parametrize("bad", [None, 3, [], [{"input": 1, "output": "x"}], {"inputs": ["a"], "outputs": []}, "  "])
def test_parse_tests_rejects_bad_shapes_with_a_reason(bad):
    with pytest.raises(ValueError, match="tests"):
        parse_tests(bad)


def test_outputs_match_compares_every_line():
    assert outputs_match("a \nb\n\n", "a\nb")
    assert outputs_match("x\r\ny\r\n", "x\ny\n")
    assert not outputs_match("a\n", "a\nb\n")
    assert not outputs_match("a\nb\nc\n", "a\nb\n")
    assert not outputs_match(" a\n", "a\n")


def test_missing_tests_is_bad_input(fn):
    s = fn({"prompt": "p"}, "print(1)")
    assert s.status == "bad_input" and s.value is None and "tests" in s.info["reason"]


def test_tests_that_do_not_parse_are_bad_input(fn):
    s = fn({"tests": "assert (", "entry_point": "f"}, "def f(): pass")
    assert s.status == "bad_input" and s.value is None


def test_syntax_error_in_solution_is_error_scored_zero(fn):
    s = fn({"tests": "assert f() == 1"}, "def f(:\n  pass")
    assert (s.status, s.value) == ("program_error", 0.0) and "SyntaxError" in s.info["reason"]


def test_syntax_error_in_stdio_program_is_error_scored_zero(fn):
    s = fn({"tests": [{"input": "", "output": "1"}]}, "print(1")
    assert (s.status, s.value) == ("program_error", 0.0) and "SyntaxError" in s.info["tests"][0]["stderr"]


def test_crash_at_import_is_error_with_the_reason(fn):
    s = fn({"tests": "assert f() == 1"}, "raise RuntimeError('boom')\ndef f(): return 1")
    assert (s.status, s.value) == ("program_error", 0.0) and s.info["outcome"] == "error" and "boom" in s.info["reason"]


def test_missing_entry_point_is_error(fn):
    s = fn({"tests": "def check(candidate):\n    assert candidate() == 1\n", "entry_point": "g"}, "def f(): return 1")
    assert (s.status, s.value) == ("program_error", 0.0) and "'g'" in s.info["reason"]


def test_program_crash_is_error_with_stderr(fn):
    s = fn({"tests": [{"input": "", "output": "1"}]}, "print(1)\nraise ValueError('late')")
    assert (s.status, s.value) == ("program_error", 0.0) and "ValueError" in s.info["tests"][0]["stderr"]


def test_stdio_partial_credit():
    f = get_reward("code", partial=True, timeout=2.0)
    cases = [{"input": str(i), "output": str(i * 2 if i < 3 else 0)} for i in range(4)]
    s = f({"tests": cases}, "print(int(input()) * 2)")
    assert s.status == "fail" and s.value == pytest.approx(0.75) and len(s.info["tests"]) == 4


def test_stdio_all_or_nothing_runs_every_case_after_a_failure(fn):
    """Fails on the code before this change: the first failed case ended the run, so whether the program ran
    again told it whether its previous output was right."""
    cases = [{"input": "1", "output": "9"}] + [{"input": "2", "output": "4"}] * 5
    s = fn({"tests": cases}, "print(int(input()) * 2)")
    assert (s.status, s.value, s.info["passed"]) == ("fail", 0.0, 5)
    assert [t["status"] for t in s.info["tests"]] == ["fail"] + ["pass"] * 5


def test_info_carries_isolation_and_per_test_results(fn):
    s = fn(Sample(id="1", tests="assert f(1) == 2\nassert f(2) == 4"), "def f(x): return 2 * x")
    assert s.status == "pass" and s.info["isolation"] in ("full", "strong", "basic")
    assert [t["passed"] for t in s.info["tests"]] == [True, True] and s.info["total"] == 2


def test_answer_is_the_extracted_code(fn):
    s = fn({"tests": "assert f() == 1"}, "Sure!\n```python\ndef f():\n    return 1\n```")
    assert s.answer == "def f():\n    return 1\n"


class _WeakSandbox:
    def isolation(self) -> IsolationReport:
        return IsolationReport("basic", {}, ("landlock", "seccomp"), 1.0)

    def run_tests(self, *a, **k):  # pragma: no cover - must not be reached when refusing
        raise AssertionError("ran untrusted code below the isolation floor")


def test_refuses_below_the_isolation_floor(monkeypatch):
    monkeypatch.setattr(code_mod, "get_sandbox", lambda: _WeakSandbox())
    s = get_reward("code")({"tests": "assert True"}, "x = 1")
    assert s.status == "sandbox_error" and s.value is None
    assert "basic" in s.info["reason"] and "allow_weaker_isolation" in s.info["reason"]


def test_opt_in_runs_below_the_floor_and_says_so(monkeypatch):
    real = code_mod.get_sandbox()

    class _Waived(_WeakSandbox):
        run_tests = staticmethod(real.run_tests)

    monkeypatch.setattr(code_mod, "get_sandbox", lambda: _Waived())
    s = get_reward("code", allow_weaker_isolation=True)({"tests": "assert x == 1"}, "x = 1")
    assert s.status == "pass" and s.info["isolation"] == "basic" and s.info["isolation_waived"] is True


def test_bad_parameters_fail_at_build_time():
    with pytest.raises(ValueError, match="min_isolation"):
        get_reward("code", min_isolation="maximum")
    with pytest.raises(ValueError, match="timeout"):
        get_reward("code", timeout=0)


def test_stdio_failure_names_the_first_differing_line(fn):
    s = fn({"tests": [{"input": "3", "output": "0\n1\n4\n"}]}, "for i in range(int(input()) - 1):\n    print(i * i)")
    assert s.status == "fail" and s.info["reason"] == "output line 3: expected '4', got '<no line>'"


def test_humaneval_test_column_is_accepted(fn):
    row = {"test": "def check(candidate):\n    assert candidate(3) == 9\n", "entry_point": "sq"}
    assert fn(row, "def sq(x):\n    return x * x").status == "pass"
    assert fn(row, "def sq(x):\n    return x + x").status == "fail"


TEN_ASSERTS = "\n".join(f"assert f({i}) == {i * i}" for i in range(10))


@pytest.fixture(scope="module")
def partial_fn():
    return get_reward("code", partial=True, timeout=4.0)


def test_partial_credit_counts_asserts_never_reached_as_failed(partial_fn):
    """Fails on the code before this change: exiting after the first assert scored 0.5 (1 of 2 counted),
    while an honest solution that only gets f(0) right scored 0.1."""
    honest = partial_fn({"tests": TEN_ASSERTS}, "def f(x):\n    return 0")
    quitter = partial_fn(
        {"tests": TEN_ASSERTS},
        "import os\ncalls = []\ndef f(x):\n    calls.append(x)\n"
        "    if len(calls) > 1:\n        os._exit(0)\n    return 0",
    )
    crasher = partial_fn({"tests": TEN_ASSERTS}, "def f(x):\n    if x:\n        raise SystemExit(0)\n    return 0")
    assert (honest.status, honest.value, honest.info["total"]) == ("fail", pytest.approx(0.1), 10)
    assert (quitter.status, quitter.value, quitter.info["total"]) == ("fail", pytest.approx(0.1), 10)
    assert crasher.value == pytest.approx(0.1) and crasher.info["total"] == 10


def test_partial_credit_in_check_and_unittest_uses_the_cases_known_before_the_run(partial_fn):
    """Fails on the code before this change (check form: 0.5 instead of 0.25)."""
    check = "def check(candidate):\n" + "".join(f"    assert candidate({i}) == {i + 1}\n" for i in range(4))
    quits = "import os\ndef inc(x):\n    if x == 1:\n        os._exit(0)\n    return x + 1"
    s = partial_fn({"tests": check, "entry_point": "inc"}, quits)
    assert (s.status, s.value, s.info["passed"], s.info["total"]) == ("fail", pytest.approx(0.25), 1, 4)
    unit = "import unittest\nclass T(unittest.TestCase):\n" + "".join(
        f"    def test_{i}(self):\n        self.assertEqual(inc({i}), {i + 1})\n" for i in range(4)
    )
    u = partial_fn({"tests": unit}, quits)
    assert u.status == "fail" and u.info["total"] == 4 and u.value <= 0.25


def test_an_assert_in_a_loop_is_one_case_that_must_hold_every_time(partial_fn):
    tests = "for i in range(5):\n    assert f(i) == i\nassert f(10) == 10"
    s = partial_fn({"tests": tests}, "def f(x):\n    return x if x != 3 else -1")
    assert (s.status, s.info["passed"], s.info["total"], s.value) == ("fail", 1, 2, pytest.approx(0.5))


def test_an_assert_meant_never_to_run_does_not_fail_a_run_that_ends_normally(fn):
    tests = "try:\n    f(-1)\n    assert False, 'no error raised'\nexcept ValueError:\n    pass\nassert f(2) == 2"
    s = fn({"tests": tests}, "def f(x):\n    if x < 0:\n        raise ValueError(x)\n    return x")
    assert (s.status, s.value, s.info["passed"], s.info["total"]) == ("pass", 1.0, 2, 2)


def test_check_without_entry_point_is_bad_input_naming_the_field(fn):
    """Fails on the code before this change: check() was never called and any code passed at 0/0."""
    row = {"tests": "def check(candidate):\n    assert candidate(2) == 4\n"}
    s = fn(row, "def sq(x):\n    return x + 1")
    assert (s.status, s.value) == ("bad_input", None) and "entry_point" in s.info["reason"]


@pytest.mark.parametrize(
    "tests",
    [
        "def test_sq():\n    assert sq(2) == 4\n",  # pytest style: nothing calls it
        "import unittest\nclass T(unittest.TestCase):\n    pass\n",  # no test method
    ],
)
def test_tests_in_which_nothing_ran_are_bad_input(fn, tests):
    """Fails on the code before this change: both passed any code (zero tests run counted as a pass)."""
    s = fn({"tests": tests}, "def sq(x):\n    return x + 1")
    assert (s.status, s.value) == ("bad_input", None) and s.info["reason"]


@pytest.mark.parametrize(
    "tests, entry_point",
    [
        (
            "def check(candidate):\n    for p in candidate(20):\n        assert all(p % d for d in range(2, p))\n",
            "primes",
        ),
        ("for p in primes(20):\n    assert p > 1\n", None),
    ],
)
def test_a_solution_whose_answers_leave_every_assert_unreached_fails(fn, tests, entry_point):
    """Fails on the code before this change: returning [] to tests that loop over the answer ran no assert, and
    the row came out ``bad_input`` (unscored, out of the group's baseline) instead of a scored failure."""
    row = {"tests": tests, "entry_point": entry_point}
    s = fn(row, "def primes(n):\n    return []")
    assert (s.status, s.value) == ("fail", 0.0) and "ran" in s.info["reason"]
    assert fn(row, "def primes(n):\n    return [2, 3, 5, 7, 11, 13, 17, 19]").status == "pass"
