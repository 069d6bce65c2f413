"""How much CPU an execution used, and how long its runnable processes waited for a CPU (read in the server).

The time verdict is judged on the execution's own CPU time, as contest judges do, so a neighbour that takes the
machine cannot turn a correct solution into a ``timeout``. With a CPU accounting controller the groups count
it (every process, exited ones included); without one (no root) it is summed over the live processes under the
execution's keeper, each with the CPU time of the children it reaped. The time a runnable process waited on a
run queue (``/proc/<pid>/task/<tid>/schedstat``) tells an execution that was runnable but got no CPU from one
that slept or blocked: the host reports the first as a sandbox error, never as the solution's timeout.

This module decides nothing; :mod:`sandbox.service` does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["process_tree", "runnable_seconds", "tree_cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16).decode(errors="replace")
    except OSError:
        return ""


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def process_tree(roots: Iterable[int]) -> set[int]:
    """``roots`` and every live descendant (through ``/proc/<pid>/task/<tid>/children``)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for tid in _tasks(pid):
            stack += [int(c) for c in _read(f"/proc/{pid}/task/{tid}/children").split()]
    return seen


def tree_cpu_seconds(pids: Iterable[int]) -> float:
    """User + system time of ``pids`` and of the children each of them reaped (``/proc/<pid>/stat``)."""
    ticks = 0
    for pid in pids:
        stat = _read(f"/proc/{pid}/stat")
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 14:  # (fields 14-17 of stat: utime stime cutime cstime, here from index 11)
            ticks += sum(int(x) for x in fields[11:15])
    return ticks / _TICK


def runnable_seconds(pids: Iterable[int]) -> tuple[float, float]:
    """(total time the threads of ``pids`` waited for a CPU while runnable, the longest time one thread was
    runnable: running or waiting), from ``schedstat``. A thread that slept or blocked was neither."""
    waited = longest = 0
    for pid in pids:
        for tid in _tasks(pid):
            fields = _read(f"/proc/{pid}/task/{tid}/schedstat").split()
            if len(fields) >= 2:
                run, wait = int(fields[0]), int(fields[1])
                waited += wait
                longest = max(longest, run + wait)
    return waited / 1e9, longest / 1e9
