r"""What the problem statement tells the grader: whether it asks for an approximation, and its expressions.

* **Approximation.** Rounding is credited only where the problem asks for it: its words ("round", "nearest",
  "approximately", "estimate", "to two decimal places", "2 d.p.", "significant figures", "3 s.f.") or ``\approx`` in
  the gold. The number of decimal places it names ("two decimal places", "nearest hundredth") is read when it
  says.
* **Expressions of the prompt.** An answer that restates an expression of the problem (``17 \cdot 23`` for
  "Compute $17 \cdot 23$", ``3x + 4 = 19`` for "Solve $3x + 4 = 19$", ``\sqrt{12}`` for "Simplify
  $\sqrt{12}$") has not answered it, even though its value is the gold's. The expressions are the inline and
  display math of the prompt, the plain-text formulas in it (runs of digits, letters and operators between words),
  and the sides of their relations. Two writings are the same expression when they have the same tokens in any
  order, with a product written or not (``\cdot``, ``\times``, ``*``, side by side) and quotients (``\frac``,
  ``/``, ``\div``) read as one operator, and a square root as the power 1/2: ``23 \times 17`` and ``(17)(23)``
  restate ``17 \cdot 23``, ``49^{1/2}`` restates ``\sqrt{49}``. A single number or letter, signed or not, is
  never a restatement. Arithmetic written in words between two operands ("17 times 23", "12 divided by 4") is a
  formula of the prompt too. An answer that holds an expression of the
  prompt with the gold's value inside something that changes nothing (``17 \cdot 23 \cdot 1``, ``17 \cdot 23 +
  0``) restates it as well (:func:`contained_expressions` finds such runs; the reward compares their values).
  Answer options (``(A) $\sqrt{12}$``) are not expressions to compute.

This module does not compare values; :mod:`rewards.math.reward` applies both rules.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rewards.math.lexer import ParseError, Token, tokenize
from rewards.math.normalize import NormalizeError, clean
from rewards.math.tables import MUL_CMDS, RELOPS

__all__ = ["Problem", "read_problem", "expression_key", "contained_expressions", "prompt_text"]

#: Only the first part of a long prompt is read (problems state their expressions early).
MAX_PROMPT_CHARS = 20_000
_MAX_SEGMENTS = 200
#: An answer longer than this many tokens is not searched for expressions of the problem inside it.
_MAX_ANSWER_TOKENS = 200
_OPENERS = frozenset({"(", "{", "[", "left"})
_CLOSERS = frozenset({")", "}", "]", "right"})

_APPROX = re.compile(
    r"\b(?:round(?:ed|ing)?|nearest|approximat\w*|estimat\w*|decimal\s+places?|significant\s+(?:figures?|digits?)|"
    r"to\s+the\s+(?:tenths?|hundredths?|thousandths?))\b|\\approx|≈|\b\d+\s*(?:d\.\s?p|s\.\s?f)\.",
    re.IGNORECASE,
)
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_PLACES = re.compile(r"\b(\d|one|two|three|four|five|six)(?:[ -]+decimal[ -]+places?\b|\s*d\.\s?p\.)", re.IGNORECASE)
_NAMED_PLACE = re.compile(
    r"\bnearest\s+(?:(whole\s+number|integer|unit|one)|(tenth)|(hundredth)|(thousandth)|(ten[ -]thousandth))s?\b",
    re.IGNORECASE,
)
_MATH = re.compile(
    r"\$\$(.{1,2000}?)\$\$|(?<!\\)\$(.{1,1000}?)(?<!\\)\$|\\\((.{1,1000}?)\\\)|\\\[(.{1,2000}?)\\\]", re.DOTALL
)
#: Plain-text formula material: digits, letters, operators, brackets, with single spaces between.
_PLAIN = re.compile(r"[0-9A-Za-z.+\-*/^=<>()|!]+(?: [0-9A-Za-z.+\-*/^=<>()|!]+)*")
_WORDISH = re.compile(r"[A-Za-z]{2,}")
_OPTION = re.compile(r"(?:\(\s*[A-J]\s*\)|\b[A-J][.)])\s*(?:\\text(?:bf)?\{[^{}]{0,8}\}\s*)?$")
_RELATION_SPLIT = re.compile(r"\\(?:le|ge|leq|geq|ne|neq|lt|gt|leqslant|geqslant)(?![A-Za-z])|[=<>]|,")
#: Arithmetic written in words between two operands (``17 times 23``): read as the formula it is.
_OPERATOR_WORDS = {"times": "*", "multiplied": "*", "plus": "+", "minus": "-", "divided": "/", "over": "/"}
_WORD_OPERATOR = re.compile(
    r"(?<=[\d)])\s+(times|multiplied\s+by|plus|minus|divided\s+by|over)\s+(?=[\d(])", re.IGNORECASE
)
_PRODUCT = frozenset(MUL_CMDS) | {"*"}
_QUOTIENT = frozenset({"frac", "/", "div"})


@dataclass(frozen=True)
class Problem:
    """What a prompt says: whether it asks for an approximation, the places it names, its expression keys."""

    approximate: bool = False
    places: int | None = None
    expressions: frozenset[tuple[tuple[str, int], ...]] = frozenset()


def prompt_text(prompt: Any) -> str:
    """The text of a prompt given as a string or as chat messages (``[{"role": ..., "content": ...}]``)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        parts = []
        for m in prompt:
            content = m.get("content") if isinstance(m, dict) else m
            if isinstance(content, str):
                parts.append(content)
        return "\n".join(parts)
    return ""


@functools.lru_cache(maxsize=4096)
def read_problem(prompt: str) -> Problem:
    """Read one prompt (cached: a prompt is graded once per completion)."""
    text = prompt[:MAX_PROMPT_CHARS]
    if not text.strip():
        return Problem()
    approximate = bool(_APPROX.search(text))
    return Problem(approximate, _places(text) if approximate else None, frozenset(_expressions(text)))


def _places(text: str) -> int | None:
    m = _PLACES.search(text)
    if m:
        word = m.group(1).lower()
        return int(word) if word.isdigit() else _NUMBER_WORDS[word]
    named = _NAMED_PLACE.search(text)
    if named:
        return next(i for i in range(1, 6) if named.group(i)) - 1  # whole number 0, tenth 1, ... ten-thousandth 4
    return None


def _expressions(text: str) -> set[tuple[tuple[str, int], ...]]:
    segments: list[str] = []
    for m in _MATH.finditer(text):
        if _OPTION.search(text[max(0, m.start() - 24) : m.start()]):
            continue  # "(A) $\sqrt{12}$": an option to choose, not an expression to compute
        segments.append(next(g for g in m.groups() if g is not None))
    prose = _WORD_OPERATOR.sub(lambda m: f" {_OPERATOR_WORDS[m.group(1).lower().split()[0]]} ", _MATH.sub(" ; ", text))
    for m in _PLAIN.finditer(prose):
        for piece in re.split(r"(?:^| )[A-Za-z]{2,}(?= |$)", m.group(0)):  # words split formulas apart
            if re.search(r"\d", piece) and re.search(r"[-+*/^=<>|!]", piece):
                segments.append(piece)
    keys: set[tuple[tuple[str, int], ...]] = set()
    for seg in segments[:_MAX_SEGMENTS]:
        for part in {seg, *_RELATION_SPLIT.split(seg)}:
            key = expression_key(part)
            if key is not None:
                keys.add(key)
    return keys


def expression_key(text: str) -> tuple[tuple[str, int], ...] | None:
    """The token multiset of an expression (see the module doc); None for an atom or an unreadable text."""
    words = _key_words(text)
    return None if words is None else _key(w for w, _ in words)


def _key_words(text: str) -> list[tuple[str, int]] | None:
    """The key's words of ``text``, each with the index of its token, or None for an unreadable text."""
    try:
        toks = tokenize(clean(text))
    except (NormalizeError, ParseError, RecursionError):
        return None
    words: list[tuple[str, int]] = []
    for i, t in enumerate(toks):
        if t.kind == "end" or t.text in ("{", "}", "(", ")", "left", "right", "mathrm", "displaystyle"):
            continue  # grouping is not content: \sqrt{12} and \sqrt 12, (17)(23) and 17 \cdot 23
        word = t.text
        if word in _PRODUCT:
            continue  # an explicit product is the implicit one: (17)(23) restates 17 \cdot 23
        if word in _QUOTIENT:
            word = "/"
        elif t.kind == "cmd" and word in RELOPS:
            word = RELOPS[word]
        elif word in ("dbinom", "tbinom"):
            word = "binom"
        elif word == "sqrt" and t.kind == "cmd" and not (i + 1 < len(toks) and toks[i + 1].text == "["):
            words += [("^", i), ("1", i), ("/", i), ("2", i)]  # a square root is the power 1/2: 49^{1/2}
            continue
        words.append((word, i))
    return words


def _key(words: Iterable[str]) -> tuple[tuple[str, int], ...] | None:
    listed = list(words)
    core = listed[1:] if listed[:1] in (["-"], ["+"]) else listed
    if len(core) <= 1 or _WORDISH.fullmatch("".join(core)):
        return None  # an atom (a number, a letter, a name) restates nothing
    return tuple(sorted(Counter(listed).items()))


def contained_expressions(text: str, problem: Problem) -> Iterator[str]:
    """Each run of ``text`` (in order of its tokens, up to :data:`_MAX_ANSWER_TOKENS`) whose key is one of the
    problem's expressions, written out for parsing: ``17 \cdot 23`` in ``17 \cdot 23 \cdot 1``. Each run is
    offered alone and with the brackets around it (only brackets), so that its own brackets can close."""
    if not problem.expressions:
        return
    try:
        toks = tokenize(clean(text))
    except (NormalizeError, ParseError, RecursionError):
        return
    words = _key_words(text)
    if words is None or len(toks) > _MAX_ANSWER_TOKENS:
        return
    sizes = {sum(n for _, n in key) for key in problem.expressions}
    for size in sorted(sizes):
        for i in range(len(words) - size + 1):
            run = words[i : i + size]
            if _key(w for w, _ in run) not in problem.expressions:
                continue
            lo, hi = run[0][1], run[-1][1]
            yield " ".join(_render(t) for t in toks[lo : hi + 1])
            depth = low = 0  # bracket depth through the run, and its lowest point (closers without openers)
            for t in toks[lo : hi + 1]:
                depth += (t.text in _OPENERS) - (t.text in _CLOSERS)
                low = min(low, depth)
            while low < 0 and lo > 0 and toks[lo - 1].text in _OPENERS:
                lo, low, depth = lo - 1, low + 1, depth + 1
            while depth > 0 and hi + 1 < len(toks) and toks[hi + 1].text in _CLOSERS:
                hi, depth = hi + 1, depth - 1
            yield " ".join(_render(t) for t in toks[lo : hi + 1] if t.kind != "end")


def _render(t: Token) -> str:
    return "\\" + t.text if t.kind == "cmd" else t.text
