"""Strict parsing of a judge's reply into a verdict: ``VERDICT: yes|no`` or ``VERDICT: <integer 1..N>``.

A verdict is read from a line of its own that starts with ``VERDICT`` (markdown bold and a surrounding code
fence are tolerated), or from a JSON object with a ``"verdict"`` key (the whole reply, or a fenced ``json``
block). Parsing is strict on purpose, because a guessed verdict trains the policy on noise:

* no verdict line: a parse error (prose such as "my verdict is yes" does not count);
* the same verdict repeated: fine; two *different* verdicts (the judge changed its mind mid-text): a parse error;
* a value outside the scale (``7`` on 1-5, ``maybe`` on yes/no, ``4.5``): a parse error.

The rationale is the text before the first verdict line (or the JSON ``"rationale"``), capped in length.

This module is pure: no I/O, no HTTP, no aggregation of votes (see :mod:`rewards.llm_judge._plugin`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["Scale", "Verdict", "VerdictError", "parse_scale", "parse_verdict"]

RATIONALE_CHARS = 2000

_LINE = re.compile(r"^[\s>*_#`-]*verdict[\s*_`]*[:=][\s*_`]*(?P<value>.*?)[\s*_`.]*$", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Scale:
    """``binary`` (yes = 1.0, no = 0.0) or an integer scale ``1..top`` normalized to ``[0, 1]``."""

    top: int | None = None  # None: binary

    @property
    def binary(self) -> bool:
        return self.top is None

    @property
    def instruction(self) -> str:
        """How the rubric asks for the verdict line (substituted for ``{verdict_format}``)."""
        if self.binary:
            return "VERDICT: yes\nor\nVERDICT: no"
        return f"VERDICT: <one integer from 1 to {self.top}>"

    def normalize(self, raw: int | str) -> float:
        if self.binary:
            return 1.0 if raw == "yes" else 0.0
        assert self.top is not None and isinstance(raw, int), "scale verdicts are integers"
        return (raw - 1) / (self.top - 1)

    def __str__(self) -> str:
        return "binary" if self.binary else f"1-{self.top}"


def parse_scale(text: str) -> Scale:
    """``"binary"`` or ``"1-N"`` (2 <= N <= 100) into a :class:`Scale`; anything else is a ValueError."""
    t = str(text).strip().lower()
    if t in ("binary", "yes/no", "yes-no"):
        return Scale()
    m = re.fullmatch(r"1\s*-\s*(\d{1,3})", t)
    if m and 2 <= int(m.group(1)) <= 100:
        return Scale(int(m.group(1)))
    raise ValueError(f"scale must be 'binary' or '1-N' with 2 <= N <= 100, got {text!r}")


@dataclass(frozen=True)
class Verdict:
    """A parsed verdict: ``raw`` as the judge wrote it (``"yes"``/``"no"`` or an int), ``value`` in [0, 1]."""

    raw: int | str
    value: float
    rationale: str


class VerdictError(ValueError):
    """The reply holds no single valid verdict; the message says why."""


def _value(token: object, scale: Scale) -> int | str:
    if scale.binary:
        t = str(token).strip().lower() if isinstance(token, str) else token
        if t in ("yes", "no"):
            return str(t)
        raise VerdictError(f"verdict {token!r} is not yes or no")
    if isinstance(token, bool):
        raise VerdictError(f"verdict {token!r} is not an integer from 1 to {scale.top}")
    if isinstance(token, int):
        n = token
    elif isinstance(token, str) and re.fullmatch(r"[+]?\d{1,4}", token.strip()):
        n = int(token.strip())
    else:
        raise VerdictError(f"verdict {token!r} is not an integer from 1 to {scale.top}")
    assert scale.top is not None
    if not 1 <= n <= scale.top:
        raise VerdictError(f"verdict {n} is out of range 1..{scale.top}")
    return n


def _from_json(text: str, scale: Scale) -> Verdict | None:
    candidates = [text.strip()] + [m.group(1) for m in _FENCE.finditer(text)]
    for c in candidates:
        if not (c.startswith("{") and c.endswith("}")):
            continue
        try:
            obj = json.loads(c)
        except ValueError:
            continue
        if isinstance(obj, dict) and "verdict" in obj:
            raw = _value(obj["verdict"], scale)
            rationale = str(obj.get("rationale", obj.get("reasoning", "")))[:RATIONALE_CHARS]
            return Verdict(raw, scale.normalize(raw), rationale)
    return None


def parse_verdict(text: str, scale: Scale) -> Verdict:
    """The one verdict in ``text`` on ``scale``; raises :class:`VerdictError` saying why there is none.

    >>> parse_verdict("The answer matches the reference.\\nVERDICT: yes", Scale()).value
    1.0
    >>> parse_verdict('{"rationale": "close", "verdict": 4}', Scale(5)).value
    0.75
    >>> parse_verdict("VERDICT: yes\\nWait, no.\\nVERDICT: no", Scale())  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    rewards.llm_judge._verdict.VerdictError: conflicting verdicts: 'yes' then 'no'
    """
    if not isinstance(text, str) or not text.strip():
        raise VerdictError("the judge returned no text")
    from_json = _from_json(text, scale)
    if from_json is not None:
        return from_json
    lines = text.splitlines()
    found: list[tuple[int, int | str]] = []
    for i, line in enumerate(lines):
        m = _LINE.match(line)
        if m is None:
            continue
        value = m.group("value").strip()
        if not value:
            raise VerdictError(f"verdict line {line.strip()!r} has no value")
        found.append((i, _value(value, scale)))
    if not found:
        raise VerdictError(f"no 'VERDICT: {'yes|no' if scale.binary else f'1..{scale.top}'}' line in the reply")
    distinct = list(dict.fromkeys(v for _, v in found))
    if len(distinct) > 1:
        raise VerdictError(f"conflicting verdicts: {distinct[0]!r} then {distinct[1]!r}")
    first = found[0][0]
    rationale = "\n".join(ln for ln in lines[:first] if not ln.strip().startswith("```")).strip()
    return Verdict(distinct[0], scale.normalize(distinct[0]), rationale[:RATIONALE_CHARS])
