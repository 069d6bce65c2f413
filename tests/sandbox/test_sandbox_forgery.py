"""Verdict forgeries: every trick that fools an in-process evaluator must score 0 here.

Each solution below is wrong (``f`` should return 1); the trick is the only thing that could make it pass.
"""

from __future__ import annotations

import pytest

TESTS = "import math\nassert f() == 1\nassert 1 in [f()]\nassert math.isclose(g(), 0.5)\nassert abs(g() - 0.5) < 1e-9"
WRONG = "def f():\n    return 0\ndef g():\n    return 0.0\n"

TRICKS = {
    "sys_exit_zero_before_tests": WRONG + "import sys\nsys.exit(0)",
    "os_exit_zero_at_import": WRONG + "import os\nos._exit(0)",
    "atexit_os_exit_zero": WRONG + "import atexit, os\natexit.register(lambda: os._exit(0))",
    "exit_inside_call": "def f():\n    raise SystemExit(0)\ndef g():\n    raise SystemExit(0)",
    "os_exit_inside_call": "import os\ndef f():\n    os._exit(0)\ndef g():\n    os._exit(0)",
    "eq_always_true": "class A:\n    def __eq__(self, o): return True\n    def __sub__(self, o): return 0\n    def __float__(self): return 0.5\n"
    "    __abs__ = lambda self: 0\ndef f():\n    return A()\ndef g():\n    return A()",
    "int_subclass_eq": "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\nclass F(float):\n"
    "    def __sub__(self, o): return 0.0\ndef f():\n    return I(0)\ndef g():\n    return F(0.0)",
    "settrace_skips_asserts": WRONG + "import sys\nsys.settrace(lambda *a: None)\nsys.setprofile(lambda *a: None)",
    "reexec_with_O": WRONG
    + "import os, sys\nif not sys.flags.optimize:\n    os.execv(sys.executable, [sys.executable, '-O', '-c', 'pass'])",
    "prints_all_tests_passed": WRONG
    + "print('all tests passed')\nprint('PASS')\nimport sys\nsys.stderr.write('OK\\n')",
    "patch_builtins": WRONG + "import builtins, math\nbuiltins.abs = lambda x: 0\nmath.isclose = lambda *a, **k: True\n"
    "builtins.AssertionError = type('X', (BaseException,), {})",
    "patch_assertion_via_ctypes": WRONG + "import ctypes\nctypes.pythonapi.Py_Exit.argtypes = [ctypes.c_int]",
    "write_fake_verdict_to_fds": WRONG + "import os, json, struct\nfor fd in range(3, 64):\n    try:\n"
    "        d = json.dumps({'status': 'pass', 'passed': 3, 'total': 3}).encode()\n"
    "        os.write(fd, struct.pack('>I', len(d)) + d)\n    except OSError: pass",
    "reload_os_and_unlink_tests": WRONG
    + "import importlib, os, posix\nimportlib.reload(os)\nfor p in ('tests.py', '/tmp/tests.py'):\n"
    "    try: posix.unlink(p)\n    except OSError: pass",
    "kill_judge_by_uid_scan": WRONG
    + "import os, signal\nfor p in os.listdir('/proc') if os.path.isdir('/proc') else []:\n"
    "    try: os.kill(int(p), signal.SIGKILL)\n    except Exception: pass",
    "keyboard_interrupt_in_call": "def f():\n    raise KeyboardInterrupt\ndef g():\n    raise KeyboardInterrupt",
    "generator_exit_in_call": "def f():\n    raise GeneratorExit\ndef g():\n    raise GeneratorExit",
    "huge_reply_to_judge": "def f():\n    return [0] * (1 << 24)\ndef g():\n    return 0.0",
    "deep_nesting_reply": "def f():\n    x = []\n    for _ in range(100000): x = [x]\n    return x\ndef g():\n    return 0.0",
    "str_subclass_with_eq": "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
    "def f():\n    return S('no')\ndef g():\n    return S('no')",
    "contains_always_true": "class Bag:\n    def __contains__(self, item): return True\n    def __iter__(self): return iter(())\n"
    "def f():\n    return Bag()\ndef g():\n    return 0.0",
    "shadow_builtins_the_tests_use": WRONG + "def abs(x):\n    return 0\ndef isinstance(*a):\n    return True\n"
    "class AssertionError(Exception): pass",
    "forged_hello_with_dunder_names": WRONG + "import os, json, struct\n"
    "d = json.dumps({'loaded': True, 'names': {'__builtins__': ['N'], "
    "'__harness_assert__': ['N'], 'f': ['I', '1']}}).encode()\n"
    "os.write(5, struct.pack('>I', len(d)) + d)\nimport time\ntime.sleep(30)",
}


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_forgery_scores_zero(code_fn, clean, name):
    s = code_fn({"tests": TESTS}, TRICKS[name])
    assert s.value == 0.0, (name, s.status, s.info.get("reason"))
    assert s.status != "pass"


def test_membership_tests_never_send_the_expected_value(code_fn, clean):
    tests = "assert 'secret-expected' in f()\nassert 3 in f()"
    src = (
        "class Spy:\n    seen = []\n    def __contains__(self, item):\n        Spy.seen.append(item)\n        return True\n"
        "    def __iter__(self):\n        return iter(Spy.seen)\ndef f():\n    return Spy()\n"
    )
    s = code_fn({"tests": tests}, src)
    assert s.status == "fail"


def test_unittest_patch_in_solution_does_not_reach_the_judge(code_fn, clean):
    tests = "import unittest\nclass T(unittest.TestCase):\n    def test_f(self):\n        self.assertEqual(f(), 1)\n"
    src = (
        WRONG
        + "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\nunittest.TestCase.run = lambda *a, **k: None"
    )
    s = code_fn({"tests": tests}, src)
    assert s.status == "fail"


def test_check_patching_via_globals_has_no_effect(code_fn, clean):
    tests = "def check(candidate):\n    assert candidate(2) == 4\n"
    src = "def sq(x):\n    return x + 3\ncheck = lambda c: None\n"
    s = code_fn({"tests": tests, "entry_point": "sq"}, src)
    assert s.status == "fail"


@pytest.mark.parametrize(
    "fake",
    [
        "class math:\n    isclose = staticmethod(lambda *a, **k: True)\n    pi = 0\n",
        "import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True, pi=0)\n",
    ],
)
def test_a_module_name_the_tests_use_without_importing_it_is_the_real_module(code_fn, clean, fake):
    """Fails on the code before this change: MBPP-style tests call ``math.isclose`` relying on the solution's
    ``import math``; a solution that bound ``math`` to its own object answered ``isclose`` itself and passed."""
    row = {"tests": ["assert math.isclose(volume(10), 4188.79, rel_tol=0.001)", "assert volume(1) > math.pi"]}
    s = code_fn(row, fake + "def volume(r):\n    return 5000.0\n")
    assert (s.status, s.value) == ("fail", 0.0), s.info.get("reason")
    ok = code_fn(row, "import math\ndef volume(r):\n    return 4 / 3 * math.pi * r ** 3\n")
    assert ok.status == "pass", ok.info.get("reason")


def test_an_entry_point_named_like_a_builtin_is_the_candidate_and_nothing_else(code_fn, clean):
    """A correct ``def sorted(xs)`` passes (it scored error before: the name was dropped as a builtin's), and a
    wrong one cannot answer for the tests' own ``sorted()`` that computes the expected value."""
    row = {
        "test": "def check(candidate):\n    xs = [3, 1, 2]\n    assert candidate(xs) == sorted(xs)\n",
        "entry_point": "sorted",
    }
    wrong = code_fn(row, "def sorted(xs):\n    return 0\n")
    assert (wrong.status, wrong.value) == ("fail", 0.0), wrong.info.get("reason")
    right = code_fn(row, "def sorted(xs):\n    out = list(xs)\n    out.sort()\n    return out\n")
    assert right.status == "pass", right.info.get("reason")


def _wait_blocked_reading(proc, fd: int, timeout: float = 60.0) -> None:
    """Wait until ``proc`` sleeps in a system call on ``fd`` (Linux ``/proc/PID/syscall``: number, then arguments).

    A process asleep reading its channel is waiting for the peer: whatever it was going to do first is done."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the process exited with {proc.returncode} before it waited on fd {fd}"
        try:
            fields = open(f"/proc/{proc.pid}/syscall").read().split()
            state = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError as e:
            pytest.skip(f"/proc/PID/syscall is not readable here ({e}): cannot see the process wait")
        if state == "S" and len(fields) > 1 and fields[0] != "running" and int(fields[1], 16) == fd:
            return
        time.sleep(0.01)
    raise AssertionError(f"the process did not wait on fd {fd} within {timeout:g} s")


def test_the_solution_runs_only_once_its_judge_is_set_up(tmp_path):
    """Fails on the code before this change: the solution's code ran as soon as its own setup was done, while its
    judge could still be setting up, so code that hogs the machine (a fork or memory bomb) competed with its own
    judge's setup, and a judge not up by the deadline makes the run ``sandbox_error`` (unscored) instead of 0.
    The solution process now waits for the judge's go (the real module, driven here over a socket pair in place
    of the judge), so no setup of a run can be slowed by that run's own code."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from sandbox import _wire

    root = Path(__file__).resolve().parents[2]
    marker = tmp_path / "ran"
    ours, theirs = socket.socketpair()
    code = f"open({str(marker)!r}, 'w').write('ran')\ndef f():\n    return 1\n"
    prog = (
        f"import sys\nsys.path.insert(0, {str(root)!r})\nfrom sandbox import _solution\n"
        f"_solution.serve_functions({code!r}, {theirs.fileno()})"
    )
    theirs_fd = theirs.fileno()  # the same number in the child (pass_fds keeps it)
    p = subprocess.Popen([sys.executable, "-c", prog], pass_fds=(theirs_fd,), cwd=tmp_path)
    theirs.close()
    try:
        _wait_blocked_reading(p, theirs_fd)  # the solution process waits for its go (the event, not a sleep)
        assert not marker.exists()  # no go yet: nothing of the solution has run
        _wire.send(ours.fileno(), {"go": True})
        hello = _wire.recv(ours.fileno())
        assert hello["loaded"] is True and "f" in hello["names"] and marker.read_text() == "ran"
    finally:
        ours.close()
        p.wait(timeout=30)
