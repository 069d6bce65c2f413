"""The task registry: ``@task("name")`` on a factory, :func:`register_task`, entry points, lookup by name.

A task is registered as a *factory* ``() -> Task`` (built on first lookup, so listing never reads data) or as a
:class:`~harness.tasks.Task` itself. Sources, in the order they load on the first lookup or listing:

1. grpo-harness's own ``grpo_harness.tasks`` entry points (pyproject.toml): the built-ins, origin ``built-in``;
2. the user plugins named with ``--plugin`` or the run config's ``plugins:`` (:mod:`harness.plugins`): a ``.py``
   file or module whose import calls ``@task``, or a task file (``.yaml``) read by
   :func:`harness.tasks.load_task_file`;
3. other distributions' ``grpo_harness.tasks`` entry points (none under ``GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``):
   ``NAME = "pkg.module:factory"`` or a module whose import registers tasks; one that fails to import is a warning.

The same name from two different origins is a :class:`~harness.tasks.TaskError` naming both; registering the same
object again (a module imported twice) is not. This module reads no data and runs no rewards.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import inspect
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.hooks import TASKS, other_entry_points, own_entry_points
from harness.tasks._types import Task, TaskError

__all__ = ["task", "register_task", "get_task", "list_tasks", "unregister_task", "TaskFactory"]

log = logging.getLogger(__name__)

TaskFactory = Callable[[], Task]


@dataclass
class _Entry:
    name: str
    origin: str
    factory: TaskFactory | None = None
    built: Task | None = None

    def build(self) -> Task:
        if self.built is None:
            assert self.factory is not None, "an entry holds a factory or a built task"
            try:
                made = self.factory()
            except TaskError:
                raise
            except Exception as e:
                raise TaskError(
                    f"task {self.name!r} ({self.origin}): its factory raised {type(e).__name__}: {e}"
                ) from e
            if not isinstance(made, Task):
                raise TaskError(
                    f"task {self.name!r} ({self.origin}): its factory returned {type(made).__name__}, expected a Task"
                )
            self.built = dataclasses.replace(made, name=self.name, origin=self.origin)
        return self.built

    def same_as(self, other: _Entry) -> bool:
        if self.factory is not None or other.factory is not None:
            return self.factory is other.factory
        return self.built == other.built


class _Registry:
    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}
        self.loaded = False
        self.loading = False
        self.origin_override: str | None = None
        self.lock = threading.RLock()

    def add(self, entry: _Entry) -> None:
        if self.origin_override is not None:
            entry.origin = self.origin_override
            if entry.built is not None:
                entry.built = dataclasses.replace(entry.built, origin=entry.origin)
        old = self.entries.get(entry.name)
        if old is not None and not old.same_as(entry):
            if old.origin != entry.origin:
                raise TaskError(
                    f"task {entry.name!r} is registered twice: by {old.origin} and by {entry.origin}; "
                    "rename one of them"
                )
        self.entries[entry.name] = entry

    def load(self) -> None:
        with self.lock:
            if self.loaded or self.loading:
                return
            self.loading = True
            try:
                for ep in own_entry_points(TASKS):
                    self._load_entry_point(ep, "built-in", own=True)
                _import_user_plugins()
                for ep in other_entry_points(TASKS):
                    self._load_entry_point(ep, _dist_label(ep), own=False)
                self.loaded = True
            finally:
                self.loading = False

    def _load_entry_point(self, ep: md.EntryPoint, label: str, *, own: bool) -> None:
        self.origin_override = label
        try:
            obj = ep.load()
        except TaskError:
            raise
        except Exception as e:
            if own:
                raise
            warnings.warn(f"task plugin {label} failed to import and is skipped: {type(e).__name__}: {e}", stacklevel=2)
            return
        finally:
            self.origin_override = None
        if inspect.ismodule(obj):
            return  # importing it registered its tasks through @task
        name = getattr(obj, "__task_name__", None)
        if name is not None:  # a factory decorated with @task: the entry point names where it comes from
            entry = self.entries.get(name)
            if entry is not None and entry.factory is obj:
                entry.origin = label
            return
        self.origin_override = label
        try:
            if isinstance(obj, Task):
                self.add(_Entry(ep.name, label, built=dataclasses.replace(obj, name=ep.name, origin=label)))
            elif callable(obj):
                self.add(_Entry(ep.name, label, factory=obj))
            else:
                warnings.warn(f"task plugin {label} is not a Task, a factory or a module; skipped", stacklevel=2)
        finally:
            self.origin_override = None


def _dist_label(ep: md.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    pkg = dist.metadata["Name"] if dist is not None else "?"
    return f"entry point {pkg}:{ep.name} ({ep.value})"


def _import_user_plugins() -> None:
    """Import the plugins recorded with ``--plugin`` / ``plugins:`` (their ``@task`` calls register here)."""
    from harness._plugin_import import import_plugin
    from harness.registry import default_registry

    for spec in list(default_registry().plugins):
        import_plugin(spec)


_REGISTRY = _Registry()


def _caller_module(depth: int = 2) -> str:
    frame = inspect.stack()[depth].frame
    return str(frame.f_globals.get("__name__", "?"))


def task(name: str, **overrides: Any) -> Callable[[TaskFactory], TaskFactory]:
    """Register a factory ``() -> Task`` under ``name``; ``overrides`` replace fields of the Task it returns.

    >>> from harness.tasks import Task, task
    >>> @task("doc_example_sums", description="sums")
    ... def sums() -> Task:
    ...     return Task(name="sums", source="sums.jsonl")
    >>> from harness.tasks import get_task, unregister_task
    >>> get_task("doc_example_sums").description, get_task("doc_example_sums").name
    ('sums', 'doc_example_sums')
    >>> unregister_task("doc_example_sums")
    """
    if not isinstance(name, str) or not name.strip():
        raise TaskError(f"@task: expected a non-empty task name, got {name!r}")
    bad = sorted(set(overrides) - {f.name for f in dataclasses.fields(Task)} | ({"name", "origin"} & set(overrides)))
    if bad:
        raise TaskError(f"@task({name!r}): unknown or fixed Task field(s) {', '.join(map(repr, bad))}")

    def deco(factory: TaskFactory) -> TaskFactory:
        def build() -> Task:
            return dataclasses.replace(factory(), **overrides) if overrides else factory()

        made: TaskFactory = build if overrides else factory
        _REGISTRY.add(_Entry(name, f"module {factory.__module__}", factory=made))
        factory.__task_name__ = name  # type: ignore[attr-defined]  # lets an entry point find its @task entry
        return factory

    return deco


def register_task(t: Task) -> None:
    """Register a built Task under ``t.name`` (origin: ``t.origin``, else the calling module).

    Raises:
        TaskError: another origin already registered that name.
    """
    if not isinstance(t, Task):
        raise TaskError(f"register_task: expected a Task, got {type(t).__name__}")
    if not t.name:
        raise TaskError("register_task: the task has no name")
    origin = t.origin or f"module {_caller_module()}"
    _REGISTRY.add(_Entry(t.name, origin, built=dataclasses.replace(t, origin=origin)))


def unregister_task(name: str) -> None:
    """Forget task ``name`` (no error when it is not registered)."""
    _REGISTRY.entries.pop(name, None)


def get_task(name: str) -> Task:
    """The task registered as ``name``.

    Raises:
        TaskError: no such task; the message lists the registered ones.
    """
    _REGISTRY.load()
    entry = _REGISTRY.entries.get(name)
    if entry is None:
        known = ", ".join(sorted(_REGISTRY.entries)) or "none"
        raise TaskError(f"unknown task {name!r}; registered tasks: {known} (a task file loads with --plugin FILE)")
    return entry.build()


def list_tasks() -> list[Task]:
    """Every registered task, sorted by name."""
    _REGISTRY.load()
    return [_REGISTRY.entries[k].build() for k in sorted(_REGISTRY.entries)]
