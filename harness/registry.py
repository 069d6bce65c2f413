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

Loading is lazy: nothing is imported until a reward is looked up or listed. Then the user plugins named with
``--plugin`` or the run config's ``plugins:`` import (:mod:`harness.plugins`), the built-in reward modules load,
and every entry point (unless ``GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``). A plugin that fails to import is a
warning naming the entry point; a duplicate name is a :class:`DuplicateRewardError` naming both origins; an unknown
parameter is a :class:`RewardParameterError` listing the accepted ones, and a value that does not fit the factory's
annotation is one naming the parameter, the value and the expected type. A ``rewards`` module of the user's own
that shadows the built-in package is a :class:`RegistryError` naming the file to rename.

Loading is all-or-nothing: a load that fails leaves no half-filled registry behind; every later lookup raises the
same error until :meth:`Registry.reset`. The process-wide :class:`Registry` is ``default_registry()``; the
module-level functions use it, and :func:`use_registry` puts another one in its place for a ``with`` block (tests,
embedding). A registry built after the built-in modules were imported still gets the built-ins: ``@reward`` keeps
what each module declared, and :meth:`Registry.load` adopts the declarations of the built-in modules.

An entry and the checks of its parameters are :mod:`harness._reward_entry`. This module does not run rewards
with time limits or isolation; :mod:`harness.scoring` does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.metadata as md
import inspect
import logging
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from harness._plugin_import import check_builtin_package, import_plugin
from harness._reward_entry import Isolation, ParamInfo, RewardEntry, ScoreFn, describe_params
from harness.errors import DuplicateRewardError, RewardParameterError, UnknownRewardError
from harness.hooks import AUTOLOAD_ENV, REWARDS, other_entry_points, own_entry_points
from harness.types import RewardSpec, Sample, Score

__all__ = [
    "reward",
    "get_reward",
    "build_reward",
    "list_rewards",
    "get_entry",
    "RewardEntry",
    "RewardFn",
    "ScoreFn",
    "ENTRY_POINT_GROUP",
    "AUTOLOAD_ENV",
    "ParamInfo",
    "Registry",
    "default_registry",
    "use_registry",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = REWARDS
#: Modules holding the built-in rewards, imported on first lookup: the values of grpo-harness's own
#: ``grpo_harness.rewards`` entry points (pyproject.toml), so this module names no rewards package.
BUILTIN_MODULES: tuple[str, ...] = tuple(ep.value.partition(":")[0] for ep in own_entry_points(REWARDS))


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
            origin=_STATE.origin_of(factory),
            module=getattr(factory, "__module__", "?"),
            params=describe_params(factory),
            isolation=isolation,
            reads=reads,
            cacheable=cacheable,
            description=(inspect.getdoc(factory) or "").split("\n")[0],
        )
        _STATE.register(entry)
        _DECLARED.setdefault(entry.module, []).append(entry)
        factory.__reward_name__ = name  # type: ignore[attr-defined]  # functions take attributes; mypy can't tell
        return factory

    return deco


def _dist_label(ep: md.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is not None:
        return f"{dist.metadata['Name']} {dist.version} (entry point {ep.name} = {ep.value})"
    return f"entry point {ep.name} = {ep.value}"


class Registry:
    """Registered rewards with an explicit, all-or-nothing load step.

    :meth:`load` imports the user plugins (``plugins``), the built-in modules and the entry points once; if any
    step raises, the entries it added are dropped and the error is kept, so every later :meth:`lookup` raises
    it again instead of answering from a half-loaded registry. :meth:`reset` forgets everything.
    """

    def __init__(self, builtin_modules: tuple[str, ...] = BUILTIN_MODULES) -> None:
        self.builtin_modules = builtin_modules
        self.entries: dict[str, RewardEntry] = {}
        self.loaded = False
        self.failed: BaseException | None = None
        self.origin_override: str | None = None
        self.plugins: list[str] = []  # modules or .py files imported before the built-ins, here and in workers
        self.lock = threading.RLock()

    def origin_of(self, factory: Callable[..., Any]) -> str:
        module = getattr(factory, "__module__", "?") or "?"
        if self.origin_override:
            return self.origin_override
        if any(module == m or module.startswith(m + ".") for m in self.builtin_modules):
            return f"built-in ({module})"
        return f"module {module}"

    def register(self, entry: RewardEntry) -> None:
        """Add ``entry``; a different factory under the same name is a :class:`DuplicateRewardError`."""
        with self.lock:
            old = self.entries.get(entry.name)
            if old is not None:
                same = old.factory is entry.factory or (
                    old.module == entry.module
                    and getattr(old.factory, "__qualname__", None) == getattr(entry.factory, "__qualname__", None)
                )
                if not same:
                    raise DuplicateRewardError(
                        f"reward {entry.name!r} is registered twice: by {old.origin} and by {entry.origin}; "
                        "rename one of them or uninstall one of the packages"
                    )
            self.entries[entry.name] = entry

    def load(self) -> None:
        """Import plugins, built-ins and entry points once; raise the load's error now and on every later call."""
        if self.loaded:
            return
        with self.lock:
            if self.failed is not None:
                raise self.failed
            if self.loaded:
                return
            before = dict(self.entries)
            try:
                self._load_all()
            except BaseException as e:
                self.entries = before
                self.failed = e
                raise
            self.loaded = True

    def _load_all(self) -> None:
        check_builtin_package()
        for plugin in self.plugins:
            import_plugin(plugin)
        for mod in self.builtin_modules:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name != mod:  # a built-in that is present but broken is a bug worth showing
                    raise
                continue
            self._adopt(mod)
        for ep in other_entry_points(ENTRY_POINT_GROUP):  # none under the AUTOLOAD_ENV kill switch
            self._load_entry_point(ep)

    def _adopt(self, module: str) -> None:
        """Register what ``module`` and its submodules declared with ``@reward`` when they were first imported
        (possibly while another registry was the process-wide one)."""
        for declared_in, entries in list(_DECLARED.items()):
            if declared_in == module or declared_in.startswith(module + "."):
                for entry in entries:
                    self.register(entry)

    def _load_entry_point(self, ep: md.EntryPoint) -> None:
        label = _dist_label(ep)
        self.origin_override = label
        try:
            obj = ep.load()
        except DuplicateRewardError:  # raised by @reward while the plugin module imports: a clash, not a broken plugin
            raise
        except Exception as e:  # a broken plugin package must not take the others down
            warnings.warn(
                f"reward plugin {label} failed to import and is skipped: {type(e).__name__}: {e}", stacklevel=2
            )
            log.warning("reward plugin %s failed to import: %s", label, e)
            return
        finally:
            self.origin_override = None
        if inspect.ismodule(obj):
            return  # importing the module registered its rewards through @reward
        registered = getattr(obj, "__reward_name__", None)
        if registered is not None:
            if registered != ep.name:
                warnings.warn(
                    f"entry point {ep.name!r} points at reward {registered!r}; using {registered!r}", stacklevel=2
                )
            entry = self.entries.get(registered)
            if entry is not None and entry.factory is obj:  # this factory's own entry point, not a sibling's
                self.entries[registered] = dataclasses.replace(entry, origin=label)
            return
        if not callable(obj):
            warnings.warn(f"reward plugin {label} is not a factory or module; skipped", stacklevel=2)
            return
        self.origin_override = label
        try:
            reward(ep.name)(obj)
        finally:
            self.origin_override = None

    def lookup(self, name: str) -> RewardEntry:
        """The entry of reward ``name`` (loads on first use)."""
        self.load()
        try:
            return self.entries[name]
        except KeyError:
            known = ", ".join(sorted(self.entries)) or "none"
            raise UnknownRewardError(f"unknown reward {name!r}; registered rewards: {known}") from None

    def all(self) -> list[RewardEntry]:
        """Every registered reward, sorted by name (loads on first use)."""
        self.load()
        return [self.entries[k] for k in sorted(self.entries)]

    def reset(self) -> None:
        """Forget every entry, the load state, its error and the plugin list (modules stay imported)."""
        with self.lock:
            self.entries.clear()
            self.loaded = False
            self.failed = None
            self.plugins.clear()


#: Every entry ``@reward`` made, by the module that defines the factory (see :meth:`Registry._adopt`).
_DECLARED: dict[str, list[RewardEntry]] = {}
_STATE = Registry()


def default_registry() -> Registry:
    """The process-wide registry that ``@reward``, :func:`get_reward` and the scoring path use."""
    return _STATE


@contextlib.contextmanager
def use_registry(registry: Registry) -> Iterator[Registry]:
    """Make ``registry`` the process-wide one inside the ``with`` block; the previous one is back afterwards.

    ``@reward`` registers into it and lookups read it, so a test can start from a registry that has loaded
    nothing without touching the real one (``with use_registry(Registry()) as reg: ...``).
    """
    global _STATE
    previous, _STATE = _STATE, registry
    try:
        yield registry
    finally:
        _STATE = previous


def _ensure_loaded() -> None:
    _STATE.load()


def get_entry(name: str) -> RewardEntry:
    """The registry entry of reward ``name`` (loads plugins on first use)."""
    return _STATE.lookup(name)


def list_rewards() -> list[RewardEntry]:
    """Every registered reward, sorted by name."""
    return _STATE.all()


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
        self._fn = entry.factory(**entry.coerce_params(params))
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
            return Score.unscored(
                "error", f"reward {self.name!r} raised {type(e).__name__}: {e}", exception=type(e).__name__
            )
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


def build_reward(name: str, params: Mapping[str, Any], module: str = "") -> RewardFn:
    """Build reward ``name`` with ``params``: the one place the scoring path calls a reward's factory.

    The scoring session builds each reward once when it loads (a bad value fails there, and ``inline`` rewards
    run that very object); each worker process builds its own with this function. ``module`` is where the reward
    was registered in the parent: a worker that does not know the name imports it (user code that registered the
    reward on import) and looks again.
    """
    try:
        return RewardFn(get_entry(name), params)
    except UnknownRewardError:
        if module in ("", "__main__", "__mp_main__"):
            raise
        importlib.import_module(module)
        return RewardFn(get_entry(name), params)


def get_reward(name: str, **params: Any) -> RewardFn:
    """Build reward ``name`` with ``params``; unknown parameters fail here, naming the accepted ones.

    >>> fn = get_reward("boxed_present")
    >>> fn({"prompt": "2+2?"}, "so \\\\boxed{4}").value
    1.0
    """
    return RewardFn(get_entry(name), params)
