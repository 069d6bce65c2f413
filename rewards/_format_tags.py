"""The tag structure the format rewards check: tag blocks, empty shells, the reasoning/answer split, per-tag credit.

* A tag block is an opening ``<tag>`` with the first closing ``</tag>`` after it; the closing tags of every name
  are collected in one pass, so finding blocks costs O(n log n) whatever the number of names.
* An *empty shell* is a tag block or a box whose content shows nothing to a reader (:mod:`rewards.visible`).
* ``<think>...</think>`` then ``<answer>...</answer>`` is split into its parts with the reason when malformed,
  and each tag pair earns half credit for its opening and half for a closing that follows it, in order.

Every scan checks a cooperative :class:`~rewards.visible.Deadline` as it goes. This module does not register or
score rewards, read their parameters or find the final answer: :mod:`rewards.format` does the first two,
:mod:`rewards.final_answer` the last.
"""

from __future__ import annotations

import bisect
import re

from rewards.final_answer import box_spans, reasoning_open
from rewards.visible import Deadline, is_placeholder, substance_prefix

__all__ = ["empty_shell", "shows_nothing", "think_part", "answer_part", "tag_credits"]

_OPEN_TAG = re.compile(r"<([A-Za-z][\w-]{0,30})>")
_CLOSE_TAG = re.compile(r"</([A-Za-z][\w-]{0,30})>")


def _tag_blocks(text: str, deadline: Deadline) -> list[tuple[str, int, int]]:
    """(tag, start, end) of each ``<tag>...</tag>`` content: every opening tag with the first closing tag after it.

    One pass collects the closing tags of every name, so the cost is O(n log n) whatever the number of names."""
    closes: dict[str, list[int]] = {}
    for k, m in enumerate(_CLOSE_TAG.finditer(text)):
        if k % 4096 == 0:
            deadline.check()
        closes.setdefault(m.group(1), []).append(m.start())
    out: list[tuple[str, int, int]] = []
    for k, m in enumerate(_OPEN_TAG.finditer(text) if closes else ()):
        if k % 4096 == 0:
            deadline.check()
        found = closes.get(m.group(1))
        at = bisect.bisect_left(found, m.end()) if found else 0
        if found and at < len(found):
            out.append((m.group(1), m.end(), found[at]))
    return out


def empty_shell(text: str, deadline: Deadline | None = None) -> str | None:
    """Why ``text`` is an empty shell (a tag block or a box that shows nothing), or None."""
    dl = deadline or Deadline(None)
    blocks = _tag_blocks(text, dl)
    boxes = box_spans(text)
    if not blocks and not boxes:
        return None
    sub = substance_prefix(text, dl)
    for name, a, b in blocks:
        if sub[b] == sub[a]:
            return f"the <{name}> block has no content"
    for a, b in boxes:
        if sub[b] == sub[a]:
            return "a \\boxed{} has no content"
    return None


def shows_nothing(text: str, deadline: Deadline) -> bool:
    return is_placeholder(text, deadline) or empty_shell(text, deadline) is not None


def think_part(text: str, think_tag: str, prefilled: bool, dl: Deadline) -> tuple[str | None, str, str]:
    """Split ``text`` into (think content, rest, failure reason); content None on failure."""
    open_t, close_t = f"<{think_tag}>", f"</{think_tag}>"
    n_open, n_close = text.count(open_t), text.count(close_t)
    expected_open = 0 if prefilled else 1
    if n_open != expected_open or n_close != 1:
        return None, "", f"expected {expected_open} {open_t} and 1 {close_t}, found {n_open} and {n_close}"
    if not prefilled and not text.startswith(open_t):
        return None, "", f"the completion does not start with {open_t}"
    start = 0 if prefilled else len(open_t)
    end = text.find(close_t)
    if end < start:
        return None, "", f"{close_t} comes before {open_t}"
    if shows_nothing(text[start:end], dl):
        return None, "", f"empty {open_t} block (nothing a reader can see)"
    return text[start:end], text[end + len(close_t) :], ""


def answer_part(rest: str, answer_tag: str, dl: Deadline) -> tuple[str | None, str, str]:
    """Parse ``<answer>...</answer>`` as the whole of ``rest``: (content, status, reason)."""
    open_t, close_t = f"<{answer_tag}>", f"</{answer_tag}>"
    rest = rest.strip()
    n_open, n_close = rest.count(open_t), rest.count(close_t)
    if n_open == 0 and n_close == 0:
        return None, "no_answer", f"no {open_t}...{close_t} block after the reasoning"
    if n_open != 1 or n_close != 1:
        return None, "parse_error", f"expected 1 {open_t} and 1 {close_t}, found {n_open} and {n_close}"
    if not rest.startswith(open_t) or not rest.endswith(close_t):
        return None, "parse_error", f"text outside {open_t}...{close_t} after the reasoning"
    content = rest[len(open_t) : -len(close_t)]
    if shows_nothing(content, dl):
        return None, "no_answer", f"empty {open_t} block (nothing a reader can see, or a placeholder)"
    return content.strip(), "ok", ""


def _tag_pair(text: str, tag: str, dl: Deadline) -> tuple[float, tuple[int, int] | None]:
    """(credit, span): 0.5 for exactly one ``<tag>`` followed by something a reader sees, 0.5 more for exactly one
    ``</tag>`` after it closing that content; the span of the complete pair, if any. Tags around nothing (empty,
    invisible characters, no-op commands) earn nothing: a shell is no format."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    if text.count(open_t) != 1:
        return 0.0, None
    start, end = text.find(open_t), text.find(close_t)
    closed = text.count(close_t) == 1 and end > start  # a closing tag without its opening, or before it: unclosed
    if shows_nothing(text[start + len(open_t) : end if closed else len(text)], dl):
        return 0.0, None
    if not closed:
        return 0.5, None
    return 1.0, (start, end + len(close_t))


def tag_credits(text: str, tags: tuple[str, ...], dl: Deadline) -> dict[str, float]:
    """Per-tag credit; a complete pair that crosses another, or comes before an earlier tag's pair, loses its
    closing half (tags must be properly nested-free and in the order given)."""
    pairs = {t: _tag_pair(text, t, dl) for t in tags}
    credit = {t: c for t, (c, _) in pairs.items()}
    for i, ti in enumerate(tags):
        for tj in tags[i + 1 :]:
            si, sj = pairs[ti][1], pairs[tj][1]
            if si is None or sj is None or si[1] <= sj[0]:
                continue  # ordered: the earlier tag's pair closes before the later one opens
            credit[tj] = min(credit[tj], 0.5)
            if si[0] < sj[0] < si[1] < sj[1] or sj[0] < si[0] < sj[1] < si[1]:
                credit[ti] = min(credit[ti], 0.5)  # interleaved: neither pair is well formed
    if len(tags) > 1 and reasoning_open(text, tags[0]):
        for t in tags[1:]:  # reasoning reopened after them: no later pair holds a final answer yet
            credit[t] = min(credit[t], 0.5)
    return credit
