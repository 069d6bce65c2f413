"""Each test case runs under its own share of the time limit: a case that hangs costs that case, not the ones after.

Fails on the code before this change: a hang in the third of five asserts ended the run (the last two never ran,
so partial credit was 0 or 2/5 at best, and the solution could tell that it had hung). Now the hanging case is
a timeout and the cases after it run in a new execution, on the time that was kept for them.
"""

from __future__ import annotations

import pytest

from harness import get_reward
from sandbox import Limits
from sandbox._shares import Progress, Shares, reserve_s

SPIN = "def f(x):\n    if x == 2:\n        while True:\n            pass\n    return x * x\n"
SLEEP = "import time\ndef f(x):\n    if x in (1, 3):\n        time.sleep(600)\n    return x * x\n"
ASSERTS = "\n".join(f"assert f({i}) == {i * i}" for i in range(5))
CHECK = "def check(candidate):\n" + "".join(f"    assert candidate({i}) == {i * i}\n" for i in range(5))
UNIT = "import unittest\nclass T(unittest.TestCase):\n" + "".join(
    f"    def test_{i}(self):\n        self.assertEqual(f({i}), {i * i})\n" for i in range(5)
)
LIMITS = Limits(timeout_s=2.0)


@pytest.mark.slow
@pytest.mark.parametrize(("tests", "entry_point"), [(ASSERTS, None), (CHECK, "f"), (UNIT, None)])
def test_a_spinning_case_is_a_timeout_and_every_other_case_still_runs(sandbox, tests, entry_point):
    r = sandbox.run_tests(SPIN, tests, entry_point, limits=LIMITS)
    assert (r.status, r.passed, r.total) == ("timeout", 4, 5), r.reason
    assert "test case(s) 2 ran out of their share" in r.reason


@pytest.mark.slow
def test_sleeping_cases_each_lose_only_themselves(sandbox):
    r = sandbox.run_tests(SLEEP, ASSERTS, limits=LIMITS)
    assert (r.status, r.passed, r.total) == ("timeout", 3, 5) and "1, 3" in r.reason


@pytest.mark.slow
def test_partial_credit_keeps_the_cases_that_held_beside_a_hang():
    s = get_reward("code", partial=True, timeout=2.0)({"tests": ASSERTS}, SPIN)
    assert (s.status, s.value) == ("time_limit", pytest.approx(0.8))
    all_or_nothing = get_reward("code", timeout=2.0)({"tests": ASSERTS}, SPIN)
    assert (all_or_nothing.status, all_or_nothing.value) == ("time_limit", 0.0)


def test_progress_lines_give_the_running_case_and_the_cpu_it_may_use():
    p = Progress.parse(0, b"n 4\nb 0\nr 0 1\nb 1\nr 1 0\nr 1 1\nb 2\nb 3\nr 3")  # (the last line is cut off)
    assert (p.cases, p.begun, p.outcome, p.running) == (4, [0, 1, 2, 3], {0: True, 1: False}, 3)
    r = reserve_s(4.0, 4)
    assert r == 0.25 and Progress.parse(4, b"").allowed_s(4.0, r) == 3.0  # before any case: three quarters
    assert p.allowed_s(4.0, r) == 4.0  # the last case may use what is left
    assert Progress.parse(4, b"b 0\n").allowed_s(4.0, r) == 3.25  # three cases not begun keep 0.25 each
    nxt = Shares(4.0, 4).after(p, {0: True, 1: False, 2: False})
    assert nxt == Shares(0.5, 4, 0.25, (0, 1, 2))  # one case left: its reserve, plus one for the solution's start
