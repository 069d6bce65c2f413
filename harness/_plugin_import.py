"""Importing user reward plugins: a module name (``my_pkg.rewards``) or a ``.py`` file, by name or path.

The registry calls these when it loads (:mod:`harness.registry`); :mod:`harness.plugins` is the public face that
also records plugins in the registry. Kept apart so that the registry and :mod:`harness.plugins` do not import each
other. File paths are made absolute (:func:`normalize_plugin`), so a worker or a later command started elsewhere
finds the same file.

Also here: :func:`check_builtin_package`, which notices a user's own ``rewards.py`` or ``rewards/`` shadowing the
package of the built-in rewards (the one grpo-harness's ``grpo_harness.rewards`` entry points name) and names the
file to rename.

This module does not sandbox plugin code: a plugin runs with the rights of the process that imports it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from harness.errors import RegistryError
from harness.hooks import REWARDS, own_entry_points


def builtin_packages() -> list[str]:
    """Top-level packages of the built-in rewards (from grpo-harness's own ``grpo_harness.rewards`` entry points)."""
    return sorted({ep.value.partition(":")[0].split(".")[0] for ep in own_entry_points(REWARDS)})


__all__ = ["check_builtin_package", "import_plugin", "normalize_plugin", "builtin_packages"]


def normalize_plugin(spec: str, base: str | Path | None = None) -> str:
    """A file plugin as an absolute path (relative to ``base``, default the working directory); a module name as is."""
    spec = spec.strip()
    if not spec:
        raise RegistryError("plugin: expected a module name or a .py file, got an empty string")
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = Path(base or Path.cwd()) / path
        path = path.resolve()
        if not path.is_file():
            raise RegistryError(f"plugin {spec}: file not found ({path})")
        return str(path)
    return spec


def _module_name_for(path: Path) -> str:
    """The name to import ``path`` under: its stem, unless that names another module (then a private name)."""
    stem = path.stem
    mod = sys.modules.get(stem)
    mod_file = getattr(mod, "__file__", None)
    if stem.isidentifier() and mod is None:
        try:
            spec = importlib.util.find_spec(stem)
        except (ImportError, ValueError):
            spec = None
        if spec is None or (spec.origin and Path(spec.origin).resolve() == path):
            return stem
    elif mod_file and Path(mod_file).resolve() == path:
        return stem
    digest = hashlib.blake2b(str(path).encode(), digest_size=4).hexdigest()
    return f"_grpo_harness_plugin_{''.join(c if c.isalnum() else '_' for c in stem)}_{digest}"


def import_plugin(spec: str) -> str:
    """Import one plugin (a module name or an absolute ``.py`` path); return the module's name.

    Raises:
        RegistryError: the plugin cannot be found or raises while importing; the message names it.
    """
    from harness.errors import DuplicateRewardError

    try:
        if not spec.endswith(".py"):
            return importlib.import_module(spec).__name__
        path = Path(spec)
        name = _module_name_for(path)
        if name in sys.modules:
            return name
        mod_spec = importlib.util.spec_from_file_location(name, path)
        if mod_spec is None or mod_spec.loader is None:
            raise RegistryError(f"plugin {spec}: not an importable Python file")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        try:
            mod_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return name
    except (RegistryError, DuplicateRewardError):
        raise
    except Exception as e:  # noqa: BLE001 - whatever a user module raises, the error names the plugin
        raise RegistryError(f"plugin {spec} failed to import: {type(e).__name__}: {e}") from e


def _package_dir(name: str) -> Path | None:
    """Where ``import name`` would load a top-level module from (its package directory or its file)."""
    mod = sys.modules.get(name)
    origin = getattr(mod, "__file__", None) if mod is not None else None
    if mod is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    if not origin:
        return None
    path = Path(origin).resolve()
    return path.parent if path.name == "__init__.py" else path


def _found_from_cwd(name: str) -> Path | None:
    """Where a process with the working directory first on ``sys.path`` would load ``name`` from (None: not there).

    Scoring workers start that way (the fork server runs ``python -c``, which puts the working directory first),
    so a ``rewards.py`` in the directory a command runs from reaches them even when the command itself, a console
    script, never sees it. A namespace directory (no ``__init__.py``) does not count: a regular package wins.
    """
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, [str(Path.cwd())])
    except (ImportError, ValueError, OSError):
        return None
    if spec is None or spec.loader is None or not spec.origin:
        return None
    path = Path(spec.origin).resolve()
    return path.parent if path.name == "__init__.py" else path


def _is_checkout(found: Path) -> bool:
    """A ``rewards/`` package beside a ``harness/`` one: a grpo-harness checkout, whose workers import both from it."""
    return found.is_dir() and (found.parent / "harness" / "registry.py").is_file()


def check_builtin_package() -> None:
    """Raise :class:`RegistryError` when importing a built-in rewards package would not load grpo-harness's own.

    A user's ``rewards.py`` or ``rewards/`` next to their script, or in the working directory a command runs from
    (where scoring workers would import it), comes first on ``sys.path`` and would make every built-in reward
    vanish: in this process, or in every worker, each sample then unscored.
    """
    for package in builtin_packages():
        _check_package(package)


def _check_package(package: str) -> None:
    expected = Path(__file__).resolve().parent.parent / package
    if not expected.is_dir():
        return
    found, where = _package_dir(package), f"`import {package}` finds"
    if found is None or found == expected:
        found, where = _found_from_cwd(package), "scoring workers started in this directory would import"
        if found is None or found == expected or _is_checkout(found):
            return
    what = "directory" if found.is_dir() else "file"
    renamed = f"my_{package}" if found.is_dir() else f"my_{package}.py"
    raise RegistryError(
        f"the built-in rewards cannot load: {where} the {what} {found}, which shadows grpo-harness's "
        f"own {package} package ({expected}); rename {found} (for example to {renamed}) "
        "and load it with --plugin or the run config's plugins:"
    )
