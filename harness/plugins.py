"""User reward plugins named on the command line (``--plugin``) or in a run config (``plugins:``).

A plugin is a module name (``my_pkg.rewards``) or a ``.py`` file whose import registers rewards with ``@reward``
(or tasks with ``@task``), so a custom reward needs no package to be used from the CLI. A ``.yaml``/``.yml``
plugin is a task file: :func:`harness.tasks.load_task_file` reads and registers it at once.
:func:`add_plugins` records the others in the registry,
which imports them when it loads, before the built-ins; the scoring pool hands the same list to every worker
process, which imports them too. File paths are made absolute when they are added, so a worker (or a later
command) started elsewhere finds the same file.

Also here: :func:`check_builtin_package`, which notices a user's own ``rewards.py`` or ``rewards/`` shadowing the
built-in rewards package and names the file to rename. The importing itself lives in :mod:`harness._plugin_import`,
which the registry uses too; this module imports the registry, never the other way round.

This module does not sandbox plugin code: a plugin runs with the rights of the process that imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness._plugin_import import check_builtin_package, import_plugin, normalize_plugin
from harness.registry import default_registry

__all__ = ["add_plugins", "check_builtin_package", "import_plugin", "normalize_plugin"]


def add_plugins(specs: Iterable[str], base: str | Path | None = None) -> list[str]:
    """Record plugins in the default registry (imported at its load, here and in scoring workers); return them.

    A registry that has already loaded imports the new plugins at once.
    """
    reg = default_registry()
    added = []
    for spec in specs:
        if spec.strip().lower().endswith((".yaml", ".yml")):
            from harness.tasks import load_task_file

            load_task_file(Path(base or Path.cwd()) / Path(spec.strip()).expanduser())
            continue
        norm = normalize_plugin(spec, base)
        if norm not in reg.plugins:
            reg.plugins.append(norm)
            added.append(norm)
    if reg.loaded:
        for norm in added:
            import_plugin(norm)
    return list(reg.plugins)
