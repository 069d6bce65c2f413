r"""Reading the ``math`` reward's gold and answer strings into values, before any comparison.

* An answer string is normalized (:mod:`rewards.math.normalize`) and parsed (:mod:`rewards.math.parse`), cached
  because values are immutable; words and option letters become text, a value too large to evaluate keeps its
  source, and ``A \approx d`` reads as ``A`` when ``d`` is ``A`` rounded or truncated.
* A gold may be several option letters (``ABD``: a multi-select answer), an option with its content
  (``\textbf{(B) }12``), a value, the last side of a chain outside the grammar, or, when well formed but outside
  the grammar (``\overline{AB}``), a normalized string.
* An answer is read the way its gold asks: as a string against a string gold, as letters against letters, and
  with a decimal comma (``2,74``) against a single value.

Every sympy refusal or over-deep nesting while reading becomes a :class:`~rewards.math.parse.ParseError` naming
the problem. This module reads; it does not extract the final answer (:mod:`rewards.math.extract`), compare
(:mod:`rewards.math.compare`) or score (:mod:`rewards.math.reward`).
"""

from __future__ import annotations

import functools
import re

import sympy as sp

from rewards.math._text_answers import as_text, choice_letter
from rewards.math.compare import numeric_value
from rewards.math.gold import gold_last_side
from rewards.math.normalize import NormalizeError, clean
from rewards.math.parse import ParseError, parse_value
from rewards.math.values import Expr, Huge, HugeValue, Seq, Text, Value

__all__ = [
    "SYMPY_REFUSALS",
    "parse_answer",
    "parse_gold",
    "raw_gold",
    "choice_content",
    "parse_for",
    "decimal_comma",
    "is_set",
]

#: What sympy raises when asked for an operation that makes no sense (a matrix under a root, a matrix equated to a
#: number): the answer is unreadable (while parsing) or not the gold's value (while comparing), never a crash.
SYMPY_REFUSALS = (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError, IndexError, KeyError)


@functools.lru_cache(maxsize=8192)
def parse_answer(text: str) -> Value:
    """Normalize and parse one answer string (cached; values are immutable).

    Raises:
        ParseError: the text is not a readable answer (the message says why).
    """
    try:
        cleaned = clean(text)
    except NormalizeError as e:
        raise ParseError(str(e)) from None
    if not cleaned:
        raise ParseError("empty answer")
    t = as_text(cleaned)
    if t is not None:
        return t
    try:
        return _approximated(cleaned) or parse_value(cleaned)
    except HugeValue:
        return Huge(re.sub(r"\s+", "", cleaned))
    except RecursionError:
        raise ParseError("answer nested too deeply") from None
    except SYMPY_REFUSALS as e:
        if isinstance(e, ParseError):
            raise
        raise ParseError(f"cannot evaluate the answer: {type(e).__name__}") from None


#: ``\frac{1}{3} \approx 0.333``: an exact value followed by its decimal approximation (after ``x =`` or a
#: chain, whose last side is the exact value).
_APPROX = re.compile(r"^((?:[^=<>]{0,400}=){0,8})([^=<>]{1,400}?)\\approx\s*(-?\d{0,40}\.(\d{1,40}))$")


def _approximated(cleaned: str) -> Value | None:
    """``A \\approx d`` read as ``A`` (``x = A \\approx d`` as ``x = A``) when the decimal ``d`` is ``A`` rounded
    or truncated to its digits; None otherwise (then the whole is read as written: a false chain states nothing)."""
    m = _APPROX.match(cleaned)
    if not m:
        return None
    exact = parse_value(m.group(2))
    if not isinstance(exact, Expr) or exact.e.free_symbols or isinstance(exact.e, sp.MatrixBase):
        return None
    value = numeric_value(exact.e)
    if value is None or not value.is_real:
        return None
    unit, d = sp.Rational(1, 10 ** len(m.group(4))), sp.Rational(m.group(3))
    rounded = abs(value - d) <= unit / 2 * (1 + sp.Rational(1, 10**6))
    truncated = 0 <= (value - d) * (1 if d >= 0 else -1) < unit
    if not (rounded or truncated):
        return None
    return parse_value(m.group(1) + m.group(2)) if m.group(1) else exact


def parse_gold(gold_s: str) -> tuple[Value, str]:
    """The gold's value and the text it was read from: a multi-select gold (``ABD``), an option, a value, or the
    last side of a chain whose whole is outside the grammar (:func:`gold_last_side`)."""
    several_letters = _choice_letters(gold_s)  # a multi-select gold, "ABD"
    if several_letters:
        return Text(several_letters, choice=True), gold_s
    try:
        return _gold_choice(gold_s) or parse_answer(gold_s), gold_s
    except ParseError:
        last = gold_last_side(gold_s)
        if last is None:
            raise
        return parse_answer(last), last


def is_set(answer: str) -> bool:
    try:
        a = parse_answer(answer)
    except ParseError:
        return False
    return isinstance(a, Seq) and a.kind == "set"


def _raw_key(text: str) -> str | None:
    try:
        return re.sub(r"\s+", "", clean(text)).lower()
    except NormalizeError:
        return None


def raw_gold(gold: str) -> Text | None:
    """A gold outside the grammar but well formed (balanced braces, some content) compares as a string."""
    depth = 0
    for c in gold:
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return None
    key = _raw_key(gold) if len(gold) <= 300 else None
    if depth != 0 or not key or not re.search(r"[A-Za-z0-9]", key):
        return None
    return Text(key, raw=True)


_OPTION = re.compile(r"^\s*(?:\\text(?:bf)?\{\s*)?\(([A-J])\)\s*\}?|^\s*([A-J])\s*[:：]\s*(?=\S)")


def _gold_choice(gold: str) -> Text | None:
    """A gold that names an option with its content, ``\\textbf{(A) }5`` or ``C: \\frac12``, is that option's
    letter (an answer may also give the content: see :func:`choice_content`)."""
    m = _OPTION.match(gold)
    return Text((m.group(1) or m.group(2)).lower(), choice=True) if m else None


def choice_content(gold: str) -> Value | None:
    """The content of the option a gold names (``12`` of ``\\textbf{(B) }12``), parsed; None when it has none."""
    m = _OPTION.match(gold)
    content = gold[m.end() :].strip() if m else ""
    if not content:
        return None
    try:
        v = parse_answer(content)
    except ParseError:
        return None
    return None if isinstance(v, Text) and v.choice else v


def _choice_letters(text: str) -> str | None:
    """Several options at once, ``ABD``, ``A, B, D``, ``\\text{A and D}``: their letters, sorted (else None)."""
    t = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", text).strip().strip("$")
    t = re.sub(r"\s*(?:,|\band\b|\\?&)\s*|\s+", "", t)
    if not re.fullmatch(r"(?:\(?[A-J]\)?){2,10}", t):
        return None
    letters = re.findall(r"[A-J]", t)
    return "".join(sorted(letters)).lower() if len(set(letters)) == len(letters) else None


def parse_for(gold: Value, answer: str) -> Value:
    if isinstance(gold, Text) and gold.raw:
        return Text(_raw_key(answer) or "", raw=True)
    if isinstance(gold, Text) and gold.choice and len(gold.s) > 1:
        letters = _choice_letters(answer)
        return Text(letters, choice=True) if letters else parse_answer(answer)
    if isinstance(gold, Text) and gold.choice:
        single = re.fullmatch(r"\s*(?:\\text(?:bf)?\{)?\(?([a-jA-J])\)?\}?\s*", answer)
        letter = single.group(1).upper() if single else choice_letter(answer)
        if letter is not None:
            return Text(letter.lower(), choice=True)
    if isinstance(gold, Expr) and not isinstance(gold.e, sp.MatrixBase):
        answer = decimal_comma(answer)  # one value expected: 2,74 is 2.74 (not a list)
    return parse_answer(answer)


#: A decimal comma: one comma, no space, and not three digits after it (12,345 is a thousands separator) unless
#: the whole part is 0 (0,111 groups no thousands).
_DECIMAL_COMMA = re.compile(r"^\s*(-?\d+),(\d{1,2}|\d{4,})\s*$|^\s*(-?0),(\d+)\s*$")


def decimal_comma(text: str) -> str:
    m = _DECIMAL_COMMA.match(text)
    if m is None:
        return text
    whole, frac = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
    return f"{whole}.{frac}"
