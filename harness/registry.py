"""The reward registry: ``@reward("name")`` on a factory, entry points for third-party packages, lookup by name.

A reward plugin is a *factory*: a function whose keyword arguments are the plugin's parameters and which returns
the callable that scores, ``(sample, completion) -> Score``::

    @reward("shorter_is_better")
    def shorter_is_better(*, limit: int = 200):
        def score(sample: Sample, completion: str) -> Score:
            return Score(value=1.0 if len(completion) <= limit else 0.0)
        return score

Third-party packages register through the entry-point group ``grpo_harness.rewards``; the entry point's name is
the reward name and its value the factory (``pkg.module:factory``) or a module whose import registers rewards.

Loading is lazy: nothing is imported until a reward is looked up or listed. Then the built-in reward modules load,
and every entry point (unless ``GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``). A plugin that fails to import is a
warning naming the entry point; a duplicate name is a :class:`DuplicateRewardError` naming both origins; an unknown
parameter is a :class:`RewardParameterError` listing the accepted ones.

This module does not run rewards with time limits or isolation; :mod:`harness.scoring` does.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import inspect
import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol

from harness.errors import DuplicateRewardError, RewardParameterError, UnknownRewardError
from harness.types import RewardSpec, Sample, Score

__all__ = [
    "reward",
    "get_reward",
    "list_rewards",
    "get_entry",
    "RewardEntry",
    "RewardFn",
    "ScoreFn",
    "ENTRY_POINT_GROUP",
    "AUTOLOAD_ENV",
    "ParamInfo",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "grpo_harness.rewards"
AUTOLOAD_ENV = "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD"
#: Modules holding the built-in rewards, imported on first lookup.
BUILTIN_MODULES: tuple[str, ...] = ("rewards.format", "rewards.length", "rewards.math", "rewards.code", "rewards.toy")

Isolation = Literal["process", "inline"]


class ScoreFn(Protocol):
    """What a reward factory returns."""

    def __call__(self, sample: Sample, completion: str) -> Score | float | None: ...


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a reward factory."""

    name: str
    default: Any  # inspect.Parameter.empty when required
    annotation: str

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def __str__(self) -> str:
        if self.required:
            return f"{self.name}: {self.annotation} (required)"
        return f"{self.name}: {self.annotation} = {self.default!r}"


@dataclass(frozen=True)
class RewardEntry:
    """A registered reward: its name, factory, where it came from and what it accepts."""

    name: str
    factory: Callable[..., ScoreFn]
    origin: str
    module: str
    params: tuple[ParamInfo, ...]
    isolation: Isolation = "process"
    reads: tuple[str, ...] | None = None  # Sample fields the plugin reads (None: all), for the result cache
    cacheable: bool = True
    description: str = ""

    def check_params(self, params: Mapping[str, Any]) -> None:
        """Raise :class:`RewardParameterError` for a parameter the factory does not accept or a missing one."""
        accepted = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            listing = ", ".join(str(p) for p in self.params) or "none"
            raise RewardParameterError(
                f"reward {self.name!r} ({self.origin}) does not accept parameter(s) {', '.join(map(repr, unknown))}; "
                f"accepted parameters: {listing}"
            )
        missing = [p.name for p in self.params if p.required and p.name not in params]
        if missing:
            raise RewardParameterError(
                f"reward {self.name!r} ({self.origin}) needs parameter(s) {', '.join(map(repr, missing))}"
            )


@dataclass
class _State:
    entries: dict[str, RewardEntry] = field(default_factory=dict)
    loaded: bool = False
    origin_override: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)


_STATE = _State()


def _describe_params(factory: Callable[..., Any]) -> tuple[ParamInfo, ...]:
    out = []
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann_s = "Any" if ann is inspect.Parameter.empty else (ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann)))
        out.append(ParamInfo(p.name, p.default, str(ann_s)))
    return tuple(out)


def _origin_of(factory: Callable[..., Any]) -> str:
    module = getattr(factory, "__module__", "?") or "?"
    if _STATE.origin_override:
        return _STATE.origin_override
    if module.split(".")[0] == "rewards":
        return f"built-in ({module})"
    return f"module {module}"


def _register(entry: RewardEntry) -> None:
    with _STATE.lock:
        old = _STATE.entries.get(entry.name)
        if old is not None:
            same = old.factory is entry.factory or (
                old.module == entry.module and getattr(old.factory, "__qualname__", None) == getattr(entry.factory, "__qualname__", None)
            )
            if not same:
                raise DuplicateRewardError(
                    f"reward {entry.name!r} is registered twice: by {old.origin} and by {entry.origin}; "
                    "rename one of them or uninstall one of the packages"
                )
        _STATE.entries[entry.name] = entry


def reward(
    name: str,
    *,
    isolation: Isolation = "process",
    reads: tuple[str, ...] | None = None,
    cacheable: bool = True,
) -> Callable[[Callable[..., ScoreFn]], Callable[..., ScoreFn]]:
    """Register a reward factory under ``name``.

    Args:
        name: the one name of the reward everywhere (config, metrics ``reward/<name>/mean``, spans).
        isolation: ``"process"`` (default) runs it in a scoring worker with a hard kill at the time limit;
            ``"inline"`` runs it in the caller's process under a thread time limit: only for plugins whose cost
            is bounded by the input size.
        reads: the Sample fields the plugin reads, so the result cache keys on those alone (default: all).
        cacheable: False for plugins whose result is not a function of their inputs.
    """
    if not name or not isinstance(name, str):
        raise TypeError("reward(name): name must be a non-empty string")

    def deco(factory: Callable[..., ScoreFn]) -> Callable[..., ScoreFn]:
        entry = RewardEntry(
            name=name,
            factory=factory,
            origin=_origin_of(factory),
            module=getattr(factory, "__module__", "?"),
            params=_describe_params(factory),
            isolation=isolation,
            reads=reads,
            cacheable=cacheable,
            description=(inspect.getdoc(factory) or "").split("\n")[0],
        )
        _register(entry)
        factory.__reward_name__ = name  # type: ignore[attr-defined]
        return factory

    return deco


def _dist_label(ep: md.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is not None:
        return f"{dist.metadata['Name']} {dist.version} (entry point {ep.name} = {ep.value})"
    return f"entry point {ep.name} = {ep.value}"


def _load_entry_point(ep: md.EntryPoint) -> None:
    label = _dist_label(ep)
    _STATE.origin_override = label
    try:
        obj = ep.load()
    except DuplicateRewardError:  # raised by @reward while the plugin module imports: a clash, not a broken plugin
        raise
    except Exception as e:  # a broken plugin package must not take the others down
        warnings.warn(f"reward plugin {label} failed to import and is skipped: {type(e).__name__}: {e}", stacklevel=2)
        log.warning("reward plugin %s failed to import: %s", label, e)
        return
    finally:
        _STATE.origin_override = None
    if inspect.ismodule(obj):
        return  # importing the module registered its rewards through @reward
    registered = getattr(obj, "__reward_name__", None)
    if registered is not None:
        if registered != ep.name:
            warnings.warn(f"entry point {ep.name!r} points at reward {registered!r}; using {registered!r}", stacklevel=2)
        return
    if not callable(obj):
        warnings.warn(f"reward plugin {label} is not a factory or module; skipped", stacklevel=2)
        return
    _STATE.origin_override = label
    try:
        reward(ep.name)(obj)
    finally:
        _STATE.origin_override = None


def _ensure_loaded() -> None:
    if _STATE.loaded:
        return
    with _STATE.lock:
        if _STATE.loaded:
            return
        _STATE.loaded = True
        for mod in BUILTIN_MODULES:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name != mod:  # a built-in that is present but broken is a bug worth showing
                    raise
        if os.environ.get(AUTOLOAD_ENV, "").strip() not in ("", "0", "false", "False"):
            return
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            _load_entry_point(ep)


def get_entry(name: str) -> RewardEntry:
    """The registry entry of reward ``name`` (loads plugins on first use)."""
    _ensure_loaded()
    try:
        return _STATE.entries[name]
    except KeyError:
        known = ", ".join(sorted(_STATE.entries)) or "none"
        raise UnknownRewardError(f"unknown reward {name!r}; registered rewards: {known}") from None


def list_rewards() -> list[RewardEntry]:
    """Every registered reward, sorted by name."""
    _ensure_loaded()
    return [_STATE.entries[k] for k in sorted(_STATE.entries)]


class RewardFn:
    """A built reward: call it as ``fn(sample, completion) -> Score``.

    Plain floats, bools and ``None`` returned by a plugin become Scores; an exception becomes
    ``Score(None, "error")`` with the exception in ``info`` (the sample is unscored, never 0). Dict samples
    are turned into :class:`Sample`. This runs in the caller's process with no time limit; for time limits and
    crash isolation use :func:`harness.score_batch`.
    """

    def __init__(self, entry: RewardEntry, params: Mapping[str, Any]) -> None:
        entry.check_params(params)
        self.entry = entry
        self.name = entry.name
        self.params = dict(params)
        self._fn = entry.factory(**self.params)
        if not callable(self._fn):
            raise RewardParameterError(f"reward factory {entry.name!r} ({entry.origin}) did not return a callable")

    @property
    def spec(self) -> RewardSpec:
        return RewardSpec(name=self.name, params=self.params)

    def __call__(self, sample: Sample | Mapping[str, Any], completion: str) -> Score:
        if not isinstance(sample, Sample):
            sample = Sample.model_validate(dict(sample))
        try:
            out = self._fn(sample, completion)
        except Exception as e:
            return Score.unscored("error", f"reward {self.name!r} raised {type(e).__name__}: {e}", exception=type(e).__name__)
        return as_score(out, self.name)

    def __repr__(self) -> str:
        return f"RewardFn({self.name!r}, {self.params!r})"


def as_score(out: Any, name: str = "?") -> Score:
    """Normalize what a plugin returned into a Score."""
    if isinstance(out, Score):
        return out
    if out is None:
        return Score.unscored("error", f"reward {name!r} returned None")
    if isinstance(out, (bool, int, float)):
        return Score(value=float(out))
    return Score.unscored("error", f"reward {name!r} returned {type(out).__name__}, expected Score or float")


def get_reward(name: str, **params: Any) -> RewardFn:
    """Build reward ``name`` with ``params``; unknown parameters fail here, naming the accepted ones.

    >>> fn = get_reward("boxed_present")
    >>> fn({"prompt": "2+2?"}, "so \\\\boxed{4}").value
    1.0
    """
    return RewardFn(get_entry(name), params)
