"""The one hook through which the other packages plug into the core: entry-point groups.

harness/ names no other package. A package that adds to it declares entry points in its distribution's
``pyproject.toml``; the core finds them by group:

``grpo_harness.commands``
    ``NAME = "pkg.module:add_parser"``: a function ``add_parser(subparsers)`` that adds the ``harness NAME``
    subcommand (:mod:`harness.cli`). Its module is imported when the command line is parsed, so it should stay
    light and import its heavy parts (torch) inside the command.
``grpo_harness.config_sections``
    ``NAME = "pkg.module:Section"``: a pydantic model that validates the run config's ``NAME:`` section
    (:mod:`harness.config`). The module must import nothing heavy.
``grpo_harness.rewards``
    ``NAME = "pkg.module:factory"`` or ``"pkg.module"``: reward plugins (:mod:`harness.registry`).
``grpo_harness.tasks``
    ``NAME = "pkg.module:factory"`` (a function ``() -> Task``, or a ``Task``) or ``"pkg.module"``: named tasks
    (:mod:`harness.tasks`).

grpo-harness itself plugs its trainer, evaluator, sandbox and built-in rewards in the same way. Its own entry
points are read from the ``pyproject.toml`` beside the packages when the code runs from a source checkout (so an
editable install whose metadata predates a new entry point still finds it), else from the installed metadata.
Other distributions' entry points load unless ``GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``.

This module loads nothing by itself: callers call :meth:`importlib.metadata.EntryPoint.load` on what it returns and
decide what a failure means.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "COMMANDS",
    "CONFIG_SECTIONS",
    "REWARDS",
    "TASKS",
    "AUTOLOAD_ENV",
    "DISTRIBUTION",
    "own_entry_points",
    "other_entry_points",
    "entry_points",
    "is_own",
    "autoload_disabled",
]

COMMANDS = "grpo_harness.commands"
CONFIG_SECTIONS = "grpo_harness.config_sections"
REWARDS = "grpo_harness.rewards"
TASKS = "grpo_harness.tasks"
AUTOLOAD_ENV = "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD"
DISTRIBUTION = "grpo-harness"


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def is_own(ep: md.EntryPoint) -> bool:
    """Whether ``ep`` belongs to grpo-harness's own distribution."""
    dist = getattr(ep, "dist", None)
    return dist is not None and _normalize(dist.metadata["Name"] or "") == DISTRIBUTION


@functools.cache
def _checkout_table() -> dict[str, dict[str, str]] | None:
    """``[project.entry-points]`` of the source checkout's pyproject.toml, or None when not running from one."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if _normalize(str(project.get("name", ""))) != DISTRIBUTION:
        return None
    table = project.get("entry-points", {})
    return {group: {str(k): str(v) for k, v in eps.items()} for group, eps in table.items() if isinstance(eps, dict)}


def own_entry_points(group: str) -> list[md.EntryPoint]:
    """grpo-harness's own entry points of ``group``, sorted by name."""
    table = _checkout_table()
    if table is not None:
        eps = [md.EntryPoint(name, value, group) for name, value in table.get(group, {}).items()]
    else:
        eps = [ep for ep in md.entry_points(group=group) if is_own(ep)]
    return sorted(eps, key=lambda ep: ep.name)


def autoload_disabled() -> bool:
    """Whether ``GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD`` turns other distributions' entry points off."""
    return os.environ.get(AUTOLOAD_ENV, "").strip() not in ("", "0", "false", "False")


def other_entry_points(group: str) -> list[md.EntryPoint]:
    """Other distributions' entry points of ``group`` (none under the kill switch), sorted by name."""
    if autoload_disabled():
        return []
    return sorted((ep for ep in md.entry_points(group=group) if not is_own(ep)), key=lambda ep: ep.name)


def entry_points(group: str) -> list[md.EntryPoint]:
    """Own entry points of ``group`` first, then other distributions' (subject to the kill switch)."""
    return [*own_entry_points(group), *other_entry_points(group)]
