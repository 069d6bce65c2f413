"""When an execution's time is up: its own CPU time against the limit, under a wall-clock cap a few times larger.

Contest judges time a solution by the CPU it used, not by the clock on the wall: a neighbour that forks a
thousand sessions (each its own scheduler group) can slow a correct solution down but not make it use more
CPU. The host first looks when the wall clock reaches the CPU limit (a solution cannot use more CPU than wall
time on one core), then again after the CPU time still left, until the execution used its CPU limit (a
``timeout``; code running on several cores at once also needs the limit to pass on the wall clock, as in a plain
run) or the wall-clock cap passed. At the cap, an execution that slept or blocked is a ``timeout`` too;
one that is runnable but short of CPU (a busy machine) gets more wall time, up to a hard cap; one still short
of CPU there cannot be judged on this machine now, and the caller reports a sandbox error (unscored), never
the solution's 0.

This module reads no clocks of the execution itself; the server measures (:mod:`sandbox._usage`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sandbox._shares import Progress, reserve_s

__all__ = ["HARD_FACTOR", "WALL_FACTOR", "ExecutionClock"]

#: The wall-clock cap is this many times the CPU limit (sleeping or blocked code, and a busy machine's slack).
WALL_FACTOR = 3.0
#: An execution still runnable at the cap (the machine is busy, not the solution asleep) gets up to this many
#: times its CPU limit of wall time to use its CPU; past that it is a sandbox error.
HARD_FACTOR = 10.0
_MIN_STEP_S = 0.02


class ExecutionClock:
    """Decides, each time the host's deadline passes, whether an execution's time is up or when to look again."""

    def __init__(
        self,
        usage: Callable[[], dict[str, Any]],
        t0: float,
        cpu_limit_s: float,
        progress: Callable[[], Progress] | None = None,
        reserve_s: float = 0.0,
        skipped: int = 0,
    ) -> None:
        """``progress``: the test cases' progress so far (:mod:`sandbox._shares`): then each case may use the
        limit minus ``reserve_s`` (0: a quarter of the limit over the cases) for every case not begun yet (``skipped``:
        cases decided before)."""
        self.usage, self.t0, self.cpu_limit_s = usage, t0, cpu_limit_s
        self.progress, self.reserve_s, self.skipped = progress, reserve_s, skipped
        self.case: int | None = None  # the case that was running when the time was up
        self.elapsed_s = 0.0
        self.cpu_s = self.wait_s = self.runnable_s = 0.0
        self.kind = ""  # "cpu" or "wall" once the time is up

    @property
    def first_deadline(self) -> float:
        return self.t0 + self._allowed()[0]

    def _allowed(self) -> tuple[float, Progress | None]:
        """The CPU the execution may have used by now (its running case's share), and the progress read."""
        if self.progress is None:
            return self.cpu_limit_s, None
        p = self.progress()
        reserve = self.reserve_s or reserve_s(self.cpu_limit_s, p.cases - self.skipped)
        return min(self.cpu_limit_s, p.allowed_s(self.cpu_limit_s, reserve, self.skipped)), p

    def extend(self) -> float | None:
        """A later deadline to look again at, or None when the time is up (``kind`` says which limit)."""
        now = time.monotonic()
        try:
            u = self.usage()
            self.cpu_s, self.wait_s = float(u.get("cpu_s", 0.0)), float(u.get("wait_s", 0.0))
            self.runnable_s = float(u.get("runnable_s", 0.0))
        except Exception:  # (the server is gone: the run is lost in any case; stop here)
            self.kind = "wall"
            return None
        self.elapsed_s = now - self.t0
        allowed, p = self._allowed()
        if self.cpu_s >= allowed and self.elapsed_s >= allowed:  # (parallel code may use its CPU time faster
            self.kind = "cpu"  # than the wall clock: as in a plain run it has the limit in wall time too)
            self.case = p.running if p is not None else None
            return None
        # past the cap, an execution that is runnable (not sleeping) but short of CPU is given more wall time, up
        # to the hard cap: on a loaded machine it then still gets its CPU-time verdict
        factor = HARD_FACTOR if self._runnable() else WALL_FACTOR
        cap = self.t0 + factor * allowed  # (a case's share of the wall-clock cap as of its share of the CPU)
        if now >= cap:
            self.kind = "wall"
            self.case = p.running if p is not None else None
            return None
        wait = max(allowed - self.cpu_s, self.t0 + allowed - now)
        return min(cap, now + max(_MIN_STEP_S, wait))

    def _runnable(self) -> bool:
        return self.runnable_s >= 0.5 * self.elapsed_s

    @property
    def starved(self) -> bool:
        """Out of wall time, short of its CPU limit, and a thread of the execution was runnable (running or
        waiting for a CPU) for at least half of it: the machine did not give it the CPU it asked for.

        With an equal CPU weight per slot a busy execution gets its share of the machine, so spinning threads of
        its own reach the CPU limit long before the hard cap (``timeout``): an execution cannot make itself
        unscored this way unless the machine is overloaded in any case."""
        return self.kind == "wall" and self._runnable()

    def reason(self) -> str:
        if self.kind == "cpu" and self.case is not None:
            return f"test case {self.case} ran out of its share of the {self.cpu_limit_s:.1f}s CPU time limit"
        if self.kind == "cpu":
            return f"CPU time limit of {self.cpu_limit_s:.1f}s reached"
        return f"wall-clock limit of {self.elapsed_s:.1f}s reached after {self.cpu_s:.2f}s of CPU time"

    def starved_reason(self) -> str:
        return (
            f"the machine gave the execution {self.cpu_s:.2f}s of CPU in {self.elapsed_s:.1f}s (its threads waited "
            f"{self.wait_s:.2f}s for a CPU): too busy to judge a {self.cpu_limit_s:.1f}s limit"
        )
