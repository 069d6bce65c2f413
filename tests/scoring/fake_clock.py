"""A clock the test moves by hand, for the logic of the scoring path's time limits.

The pool and the inline runner take a ``clock``; with this one a limit passes exactly when the test says, so the
tests that use it assert exact latencies and verdicts whatever the machine's load. It replaces only the reading of
time: the workers, their kills and the threads are real. A few real-time tests stay beside them, marked ``slow``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["FakeClock", "wait_until"]


class FakeClock:
    """Seconds that move only when :meth:`advance` is called (thread-safe)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now, self._lock = start, threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` in real time (generous for a loaded machine); fail naming ``what`` if it never holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting until {what}")
        time.sleep(0.01)
