r"""Repetition that a reader sees as a loop, however it is dressed up.

Two measures over a completion, both linear in its length:

* :func:`ngram_repetition_fraction`: the share of word n-grams that repeat an earlier one (Yeo et al. 2025, as in
  open-r1), over words split at whitespace *and* at invisible characters (a zero-width space joins nothing a
  reader sees).
* :func:`loop_coverage`: the share of the text inside a repeated run of :data:`LOOP_SPAN` tokens, over a normalized
  token stream: text decomposed by NFKD (full-width forms and accents apart) and case-folded, zero-width characters
  and marks dropped (a zero-width space inside a word joins nothing a reader sees), other invisible characters read
  as spaces, every punctuation mark or symbol its own token (``\boxed{5}\boxed{5}`` repeats without a single
  space), words and numbers cut every 16 characters (text run together still forms tokens), and every number
  (digits, or an English number word) written as its step from the number last seen in the same place (a counter,
  ``Check 1:``, ``Check 2:``, is the same line each time). A run counts from its second occurrence on, so a loop
  of N copies covers (N - 1) / N of itself. Only the last :data:`MAX_LOOP_CHARS` characters are read: a loop runs
  to the end of a completion.

Honest reasoning repeats words ("so", "=", "the answer") and short formulas, but rarely a whole run of
:data:`LOOP_SPAN` tokens: over realistic long solutions (R1-style thinking with checks, GSM8K arithmetic, MATH
proofs with cases, enumerations of small cases) the coverage stays below :data:`LOOP_FREE` (the measured set is
in the tests), while a loop of any shape covers most of its text. The penalty is linear between :data:`LOOP_FREE`
(none) and :data:`LOOP_FULL` (the full penalty).

This module scores nothing itself (the ``repetition`` reward in :mod:`rewards.format` does) and reads no meaning:
two different computations that happen to be written alike are alike here.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from rewards.visible import Deadline, is_invisible_char

__all__ = [
    "LOOP_SPAN",
    "LOOP_FREE",
    "LOOP_FULL",
    "MAX_LOOP_CHARS",
    "loop_tokens",
    "loop_coverage",
    "loop_severity",
    "words",
    "ngram_repetition_fraction",
]

#: Tokens in a run that must repeat to count as looping (about two short lines of prose).
LOOP_SPAN = 12
#: Coverage at or below which there is no loop penalty; at or above :data:`LOOP_FULL` the penalty is full.
LOOP_FREE = 0.25
LOOP_FULL = 0.65
#: Only the last this many characters are examined for loops (a loop runs to the end of a completion).
MAX_LOOP_CHARS = 100_000

#: Words and numbers are cut every 16 characters, so text run together without any separator still forms tokens.
_TOKEN = re.compile(r"[^\W\d_]{1,16}|\d{1,16}(?:[.,]\d{1,16})*|\S")
_NUMBER = re.compile(r"\d")
#: English number words count as numbers, so "one again, two again" is a counter too.
_NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
} | {w: 10.0 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_CHECK_EVERY = 8192


@functools.lru_cache(maxsize=65536)
def _separator(c: str) -> bool:
    return is_invisible_char(c)


def _fold(text: str) -> str:
    """NFKC, case-folded, with every invisible character turned into a space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    table = {ord(c): " " for c in set(text) if _separator(c)}
    return text.translate(table) if table else text


_ZERO_WIDTH = frozenset({"Cf", "Cc", "Cs", "Co", "Cn", "Mn", "Mc", "Me"})


@functools.lru_cache(maxsize=65536)
def _loop_char(c: str) -> str:
    """What a character reads as for loop detection: zero-width ones (format characters, marks) are dropped, so a
    zero-width space inside a word joins nothing; other invisible ones are spaces; the rest is itself."""
    if c.isspace():
        return " "
    if not c.isascii() and unicodedata.category(c) in _ZERO_WIDTH:
        return ""
    return " " if is_invisible_char(c) else c


def _fold_for_loops(text: str) -> str:
    """NFKD (marks apart from their letters), case-folded, zero-width characters and marks dropped."""
    text = unicodedata.normalize("NFKD", text).casefold()
    table = {ord(c): _loop_char(c) for c in set(text) if _loop_char(c) != c}
    return text.translate(table) if table else text


def words(text: str) -> list[str]:
    """Lower-cased words, split at whitespace and at invisible characters.

    >>> words("the\u200bcat  SAT")
    ['the', 'cat', 'sat']
    """
    return _fold(text).split()


def loop_tokens(text: str) -> list[str]:
    r"""The normalized token stream of the last :data:`MAX_LOOP_CHARS` characters of ``text``, which
    :func:`loop_coverage` reads (see the module doc): words, numbers and single symbols, where a number is written
    as its step from the number last seen after the same two other tokens (``=`` unchanged, ``+1`` a counter, ``#``
    the first one), so ``Check 1:``, ``Check 2:`` read alike while a computation's varying results do not.

    >>> loop_tokens("Check 1: x=4. Check 2: x=4. Check 3: x=5.")[-7:]
    ['check', '+1', ':', 'x', '=', '+1', '.']
    >>> loop_tokens("\\boxed{5}\\boxed{5}")
    ['\\', 'boxed', '{', '#', '}', '\\', 'boxed', '{', '=', '}']
    """
    out: list[str] = []
    last: dict[tuple[str, str], float] = {}
    slot = ("", "")  # the last two tokens that are not numbers
    for t in _TOKEN.findall(_fold_for_loops(text[-MAX_LOOP_CHARS:])):
        word = _NUMBER_WORDS.get(t)
        if word is None and not _NUMBER.match(t):
            out.append(t)
            slot = (slot[1], t)
            continue
        value = _number(t) if word is None else word
        before = last.get(slot)
        last[slot] = value
        out.append("#" if before is None else "=" if value == before else f"{value - before:+g}")
    return out


def _number(t: str) -> float:
    digits = t.replace(",", "") if t.count(".") <= 1 else t.replace(".", "").replace(",", "")
    try:
        return float(digits[:30])
    except ValueError:
        return float(len(t))


def loop_coverage(tokens: Sequence[str], span: int = LOOP_SPAN, deadline: Deadline | None = None) -> float:
    """Share of ``tokens`` inside a run of ``span`` tokens that already occurred earlier (0 for short texts).

    >>> loop_coverage(loop_tokens(" ".join(f"{i} again" for i in range(100))))
    0.965
    >>> loop_coverage(loop_tokens("one two three four five six seven eight nine ten eleven twelve thirteen"))
    0.0
    """
    n = len(tokens)
    if n < 2 * span:
        return 0.0
    dl = deadline or Deadline(None)
    ids: dict[str, int] = {}
    codes = [ids.setdefault(t, len(ids)) for t in tokens]
    seen: set[tuple[int, ...]] = set()
    covered_to = 0  # tokens [.., covered_to) are covered
    covered = 0
    for i, gram in enumerate(zip(*(codes[k:] for k in range(span)), strict=False)):  # the k-grams
        if i % _CHECK_EVERY == 0:
            dl.check()
        if gram in seen:
            start = max(i, covered_to)
            covered += i + span - start
            covered_to = i + span
        else:
            seen.add(gram)
    return round(covered / n, 4)


def loop_severity(coverage: float) -> float:
    """0 at or below :data:`LOOP_FREE`, 1 at or above :data:`LOOP_FULL`, linear between.

    >>> loop_severity(0.2), loop_severity(0.45), loop_severity(0.9)
    (0.0, 0.5, 1.0)
    """
    return round(min(1.0, max(0.0, (coverage - LOOP_FREE) / (LOOP_FULL - LOOP_FREE))), 4)


def ngram_repetition_fraction(tokens: Sequence[str], n: int) -> float:
    """Fraction of n-grams that repeat an earlier one: ``1 - distinct / total`` (0 if fewer than n tokens).

    >>> ngram_repetition_fraction("a b a b a b".split(), 2)  # ab ba ab ba ab: 2 distinct of 5
    0.6
    """
    total = len(tokens) - n + 1
    if total <= 0:
        return 0.0
    distinct = len({tuple(tokens[i : i + n]) for i in range(total)})
    return 1.0 - distinct / total
