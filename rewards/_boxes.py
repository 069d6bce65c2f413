r"""Where the boxes of a text are: ``\boxed{...}``, ``\fbox{...}`` and TeX's one-token form ``\boxed 5``.

One pass over the text finds every outermost closed box (a box inside another box is part of its content) and
whether the last box is opened and never closed; braces are matched in one pass too, so the cost is linear in
the text's length. The box commands are configurable (``boxed_present`` passes its own).

This module only locates boxes. Which box is the final answer, and whether several boxes are a hedge, is decided
by :mod:`rewards.final_answer`; what a box's content shows is :mod:`rewards.visible`'s concern.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["BOX_COMMANDS", "BOX", "box_rx", "box_spans", "box_spans_with_unclosed"]

#: The box commands every reward reads by default; ``\boxed 5`` (TeX's one-token argument) is a box too.
BOX_COMMANDS: tuple[str, ...] = ("boxed", "fbox")


@functools.lru_cache(maxsize=32)
def box_rx(commands: tuple[str, ...]) -> re.Pattern[str]:
    """A command of ``commands`` (``\\boxed``, not ``\\boxedx``) and up to three spaces or tabs after it (cached)."""
    return re.compile(r"\\(?:" + "|".join(map(re.escape, commands)) + r")(?![A-Za-z])[ \t]{0,3}")


BOX = box_rx(BOX_COMMANDS)
_BRACE = re.compile(r"(?<!\\)[{}]")


def _brace_pairs(text: str) -> dict[int, int]:
    """Position of each unescaped ``{`` -> its matching ``}``, in one pass over the braces."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(text):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def box_spans_with_unclosed(text: str, box: re.Pattern[str] = BOX) -> tuple[list[tuple[int, int, int]], int]:
    """(box start, content start, content end) of every outermost closed box, in order, and where the last box
    that is never closed starts when it comes after every closed one (else -1).

    A box inside another box is part of that box's content; unclosed boxes are skipped. One pass: linear.
    """
    out: list[tuple[int, int, int]] = []
    pairs: dict[int, int] | None = None
    covered, unclosed = -1, -1
    for m in box.finditer(text):
        if m.start() < covered:
            continue
        i = m.end()
        if i < len(text) and text[i] == "{":
            if pairs is None:
                pairs = _brace_pairs(text)
            j = pairs.get(i)
            if j is not None:
                out.append((m.start(), i + 1, j))
                covered = j
            else:
                unclosed = m.start()
        else:
            tok = re.match(r"[^\s$]{1,200}", text[i : i + 200])
            if tok:
                out.append((m.start(), i, i + tok.end()))
    return out, unclosed if not out or unclosed > out[-1][0] else -1


def box_spans(text: str, commands: Sequence[str] = BOX_COMMANDS) -> list[tuple[int, int]]:
    r"""(start, end) of the content of every outermost closed box in ``text``, in order (one pass: linear).

    >>> t = "\\boxed{1} and \\fbox 2"
    >>> [t[a:b] for a, b in box_spans(t)]
    ['1', '2']
    """
    return [(a, b) for _, a, b in box_spans_with_unclosed(text, box_rx(tuple(commands)))[0]]
