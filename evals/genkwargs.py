"""``--gen-kwargs``: generation settings written the way lm-evaluation-harness users write them.

::

    --gen-kwargs max_new_tokens=256,temperature=0,top_p=1,stop="\\n\\nQuestion:"
    --gen-kwargs 'stop=["\\ndef ", "\\nclass "]' --gen-kwargs max_new_tokens=512

Keys: ``max_new_tokens`` (alias ``max_gen_toks``), ``temperature``, ``top_p``, ``stop`` (alias ``until``) and
``do_sample`` (``false`` means greedy: temperature 0). The flag may be given several times; later values win,
except ``stop``, whose strings add up (``stop=a,stop=b`` and ``stop=["a","b"]`` say the same).

Values: a JSON value (a number, ``true``/``false``, a ``"quoted string"`` or a ``["list", "of strings"]``), or a
bare word. Commas separate pairs except inside quotes or brackets. In a bare word, backslash escapes are read as
in Python (``\\n`` is a newline), so a shell can pass newlines without ``$'...'``.

An unknown key or a bad value is a :class:`~harness.errors.HarnessError` naming the key and what was expected.
This module parses only; :mod:`evals.task_run` applies the result over a task's defaults.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError

__all__ = ["GenKwargs", "parse_gen_kwargs", "GEN_KWARGS_KEYS"]

_ALIASES = {"max_gen_toks": "max_new_tokens", "until": "stop"}
#: The keys ``--gen-kwargs`` accepts (aliases: ``max_gen_toks``, ``until``).
GEN_KWARGS_KEYS = ("max_new_tokens", "temperature", "top_p", "stop", "do_sample")


@dataclass(frozen=True)
class GenKwargs:
    """Generation settings from ``--gen-kwargs``; None (or an empty ``stop``) means "not given"."""

    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = field(default=())

    def given(self) -> dict[str, Any]:
        """The settings that were given, by name."""
        out: dict[str, Any] = {
            k: v
            for k, v in (("max_new_tokens", self.max_new_tokens), ("temperature", self.temperature))
            if v is not None
        }
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.stop:
            out["stop"] = list(self.stop)
        return out


def _split_pairs(text: str) -> list[str]:
    """Split on commas outside quotes and brackets."""
    parts, buf, depth, quote, escaped = [], [], 0, "", False
    for ch in text:
        if escaped:
            buf.append(ch)
            escaped = False
            continue
        if ch == "\\":
            buf.append(ch)
            escaped = True
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    if quote or depth:
        raise HarnessError(f"--gen-kwargs {text!r}: unbalanced quotes or brackets")
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


def _value(key: str, raw: str) -> Any:
    raw = raw.strip()
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    if raw[:1] in "[{\"'":
        try:  # a Python literal: single-quoted strings and lists of them
            return ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raise HarnessError(f"--gen-kwargs {key}: {raw!r} is neither JSON nor a Python literal") from None
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as e:
        raise HarnessError(f"--gen-kwargs {key}: bad escape in {raw!r}: {e}") from None


def _number(key: str, v: Any, *, integer: bool, low: float, high: float | None, low_open: bool = False) -> Any:
    what = "an integer" if integer else "a number"
    bounds = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if high is not None else "")
    try:
        if isinstance(v, bool):
            raise ValueError
        num = int(v) if integer and (isinstance(v, int) or str(v).strip().lstrip("-").isdigit()) else float(v)
        if integer and not isinstance(num, int):
            raise ValueError
    except (TypeError, ValueError):
        raise HarnessError(f"--gen-kwargs {key}: expected {what} {bounds}, got {v!r}") from None
    if num < low or (low_open and num == low) or (high is not None and num > high):
        raise HarnessError(f"--gen-kwargs {key}: expected {what} {bounds}, got {v!r}")
    return num


def _stops(v: Any) -> list[str]:
    items = v if isinstance(v, list) else [v]
    for s in items:
        if not isinstance(s, str) or not s:
            raise HarnessError(f"--gen-kwargs stop: expected a non-empty string or a list of them, got {v!r}")
    return list(items)


def parse_gen_kwargs(values: Sequence[str] | str | None) -> GenKwargs:
    """Parse one or more ``--gen-kwargs`` strings.

    >>> parse_gen_kwargs(["max_new_tokens=64,temperature=0", "stop=Question:,until=['\\\\n\\\\n']"])
    GenKwargs(max_new_tokens=64, temperature=0.0, top_p=None, stop=('Question:', '\\n\\n'))

    Raises:
        HarnessError: an unknown key, a pair without ``=``, or a value of the wrong kind, naming the key.
    """
    items = [values] if isinstance(values, str) else list(values or [])
    got: dict[str, Any] = {}
    stops: list[str] = []
    for text in items:
        for pair in _split_pairs(text):
            key, eq, raw = pair.partition("=")
            key = key.strip()
            if not eq or not key:
                raise HarnessError(
                    f"--gen-kwargs {pair!r}: expected KEY=VALUE with KEY one of {', '.join(GEN_KWARGS_KEYS)}"
                )
            name = _ALIASES.get(key, key)
            if name not in GEN_KWARGS_KEYS:
                raise HarnessError(
                    f"--gen-kwargs: unknown key {key!r}; expected one of {', '.join(GEN_KWARGS_KEYS)} "
                    "(aliases: max_gen_toks, until)"
                )
            v = _value(key, raw)
            if name == "stop":
                stops.extend(_stops(v))
            elif name == "do_sample":
                if not isinstance(v, bool):
                    raise HarnessError(f"--gen-kwargs do_sample: expected true or false, got {v!r}")
                if not v:
                    got["temperature"] = 0.0
            elif name == "max_new_tokens":
                got[name] = _number(key, v, integer=True, low=1, high=None)
            elif name == "temperature":
                got[name] = float(_number(key, v, integer=False, low=0, high=None))
            else:
                got[name] = float(_number(key, v, integer=False, low=0, high=1, low_open=True))
    return GenKwargs(stop=tuple(dict.fromkeys(stops)), **got)
