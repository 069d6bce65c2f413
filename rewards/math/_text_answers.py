"""Answers that are words rather than math: text answers, multiple-choice letters, numbered statements.

A normalized answer (:func:`rewards.math.normalize.clean`'s output) is text when it holds words and nothing that
looks like math: "no solution" (and its many spellings, or the empty set) is one text, "undefined" another, any
other words compare on their lower-case letters and digits (:func:`text_key`). A lone letter ``(C)`` is an option,
and ``①③`` (which numbered statements hold) is the sorted set of their numbers. :func:`choice_letter` finds the
option a longer answer commits to ("option C", ``C. 12``) and refuses one that names two ("C or D").

Function names and constants (``sqrt``, ``pi``, ``i``, ...) are math, never words: :data:`MATH_WORDS`, which unit
stripping in :mod:`rewards.math.normalize` reads too. This module does not normalize LaTeX, parse or compare.
"""

from __future__ import annotations

import re

from rewards.math.values import Text

__all__ = ["as_text", "choice_letter", "text_key", "MATH_WORDS"]

#: Words that are math (function names, constants, connectives): never a text answer, never a unit.
MATH_WORDS = {
    "sqrt",
    "cbrt",
    "exp",
    "log",
    "ln",
    "sin",
    "cos",
    "tan",
    "sec",
    "csc",
    "cot",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "pi",
    "oo",
    "inf",
    "infinity",
    "infty",
    "abs",
    "or",
    "and",
    "i",
    "e",
}
_NOSOL = {
    "nosolution",
    "nosolutions",
    "norealsolution",
    "norealsolutions",
    "none",
    "emptyset",
    "nosuchvalue",
    "thereisnosolution",
    "therearenosolutions",
    "novalue",
    "nointeger",
    "noreal",
    "nosuch",
}
_UNDEF = {"undefined", "dne", "doesnotexist", "notdefined", "doesntexist"}


def text_key(s: str) -> str:
    """Lower-case letters and digits only: the key text answers compare on."""
    return re.sub(r"[^a-z0-9]", "", s.lower())


def choice_letter(s: str) -> str | None:
    """The multiple-choice letter an answer commits to (``(C)``, ``C)``, ``C. 12``, ``option C``), if any."""
    t = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", s).strip().strip("*$ ")
    t = re.sub(r"^(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is\s*)?[:\s]\s*", "", t, flags=re.I)
    m = re.match(r"^\(?\s*([A-J])\s*\)?(?:$|[\s.:,)]+)", t)
    if not m:
        return None
    rest = t[m.end(1) :]
    if re.match(r"^\)?[\s,;/]*(?:(?:or|and)\s+)?\(?[A-J]\)?(?:[\s.,;)]|$)", rest):
        return None  # "C or D": hedging between choices
    others = {x for x in re.findall(r"(?<![\\A-Za-z])[A-J](?![A-Za-z])", rest)} - {m.group(1)}
    if others:
        return None  # "A \& B", "A (or B)", "A \lor B": another option named after the first
    return m.group(1)


_CIRCLED = {chr(0x2460 + k): k + 1 for k in range(20)}  # ① .. ⑳: numbered statements


def _statements(s: str) -> Text | None:
    """``①③`` (which numbered statements hold): the sorted set of their numbers, as a choice."""
    if not any(c in _CIRCLED for c in s):
        return None
    rest = re.sub(r"[\s,，、;and]", "", s.replace("\\text", "").replace("{", "").replace("}", ""))
    if not rest or any(c not in _CIRCLED for c in rest):
        return None
    return Text("statements " + " ".join(str(n) for n in sorted({_CIRCLED[c] for c in rest})), choice=True)


def as_text(s: str) -> Text | None:
    """The answer as text, when it is words rather than math (``Monday``, "no solution", ``(C)``, ``①③``).

    Returns None when the string looks like math. ``s`` is the output of :func:`clean`.
    """
    circled = _statements(s)
    if circled is not None:
        return circled
    letter = re.fullmatch(r"\(?\s*([A-J])\s*\)?", s.strip())
    if letter:
        return Text(letter.group(1).lower(), choice=True)
    key = text_key(s)
    if key in _NOSOL or key in ("emptyset", "varnothing"):
        return Text("nosolution")
    if key in _UNDEF:
        return Text("undefined")
    words = re.findall(r"[A-Za-z]+", s)
    if not words or re.search(r"[\d\\^_=<>+*/|]", s):
        return None
    long_words = [w for w in words if len(w) >= 2 and w.lower() not in MATH_WORDS]
    if not long_words:
        return None
    return Text(key)
