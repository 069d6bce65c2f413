r"""The gold answer's text: a bare answer, or the final answer of a gold written as a worked solution.

A gold is trusted (no hedge can hide in it), so its reading is wider than a completion's:

* **Worked solutions** (the MATH ``solution`` column, a GSM8K ``#### 42`` line, a paragraph ending in "The answer
  is ...") give their final answer, found as in a completion (:mod:`rewards.final_answer`).
* **Several boxes** are one answer only when a list joins them: between two boxes nothing but spacing, math
  delimiters, punctuation and at most two words, one of them "and" or "or" (``\boxed{1}$ and $\boxed{-2}``,
  ``\boxed{1} papers and \boxed{2} bins``, ``\boxed{3}, \boxed{5}``); they are then the unordered list of
  their values (the roots of one equation in any order), though never the *set* of them (``\{1, -2\}`` is
  another kind of answer). Boxes labelled as parts (``(a) \boxed{3} (b) \boxed{5}``) or by different names
  (``a = \boxed{3}, b = \boxed{5}``; one name, ``x = \boxed{2}`` or ``x_2 = \boxed{3}``, labels roots) are an
  ordered list. Boxes separated by any other text are steps of a solution: the last one is the answer
  (``\boxed{1} no no no \boxed{2}`` is 2, so ``1, 2`` does not match it).
* **A chain** ``1 = \zzz = x = 0`` whose whole cannot be read states its last side, when that side is a value.
* **A lone box without its closing brace.** A gold that is nothing but one box, ``\boxed{5`` (spacing and ``$``
  aside), with balanced braces inside, is that box closed: an answer field a few characters long is not cut by a
  length limit, so the missing last brace is a slip. Still unscored: an answer's unclosed box (a completion is
  cut off by its token limit; see :mod:`rewards.final_answer`), a gold with text before its unclosed box (``The
  answer is \boxed{5``: a worked solution may have been cut mid-answer), unbalanced braces inside
  (``\boxed{\frac{1}{2}``), an empty box.

This module only reads the gold's text; parsing and comparing are :mod:`rewards.math.reward`'s.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from rewards.final_answer import box_spans
from rewards.math.extract import extract_answer

__all__ = ["gold_text", "gold_last_side", "GoldKind"]

#: How several boxes of a gold combine: one answer (``None``), an unordered list, or ordered parts.
GoldKind = Literal["list", "parts"] | None

_ANCHOR = re.compile(r"answer|therefore|thus|hence", re.IGNORECASE)
_TAIL = 20_000
_FORMATTING = re.compile(
    r"\\(?:quad|qquad|text|textbf|mathrm|mbox|left|right|[,;:! ])(?![A-Za-z])|\\[()\[\]]|\$|[{}]|~"
)
_PART = re.compile(r"(?<![\w$^])\((?:[a-z]|i{1,3}|iv|vi{0,3}|\d{1,2})\)|\bpart\b", re.IGNORECASE)
_CONNECTIVE = {"and", "or"}
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{?\s*$")
#: The name right before a box (``a = \boxed{3}``, ``(x, y) = \boxed{...}``): different names label parts.
_LABEL = re.compile(r"([A-Za-z](?:_\{?[A-Za-z0-9]{1,4}\}?)?|\([A-Za-z, ]{1,20}\))\s*=\s*$")


def gold_text(gold: Any) -> tuple[str, GoldKind]:
    """The gold answer and how its several boxes combine (see the module doc); ``None`` for a single answer."""
    text = _closed_lone_box(str(gold).strip())
    worked = "\\boxed" in text or "\\fbox" in text or "####" in text
    if not (worked or _ANCHOR.search(text)):
        return text, None
    tail = text[-_TAIL:]
    found = extract_answer(tail, hedges=False)
    if not found.answer or not (worked or found.source in ("anchor", "sentence")):
        return text, None
    if not found.hedged:
        return found.answer, None
    return _several(tail, found.answer)


_LONE_OPEN_BOX = re.compile(r"\$?\s*(\\{1,2}(?:boxed|fbox))\s*\{")


def _closed_lone_box(text: str) -> str:
    """``\\boxed{5`` -> ``\\boxed{5}`` when the whole gold is one box that is never closed (see the module doc);
    any other text unchanged."""
    m = _LONE_OPEN_BOX.match(text)
    if m is None:
        return text
    inner = text[m.end() :].rstrip().rstrip("$").rstrip()
    depth = 0
    for c in inner:
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return text  # the box closes: not an unclosed one
    if depth != 0 or not inner:
        return text
    return f"{m.group(1)}{{{inner}}}"


def _several(text: str, joined: str) -> tuple[str, GoldKind]:
    """Several different boxes: a list, parts, or steps whose last box is the answer."""
    spans = box_spans(text)
    if len(spans) < 2:
        return joined, "list"
    betweens = [
        _BOX_OPEN.sub("", text[end + 1 : start]) for (_, end), (start, _) in zip(spans, spans[1:], strict=False)
    ]
    before = [_BOX_OPEN.sub("", text[: spans[0][0]][-40:]), *betweens]
    labels = {_name(m.group(1)) for b in before if (m := _LABEL.search(_FORMATTING.sub("", b)))}
    if any(_PART.search(b) for b in before) or len(labels) > 1:
        return joined, "parts"  # (a) \boxed{3} (b) \boxed{5}; a = \boxed{3}, b = \boxed{5}
    if all(_is_list_join(b) for b in betweens):
        return joined, "list"
    start, end = spans[-1]
    return text[start:end].strip(), None


def _name(label: str) -> str:
    """``x_1`` and ``x_2`` name the roots of one ``x``; ``(a, b)`` is one name."""
    return re.sub(r"_\{?\d{1,4}\}?$", "", label.replace(" ", ""))


def _is_list_join(between: str) -> bool:
    """Only spacing, delimiters, punctuation and at most two words, one of them a connective."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]{2,}", _FORMATTING.sub(" ", between))]
    if not words:
        return True
    return len(words) <= 2 and bool(_CONNECTIVE & set(words))


_RELATION = re.compile(r"(?<![<>!\\])=(?!=)")
_NOT_CHAIN = re.compile(r"[,;]|\\(?:text|mbox|quad|qquad)(?![A-Za-z])|\b(?:and|or)\b")


def gold_last_side(gold: str) -> str | None:
    """The last side of a gold equality chain of three or more sides (``1 = \\zzz = x = 0`` -> ``0``), which is
    where a gold states its value; None for anything else."""
    if _NOT_CHAIN.search(gold):
        return None  # "W(n) = 1 \text{ and } W(n) = -1": several equations, not one chain
    sides = _RELATION.split(gold.strip().strip("$").strip())
    if len(sides) < 3 or not all(s.strip() for s in sides):
        return None
    return sides[-1].strip()
