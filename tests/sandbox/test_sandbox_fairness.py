"""Time verdicts a neighbour cannot cause: honest executions beside session-forking CPU hogs never get ``timeout``.

Each hostile execution forks as many children as its process limit allows, each in a session of its own
(``setsid``: one scheduler autogroup each) and spinning. Before this change no slot had a CPU controller, so
each hog took a share per session, and the time limit was judged on the wall clock: correct solutions beside
them timed out (0.0). Now every slot's group has the same CPU weight, and the limit is the execution's own CPU
time under a wall-clock cap three times larger; an execution that was runnable but starved at the cap is a
sandbox error (unscored), never a timeout.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from sandbox import Limits, Sandbox, SandboxError

HOG = """
import os
for _ in range(200):
    try:
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
    except OSError:
        break
while True:
    pass
"""
HONEST = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i % 7\n    return s\n"
TESTS = "assert f(300000) == sum(i % 7 for i in range(300000))\nassert f(10) == 24"
HOG_SECONDS = 20.0  # the honest runs go on while the hogs run (CPU limit 7 s, wall-clock cap 21 s)


def _hog(sb: Sandbox) -> None:
    try:
        sb.run_program(HOG, limits=Limits(timeout_s=7.0))
    except SandboxError:  # (an overloaded machine: the hog itself got too little CPU to be judged)
        pass


@pytest.mark.slow
def test_honest_executions_beside_two_session_forking_hogs_never_time_out(need_layers):
    """Fails on the code before this change: most honest runs beside the hogs got ``timeout``."""
    need_layers("cgroup_pids")  # (without it the hogs' processes count against the user's own process limit)
    sb = Sandbox(slots=4)
    try:
        hogs = [threading.Thread(target=_hog, args=(sb,)) for _ in range(2)]
        for t in hogs:
            t.start()
        time.sleep(1.0)  # (the hogs have forked)
        statuses: Counter[str] = Counter()
        lock = threading.Lock()

        def honest() -> None:
            end = time.monotonic() + HOG_SECONDS
            while time.monotonic() < end and any(t.is_alive() for t in hogs):
                try:
                    status = sb.run_tests(HONEST, TESTS, limits=Limits(timeout_s=2.0)).status
                except SandboxError:
                    status = "sandbox_error"
                with lock:
                    statuses[status] += 1

        workers = [threading.Thread(target=honest) for _ in range(2)]
        for t in workers:
            t.start()
        for t in workers + hogs:
            t.join(300)
    finally:
        sb.close()
    print("honest runs beside the hogs:", dict(statuses))
    assert statuses["timeout"] == 0, statuses
    assert statuses["pass"] >= 5 and set(statuses) <= {"pass", "sandbox_error"}, statuses
