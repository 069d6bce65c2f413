"""The contracts every package speaks: :class:`Sample`, :class:`Score` and :class:`RewardSpec`.

A reward plugin turns ``(Sample, completion)`` into a :class:`Score`. ``Score.value is None`` means *unscored*
(the reward could not decide: the gold is broken, the plugin crashed or timed out) and is never silently 0:
the trainer drops unscored samples from group baselines and the evaluator counts them apart.

This module holds plain data only; it does not run rewards (see :mod:`harness.scoring`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Literal, NoReturn, get_args

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

__all__ = [
    "Sample",
    "Score",
    "RewardSpec",
    "Status",
    "STATUSES",
    "UNSCORED_STATUSES",
    "VERDICT_STATUSES",
    "DATA_FAULT_STATUSES",
    "PROGRAM_FAILED_STATUSES",
    "UNCACHED_STATUSES",
    "FrozenDict",
    "FrozenList",
    "frozen_form",
]

Status = Literal[
    # verdicts: the reward judged the completion; value is a number (0 included)
    "ok",  # the reward decided; value is the verdict
    "pass",  # code: every test passed
    "fail",  # code: some test failed (or the answer is wrong, where a reward wants to say so)
    "no_answer",  # the completion commits to no final answer (value 0)
    "parse_error",  # the completion's answer cannot be parsed (value 0)
    "time_limit",  # code: the judged program ran past its time limit (value 0)
    "memory",  # code: the judged program ran out of memory (value 0)
    "program_error",  # code: the judged program did not run to a verdict: syntax error, crash, no entry point (0)
    # unscored: value is None, never a silent 0
    "timeout",  # the reward itself ran out of time: its own limit, or the scoring path's kill
    "error",  # the plugin raised, crashed or returned nothing usable, or a service it calls failed
    "gold_unparseable",  # the reference answer cannot be parsed
    "bad_input",  # the input row is malformed
    "sandbox_error",  # the sandbox could not run the code
]
STATUSES: tuple[str, ...] = get_args(Status)
# The sets of statuses that mean one thing; every package tests a status against these, never a literal set.
# Each status has one meaning: it is either a verdict (always with a value) or unscored (always value=None), and
# :class:`Score` refuses any other combination.
#: Statuses that always come with ``value=None`` (:class:`Score` refuses a value with them).
UNSCORED_STATUSES: frozenset[str] = frozenset({"timeout", "error", "gold_unparseable", "bad_input", "sandbox_error"})
#: The reward judged the completion (a verdict, 0 included; :class:`Score` refuses ``None`` with them); the other
#: statuses are problems worth counting.
VERDICT_STATUSES: frozenset[str] = frozenset(STATUSES) - UNSCORED_STATUSES
#: Unscored because of the data row (a broken gold answer or input), not because a plugin failed.
DATA_FAULT_STATUSES: frozenset[str] = frozenset({"gold_unparseable", "bad_input"})
#: Code rewards: the judged program ran and failed (wrong output, crash or did not load, time or memory limit).
PROGRAM_FAILED_STATUSES: frozenset[str] = frozenset({"fail", "program_error", "time_limit", "memory"})
#: Never cached: outcomes of one attempt, not of the completion (another attempt may differ: a judged program's
#: time limit on a loaded machine, a reward's own timeout), and rows refused before any reward ran.
UNCACHED_STATUSES: frozenset[str] = frozenset({"timeout", "time_limit", "error", "sandbox_error", "bad_input"})


def frozen_form(value: Any) -> Hashable:
    """A hashable stand-in for ``value`` that is equal for equal values (the hash of a dict-valued field).

    Mappings become frozensets of their items and sequences tuples, recursively; anything else unhashable stands
    for its type (a coarser hash, never an inconsistent one).

    >>> frozen_form({"a": [1, {"b": 2}]}) == frozen_form({"a": [1.0, {"b": 2}]})
    True
    """
    if isinstance(value, Mapping):
        return frozenset((k, frozen_form(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(frozen_form(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(frozen_form(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("<unhashable>", type(value).__qualname__)
    return value  # hash() just succeeded: it is Hashable


#: Values kept as they are when a container is frozen: immutable, and the common case (a fast path per Score).
_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, frozenset})


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("this mapping is read-only: build a new dict ({**d, 'key': value}) and a new object from it")


def _read_only_list(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError("this list is read-only: build a new list ([*items, value]) and a new object from it")


def _frozen_value(value: Any) -> Any:
    """``value`` with every dict inside it a :class:`FrozenDict` and every list a :class:`FrozenList`.

    Tuples are rebuilt with frozen contents and sets become frozensets; any other object (a user's class instance)
    is kept as it is: only the JSON-like containers a reward puts in ``info`` are frozen.
    """
    if type(value) in _LEAVES or isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, list):
        return FrozenList(value)
    if type(value) is tuple:
        return tuple(_frozen_value(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def _thawed(value: Any) -> Any:
    """A plain copy of a frozen value: FrozenDicts become dicts and FrozenLists lists, all the way down."""
    if type(value) in _LEAVES:
        return value
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_thawed(v) for v in value]
    if type(value) is tuple:
        return tuple(_thawed(v) for v in value)
    return value


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses changes once built, all the way down: ``Score.info`` and ``RewardSpec.params``.

    It is a dict for every reader (``isinstance``, ``==``, ``json.dumps``, ``{**d}``, ``d | other`` gives a plain
    dict), pickles across processes, and hashes by :func:`frozen_form`. The dicts and lists inside it are frozen
    when it is built (copies: the producer's own containers stay the producer's): :class:`FrozenDict` and
    :class:`FrozenList`, tuples with frozen contents, sets as frozensets. Other objects are kept as given.

    >>> d = FrozenDict({"reason": "equal numbers", "usage": {"tokens": 3}})
    >>> d["reason"] = "x"
    Traceback (most recent call last):
    ...
    TypeError: this mapping is read-only: build a new dict ({**d, 'key': value}) and a new object from it
    >>> d["usage"]["tokens"] = 4
    Traceback (most recent call last):
    ...
    TypeError: this mapping is read-only: build a new dict ({**d, 'key': value}) and a new object from it
    """

    __slots__ = ()

    def __init__(self, data: Any = (), /, **kwargs: Any) -> None:
        dict.__init__(self, data, **kwargs)
        if _LEAVES.issuperset(map(type, dict.values(self))):
            return  # the common info holds strings and numbers only: nothing to freeze
        for k, v in dict.items(self):  # replacing a value keeps the size: iterating on is safe
            if type(v) not in _LEAVES:
                dict.__setitem__(self, k, _frozen_value(v))

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only  # refuse, never mutate

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (type(self), (dict(self),))  # pickle rebuilds through __init__, not the refused __setitem__

    def __hash__(self) -> int:  # type: ignore[override]  # dict is unhashable; a frozen one hashes its content
        return hash(frozen_form(self))


class FrozenList(list[Any]):
    """A ``list`` inside a :class:`FrozenDict` (per-test results, votes): equal to the list it was built from, a
    list for ``isinstance`` and ``json.dumps``, and read-only (its dicts and lists frozen in turn).

    >>> FrozenList([1, {"passed": True}]) == [1, {"passed": True}]
    True
    >>> FrozenList([1]).append(2)
    Traceback (most recent call last):
    ...
    TypeError: this list is read-only: build a new list ([*items, value]) and a new object from it
    """

    __slots__ = ()

    def __init__(self, items: Iterable[Any] = (), /) -> None:
        list.__init__(self, [v if type(v) in _LEAVES else _frozen_value(v) for v in items])

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only_list
    append = extend = insert = pop = remove = reverse = sort = clear = _read_only_list  # refuse, never mutate

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (type(self), (list(self),))  # pickle rebuilds through __init__, not the refused extend

    def __hash__(self) -> int:  # type: ignore[override]  # list is unhashable; a frozen one hashes its content
        return hash(frozen_form(self))


#: The one empty FrozenDict: a Score without info shares it (nothing can change it).
_EMPTY = FrozenDict()


def _freeze(value: Mapping[str, Any] | None) -> FrozenDict:
    if isinstance(value, FrozenDict):
        return value
    return FrozenDict(value) if value else _EMPTY


def _empty() -> FrozenDict:
    return _EMPTY


class Sample(BaseModel):
    """One dataset row: a prompt and what a reward needs to judge a completion for it.

    ``answer`` is the gold answer for math-style rewards, ``tests`` the tests for code. Any other dataset column
    is kept as an extra field and reaches plugins unchanged (``sample.entry_point``, ``sample.model_extra``).

    >>> s = Sample(id=7, prompt="What is 2+2?", answer="4", source="gsm8k")
    >>> s.id, s.answer, s.model_extra["source"]
    ('7', '4', 'gsm8k')
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    id: str = ""
    prompt: str | list[dict[str, Any]] = ""
    answer: Any = None
    tests: Any = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        return v

    @property
    def columns(self) -> dict[str, Any]:
        """Every field, extra columns included, as a plain dict."""
        return self.model_dump()

    @property
    def prompt_text(self) -> str:
        """The prompt as text: chat prompts are the concatenated message contents."""
        if isinstance(self.prompt, str):
            return self.prompt
        return "\n".join(str(m.get("content", "")) for m in self.prompt)


class Score(BaseModel):
    """What one reward says about one completion.

    Args:
        value: the reward, or ``None`` for *unscored* (never a silent 0). NaN and infinities are unscored: they
            become ``None`` with status ``error`` (a verdict status cannot stand without a value).
        status: one of :data:`STATUSES`; an unscored one (:data:`UNSCORED_STATUSES`) needs ``value=None`` and a
            verdict (:data:`VERDICT_STATUSES`) needs a value.
        answer: what the reward extracted from the completion (the final answer, the code), for logging.
        info: anything else worth logging: parsed forms, the reason for the verdict, the isolation level. Read-only
            once the Score exists (a :class:`FrozenDict`): build the dict first, or a new Score from ``{**info}``.

    >>> Score(value=1.0).status
    'ok'
    >>> Score.unscored("error", "plugin raised ZeroDivisionError").value is None
    True
    >>> Score(value=float("nan")).status
    'error'
    """

    model_config = ConfigDict(frozen=True)

    value: float | None
    status: Status = "ok"
    answer: str | None = None
    info: Mapping[str, Any] = Field(default_factory=_empty)

    @field_validator("info", mode="after")
    @classmethod
    def _read_only_info(cls, v: Mapping[str, Any]) -> FrozenDict:
        return _freeze(v)

    @field_serializer("info")
    def _plain_info(self, v: Mapping[str, Any]) -> dict[str, Any]:
        return _thawed(v)  # a plain copy, nested parts included: a dump is the caller's to change

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Score:
        """A copy (pydantic does not validate ``update``; the copy's ``info`` is read-only all the same)."""
        out = super().model_copy(update=update, deep=deep)
        out.__dict__["info"] = _freeze(out.info)
        return out

    @model_validator(mode="before")
    @classmethod
    def _non_finite_is_unscored(cls, data: Any) -> Any:
        v = data.get("value") if isinstance(data, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isfinite(float(v)):
            info = {**(data.get("info") or {}), "reason": f"the reward returned a non-finite value ({v!r})"}
            return {**data, "value": None, "status": "error", "info": info}  # NaN / inf cannot train anything
        return data

    @field_validator("value", mode="before")
    @classmethod
    def _bool_is_float(cls, v: Any) -> Any:
        return float(v) if isinstance(v, bool) else v

    @model_validator(mode="after")
    def _status_fits_value(self) -> Score:
        if self.status in UNSCORED_STATUSES and self.value is not None:
            raise ValueError(f"status {self.status!r} means unscored: value must be None, got {self.value!r}")
        if self.status not in UNSCORED_STATUSES and self.value is None:
            raise ValueError(
                f"status {self.status!r} is a verdict: it needs a value; an unscored Score takes one of "
                f"{', '.join(sorted(UNSCORED_STATUSES))}"
            )
        return self

    @property
    def scored(self) -> bool:
        """True when the reward decided (``value is not None``)."""
        return self.value is not None

    @classmethod
    def unscored(cls, status: Status, reason: str, **info: Any) -> Score:
        """An unscored Score with ``info["reason"]`` set."""
        return cls(value=None, status=status, info={"reason": reason, **info})


class RewardSpec(BaseModel):
    """A reward as a run uses it: the registered ``name``, its ``weight`` in the total, and plugin ``params``.

    Weight 0 means *log only*: the reward is computed and reported but does not enter the total. A spec is
    frozen (``params`` read-only) and hashable, so it can key a dict or a cache.

    >>> RewardSpec(name="math", weight=1.0, params={"percent_optional": True}).name
    'math'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    weight: float = 1.0
    params: Mapping[str, Any] = Field(default_factory=_empty)

    @field_validator("params", mode="after")
    @classmethod
    def _read_only_params(cls, v: Mapping[str, Any]) -> FrozenDict:
        return _freeze(v)

    @field_serializer("params")
    def _plain_params(self, v: Mapping[str, Any]) -> dict[str, Any]:
        return _thawed(v)  # a plain copy, nested parts included: a dump is the caller's to change

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> RewardSpec:
        """A copy (pydantic does not validate ``update``; the copy's ``params`` are read-only all the same)."""
        out = super().model_copy(update=update, deep=deep)
        out.__dict__["params"] = _freeze(out.params)
        return out

    def __hash__(self) -> int:
        """Equal specs hash alike: ``params`` enter through their :func:`frozen_form`, so specs key dicts and sets."""
        return hash((self.name, self.weight, frozen_form(self.params)))

    @field_validator("weight")
    @classmethod
    def _finite_weight(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("weight must be a finite number")
        return v
