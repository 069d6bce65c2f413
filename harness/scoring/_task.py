"""What a scoring pool takes and remembers: :class:`Task` (one reward call with its limit and its callback),
:class:`TaskPool` (what a scoring session needs of a pool, local or on a cluster) and :class:`KnownPlugin` (a
plugin a worker has built, for the workers that replace it).

This module runs nothing; the pools are :mod:`harness.scoring._pool` and :mod:`harness.scoring._ray`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Task", "TaskPool", "KnownPlugin"]


@dataclass
class Task:
    """One reward call: ``name(params)(sample, completion)`` with a wall-clock limit."""

    name: str
    module: str
    params: dict[str, Any]
    params_key: str
    sample: dict[str, Any]
    completion: str
    timeout: float
    done: Callable[[Task, dict[str, Any] | None, float, tuple[str, str] | None], None]
    tid: int = 0
    node: str | None = None  # the cluster node that ran the call (set by the Ray backend; None on this machine)

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.params_key)

    def wire(self) -> tuple:
        return (self.tid, self.name, self.module, self.params, self.params_key, self.sample, self.completion)


class TaskPool(Protocol):
    """What a scoring session needs of a pool: this module's :class:`WorkerPool` or the Ray backend's pool."""

    def submit(self, tasks: list[Task]) -> None:
        """Queue ``tasks`` and return at once; each one's ``done`` runs exactly once."""

    def close(self) -> None:
        """Stop; queued tasks are failed."""


@dataclass(frozen=True)
class KnownPlugin:
    """A plugin some worker of the pool has built: what a new worker builds before it takes a task."""

    name: str
    module: str
    params: dict[str, Any]
    params_key: str
    build_s: float  # the first measured build, in seconds (later builds are bounded by a few times it)

    def wire(self) -> tuple[str, str, dict[str, Any], str]:
        """The worker's ``build`` message entry."""
        return (self.name, self.module, self.params, self.params_key)
