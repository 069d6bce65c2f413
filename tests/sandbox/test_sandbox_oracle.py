"""The verdict oracle across executions: identical completions that never compute the answer must not learn it.

The attack, as a GRPO group would run it: every completion returns a guess for the first case it does not know
yet and records which calls it received. Had the judge stopped at the first failed case, being called again
meant the last guess was right, and the group learned the hidden values one case at a time. Here the attacker
gets the best channel there is: what it observed in one execution (its own output) is handed to the next one
verbatim (a perfect stand-in for page-cache residency or inode counters). The tests assert that what it
observes does not depend on the hidden values, so it never passes; the control (tests whose own control flow
stops early, which no judge can change) shows the same learner does learn when a stop is observable.
"""

from __future__ import annotations

import json

import pytest

from harness import get_reward
from sandbox import Limits

GUESSES = range(6)
LIMITS = Limits(timeout_s=8.0)

ATTACK = """
import json, os
known, guess = json.loads({state!r})
def f(i):
    os.write(1, b"SEEN %d\\n" % i)  # (straight to fd 1: what a call prints with print() goes to the tests)
    if str(i) in known:
        return known[str(i)]
    return guess
"""


def _tests(values: list[int], leaky: bool) -> str:
    if leaky:  # tests that stop by themselves at the first wrong answer: the control
        body = "".join(f"    if candidate({i}) != {v}:\n        return\n" for i, v in enumerate(values))
        return "def check(candidate):\n" + body + "    assert True\n"
    return "def check(candidate):\n" + "".join(f"    assert candidate({i}) == {v}\n" for i, v in enumerate(values))


def _learn(sandbox, values: list[int], leaky: bool, executions: int) -> tuple[int, list[list[int]]]:
    """Run the group's learner for ``executions`` runs; return how many passed and every observed call list."""
    known: dict[str, int] = {}
    guess_i, passes, transcripts = 0, 0, []
    for _ in range(executions):
        case = len(known)
        guess = GUESSES[guess_i % len(GUESSES)]
        code = ATTACK.format(state=json.dumps([known, guess]))
        s = sandbox.run_tests(code, _tests(values, leaky), "f", limits=LIMITS)
        passes += s.status == "pass"
        out = s.output.decode(errors="replace")
        seen = [int(line.split()[1]) for line in out.splitlines() if line.startswith("SEEN ")]
        transcripts.append(seen)
        if case < len(values) and case + 1 in seen:  # called again past the guessed case: "it was right"
            known[str(case)] = guess
            guess_i = 0
        else:
            guess_i += 1
    return passes, transcripts


@pytest.fixture(scope="module")
def fn():
    return get_reward("code", timeout=8.0)


def test_a_group_storing_what_it_observed_learns_nothing_and_never_passes(sandbox):
    """Fails on the code before this change: the group learned the three values and passed."""
    runs = 3 * len(GUESSES) + 2
    passes_a, seen_a = _learn(sandbox, [4, 1, 5], leaky=False, executions=runs)
    passes_b, seen_b = _learn(sandbox, [2, 5, 3], leaky=False, executions=runs)
    assert passes_a == 0 and passes_b == 0
    assert seen_a == seen_b  # what the solutions observed does not depend on the hidden values at all


def test_control_tests_that_stop_by_themselves_are_learned(sandbox):
    """The same learner against tests whose own control flow stops at a wrong answer (not an assert the judge
    can run past): it learns the values, so the attack above is a real one."""
    passes, _ = _learn(sandbox, [4, 1, 5], leaky=True, executions=3 * len(GUESSES) + 2)
    assert passes >= 1


def test_stdin_stdout_cases_all_run_whatever_the_earlier_outputs(fn):
    """Each stdin/stdout case is its own run; every one runs, so being run again says nothing."""
    cases = [{"input": str(i), "output": str(v)} for i, v in enumerate([4, 1, 5])]
    s = fn({"tests": cases}, "input()\nprint(0)")
    assert s.status == "fail" and [t["case"] for t in s.info["tests"]] == [0, 1, 2]


BOX = """
import os
class Box:  # a container of the solution's own: the judge holds a proxy and asks it for items
    def __iter__(self):
        os.write(1, b"ITER\\n")
        for v in ({guess}, 7):
            os.write(1, b"NEXT\\n")
            yield v
        os.write(1, b"END\\n")
    def __repr__(self):
        os.write(1, b"REPR\\n")
        return "Box()"
def f():
    os.write(1, b"CALL\\n")
    return Box()
"""

MEMBERSHIP_TESTS = {
    "asserts": "assert 4 in f()\nassert 4 in f()\n",
    "unittest": (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_a(self):\n"
        "        self.assertIn(4, f())\n"
        "        self.assertIn(4, f())\n"
        "    def test_b(self):\n"
        "        self.assertEqual(list(f()), [4, 7])\n"
        "        self.assertIn(4, f())\n"
    ),
}


@pytest.mark.parametrize("form", sorted(MEMBERSHIP_TESTS))
def test_membership_in_a_solution_object_shows_nothing_of_the_expected_value(sandbox, form):
    """Fails on the code before this change: the judge stopped iterating the solution's container at the first
    match (a guess that was right asked for one item fewer), and unittest's failure message asked the solution
    for the container's repr (only when the assertion failed)."""
    seen = {}
    for guess in (4, 5):
        s = sandbox.run_tests(BOX.format(guess=guess), MEMBERSHIP_TESTS[form], limits=LIMITS)
        assert s.status == ("pass" if guess == 4 else "fail"), s
        seen[guess] = s.output.decode(errors="replace").split()
    assert "CALL" in seen[4] and seen[4] == seen[5]


@pytest.mark.parametrize(
    "assertion",
    [
        "assert all(candidate(i) == v for i, v in enumerate(VALUES))",
        "assert not any(candidate(i) != v for i, v in enumerate(VALUES))",
        "assert len(VALUES) == 3 and all(map(lambda iv: candidate(iv[0]) == iv[1], enumerate(VALUES)))",
    ],
)
def test_every_item_of_all_and_any_in_an_assert_is_asked_whatever_the_answers(sandbox, assertion):
    """Fails on the code before this change: all() and any() stopped at the first wrong answer, so whether the
    solution was asked about the next item said whether its last answer was right."""
    seen = []
    for values in ([4, 1, 5], [4, 4, 2], [4, 4, 4]):
        tests = f"VALUES = {values!r}\ndef check(candidate):\n    {assertion}\n"
        s = sandbox.run_tests(ATTACK.format(state=json.dumps([{}, 4])), tests, "f", limits=LIMITS)
        assert s.status == ("pass" if values == [4, 4, 4] else "fail"), s
        out = s.output.decode(errors="replace")
        seen.append([int(line.split()[1]) for line in out.splitlines() if line.startswith("SEEN ")])
    assert seen == [[0, 1, 2]] * 3


@pytest.mark.parametrize(
    "line",
    [
        "tc.assertEqual(candidate({i}), {v})",
        "assert_same(candidate({i}), {v})",
        "tc.assertTrue(candidate({i}) == {v})",
    ],
)
def test_assertion_calls_outside_test_classes_are_cases_that_never_stop_the_tests(sandbox, line):
    """Fails on the code before this change: ``tc.assertEqual(...)`` on a ``TestCase`` made at module level raised
    at the first wrong answer and ended the tests, so being called again said that the last answer was right."""
    head = "import unittest\ntc = unittest.TestCase()\nassert_same = tc.assertEqual\ndef check(candidate):\n"
    seen = []
    for values in ([4, 1, 5], [4, 4, 2], [4, 4, 4]):
        tests = head + "".join("    " + line.format(i=i, v=v) + "\n" for i, v in enumerate(values))
        s = sandbox.run_tests(ATTACK.format(state=json.dumps([{}, 4])), tests, "f", partial=True, limits=LIMITS)
        assert s.status == ("pass" if values == [4, 4, 4] else "fail"), s
        assert (s.passed, s.total) == (values.count(4), 3)
        out = s.output.decode(errors="replace")
        seen.append([int(line.split()[1]) for line in out.splitlines() if line.startswith("SEEN ")])
    assert seen == [[0, 1, 2]] * 3


def test_a_failed_unittest_assertion_does_no_more_work_than_the_comparison():
    """Fails on the code before this change: a failed assertEqual of two lists compared the items again in Python
    to find the first difference and built a diff from the repr of each (on a 100 000-item list, 356 ms against
    0.9 ms for an equal one): a gap the solution could time to learn that its answer was wrong."""
    import unittest

    from sandbox._cases import Recorder, run_unittest

    calls: list[str] = []

    class Item:
        def __eq__(self, other: object) -> bool:
            calls.append("eq")
            return False

        def __ne__(self, other: object) -> bool:
            calls.append("ne")
            return True

        def __repr__(self) -> str:
            calls.append("repr")
            return "Item()"

        __hash__ = object.__hash__

    class T(unittest.TestCase):
        def test_list(self) -> None:
            self.assertEqual([Item()], [1])

        def test_dict(self) -> None:
            self.assertEqual({"a": Item()}, {"a": 1})

        def test_in(self) -> None:
            self.assertIn(Item(), [1])

    rec = Recorder()
    run_unittest(unittest.defaultTestLoader.loadTestsFromTestCase(T), rec)
    assert rec.outcome == {0: False, 1: False, 2: False}
    assert calls == ["eq"] * 3  # one comparison each, as a plain == does, and no repr
