"""What the registry knows of one reward (:class:`RewardEntry`): its factory, origin and parameters
(:class:`ParamInfo`, read from the factory's signature and annotations), and the checks of the parameters a spec
passes (unknown, missing, or a value that does not fit the annotation: a :class:`RewardParameterError` naming it).

This module registers and looks up nothing (:mod:`harness.registry`) and builds no reward callables.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.errors import RewardParameterError
from harness.types import Sample, Score

__all__ = ["Isolation", "ScoreFn", "ParamInfo", "RewardEntry", "describe_params"]

Isolation = Literal["process", "inline"]


class ScoreFn(Protocol):
    """What a reward factory returns."""

    def __call__(self, sample: Sample, completion: str, /) -> Score | float | None: ...


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a reward factory."""

    name: str
    default: Any  # inspect.Parameter.empty when required
    annotation: str
    type_: Any = field(default=None, compare=False, repr=False)  # the resolved annotation; None: not checked

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
        self.coerce_params(params)

    def coerce_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` validated against the factory's annotations (``"1e-6"`` for a float becomes 1e-06).

        Raises:
            RewardParameterError: naming the parameter, the value given and the type expected.
        """
        out = dict(params)
        for p in self.params:
            if p.name in out and p.type_ is not None:
                out[p.name] = _check_value(self, p, out[p.name])
        return out


def _check_value(entry: RewardEntry, p: ParamInfo, value: Any) -> Any:
    from pydantic import TypeAdapter, ValidationError

    try:
        adapter = TypeAdapter(p.type_)
    except Exception:  # noqa: BLE001 - an annotation pydantic cannot check (an arbitrary class): the factory checks it
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        if isinstance(value, str):  # one word from the command line where a list of words is expected
            try:
                return adapter.validate_python([value])
            except ValidationError:
                pass
        why = "; ".join(x["msg"] for x in e.errors())
        raise RewardParameterError(
            f"reward {entry.name!r} ({entry.origin}): parameter {p.name!r} got {value!r} "
            f"({type(value).__name__}), expected {p.annotation}: {why}"
        ) from None


def _type_hints(factory: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(factory)
    except Exception:  # noqa: BLE001 - names only defined under TYPE_CHECKING, say: those parameters go unchecked
        return {}


def describe_params(factory: Callable[..., Any]) -> tuple[ParamInfo, ...]:
    """The parameters of a reward factory, from its signature; ``*args`` and ``**kwargs`` are not parameters."""
    out = []
    hints = _type_hints(factory)
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann_s = (
            "Any"
            if ann is inspect.Parameter.empty
            else (ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann)))
        )
        type_ = hints.get(p.name)
        out.append(ParamInfo(p.name, p.default, str(ann_s), None if type_ in (None, Any) else type_))
    return tuple(out)
