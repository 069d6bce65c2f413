"""The run config's sections that other packages own, found through the ``grpo_harness.config_sections`` hook.

A package declares ``NAME = "pkg.module:Section"`` (a pydantic model) in that entry-point group; the run config
then validates its ``NAME:`` section with that model (:class:`harness.config.RunConfig`). grpo-harness declares
its trainer's (``trainer``) and evaluator's (``eval``) sections this way, so harness/ names neither package.

Also here: :func:`alias_getattr`, which keeps the old import paths ``harness.cfg.trainer`` and ``harness.cfg.eval``
working as aliases of the module that owns the section now.

This module validates nothing itself; the section models do.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from harness.errors import ConfigError
from harness.hooks import CONFIG_SECTIONS, other_entry_points, own_entry_points

__all__ = ["section_models", "section_module", "alias_getattr"]


@functools.lru_cache(maxsize=1)
def section_models() -> dict[str, type[BaseModel]]:
    """Every plugged section's model by its name in a run config (own sections first, loaded once)."""
    out: dict[str, type[BaseModel]] = {}
    for ep in own_entry_points(CONFIG_SECTIONS):
        out[ep.name] = _checked(ep.name, ep.value, ep.load())
    for ep in other_entry_points(CONFIG_SECTIONS):
        if ep.name in out:
            warnings.warn(f"config section {ep.name!r} from {ep.value} is already defined; skipped", stacklevel=2)
            continue
        try:
            out[ep.name] = _checked(ep.name, ep.value, ep.load())
        except Exception as e:  # noqa: BLE001 - another package's broken section must not stop every run config
            warnings.warn(
                f"config section {ep.name} = {ep.value} failed to load: {type(e).__name__}: {e}", stacklevel=2
            )
    return out


def _checked(name: str, value: str, obj: object) -> type[BaseModel]:
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        raise ConfigError(f"config section {name} = {value}: expected a pydantic model class, got {obj!r}")
    return obj


def section_module(name: str) -> ModuleType:
    """The module that defines section ``name``'s model."""
    try:
        model = section_models()[name]
    except KeyError:
        known = ", ".join(sorted(section_models())) or "none"
        raise ConfigError(f"no package provides the config section {name!r} (provided: {known})") from None
    return importlib.import_module(model.__module__)


def alias_getattr(name: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers from section ``name``'s own module (for a moved import path)."""

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(section_module(name), attr)

    return __getattr__
