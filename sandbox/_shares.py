"""Each test case's own share of the time limit: the judge's progress lines, and the CPU each case may use.

The judge writes a line when the tests have ``n`` cases (``n 12``), when a case begins for the first time
(``b 3``) and when a case's outcome is first known or first fails (``r 3 1``, ``r 3 0``): a few lines per case
whatever the tests loop over. From them the host knows which case is running. A case may use the execution's
CPU limit minus a reserve for every case after it, so no case can take the time of the ones after it: when a
case runs out of its share the execution is ended, that case is recorded as a timeout, and a new execution runs
the cases not decided yet (the decided ones skipped) on the reserves that were kept for them. Every case thus
runs, each under its own share, whatever an earlier one did.

This module reads and computes; :mod:`sandbox.service` runs the executions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Progress", "Shares", "reserve_s"]


def reserve_s(budget_s: float, cases: int) -> float:
    """CPU seconds kept for each case that has not begun: a quarter of the execution's budget spread over its
    cases, so the solution's start and the first case have at least three quarters of it (a run near its limit
    keeps the verdict of a plain run unless one case takes most of the time) and every later case keeps enough
    for an ordinary assert after a hang."""
    return budget_s / (4 * max(1, cases))


@dataclass(frozen=True)
class Shares:
    """One execution's time: its CPU budget, the tests' cases, the reserve per case not begun (0: a quarter of the
    budget over the cases, once the judge said how many), and the cases earlier executions decided (skipped)."""

    budget_s: float
    cases: int
    reserve_s: float = 0.0
    skip: tuple[int, ...] = ()

    def after(self, progress: Progress, decided: dict[int, bool]) -> Shares:
        """The shares of the next execution, which runs the cases not ``decided`` yet on their reserves (plus one
        for the solution's start)."""
        reserve = self.reserve_s or reserve_s(self.budget_s, progress.cases)
        left = max(0, progress.cases - len(decided))
        return Shares((left + 1) * reserve, progress.cases, reserve, tuple(sorted(decided)))


@dataclass
class Progress:
    """What the judge's progress lines said so far."""

    cases: int
    begun: list[int] = field(default_factory=list)  # cases in the order they first began
    outcome: dict[int, bool] = field(default_factory=dict)
    _tail: bytes = b""

    @classmethod
    def parse(cls, cases: int, data: bytes) -> Progress:
        """The progress that the lines in ``data`` report (a line cut off at the end waits)."""
        p = cls(cases)
        p.feed(data)
        return p

    def feed(self, data: bytes) -> None:
        """Parse the complete lines of ``data`` (the rest waits for the next call)."""
        lines = (self._tail + data).split(b"\n")
        self._tail = lines.pop()[-64:]
        for line in lines:
            parts = line.split()
            try:
                if parts[0] == b"n" and len(parts) == 2:
                    self.cases = max(self.cases, int(parts[1]))
                elif parts[0] == b"b" and len(parts) == 2:
                    self.begun.append(int(parts[1]))
                elif parts[0] == b"r" and len(parts) == 3:
                    case = int(parts[1])
                    self.outcome[case] = self.outcome.get(case, True) and parts[2] == b"1"
            except (IndexError, ValueError):
                continue

    @property
    def running(self) -> int | None:
        """The case that began last and has no outcome yet, if any."""
        if self.begun and self.begun[-1] not in self.outcome:
            return self.begun[-1]
        return None

    def allowed_s(self, budget_s: float, reserve: float, skipped: int = 0) -> float:
        """CPU seconds the execution may have used by now: the budget minus the reserve of every case that has
        not begun yet (``skipped``: cases decided by earlier executions, which never begin in this one)."""
        return budget_s - max(0, self.cases - skipped - len(self.begun)) * reserve
