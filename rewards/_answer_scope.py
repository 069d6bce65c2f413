"""Where a completion's final answer may be: this turn only, outside reasoning, inside the answer block.

* **This turn only.** Chat-template tokens end the completion (``<|im_end|>``, ``<|eot_id|>``, ...): what follows
  is another turn. Thought markers of other templates (``<|begin_of_thought|>``) are read as ``<think>``.
* **Never in reasoning.** Only the text after the last closed reasoning block counts; a reasoning block that is
  never closed, or reopened after the last close, means there is no answer yet.
* **Inside the answer block.** The content of the last ``<answer>...</answer>`` block, unless an earlier block says
  something else or a value follows the last one (a hedge across blocks).

This module only cuts the text down to where the answer is looked for; it does not find boxes
(:mod:`rewards._boxes`), read statements (:mod:`rewards._unboxed`) or decide which answer is final
(:mod:`rewards.final_answer`).
"""

from __future__ import annotations

import re

__all__ = ["MAX_COMPLETION_CHARS", "this_turn", "answer_block", "strip_think", "reasoning_open"]

#: Only the tail of a longer completion is searched (the final answer is at the end).
MAX_COMPLETION_CHARS = 200_000

_TURN = re.compile(r"<\|[A-Za-z0-9_\-]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|</s>|<(?:start|end)_of_turn>")
_THOUGHT = {
    "<|begin_of_thought|>": "<think>",
    "<|end_of_thought|>": "</think>",
    "<|begin_of_solution|>": "",
    "<|end_of_solution|>": "",
}


def this_turn(text: str) -> str:
    """The completion up to the first chat-template token that follows content (the rest is another turn)."""
    if "<" not in text:
        return text
    for token, repl in _THOUGHT.items():
        if token in text:
            text = text.replace(token, repl)
    last = 0
    for m in _TURN.finditer(text):
        if text[last : m.start()].strip():
            return text[: m.start()]
        last = m.end()
    return text[last:]


def answer_block(text: str, tag: str = "answer") -> str | None:
    """The content of the last ``<answer>...</answer>`` block (the rest of the text when it is not closed); None
    when the block before it says something else, or a value follows the block (hedges across blocks)."""
    low, open_t, close_t = text.lower(), f"<{tag}>".lower(), f"</{tag}>".lower()
    last = low.rfind(open_t)
    close = low.find(close_t, last)
    inner = text[last + len(open_t) : close if close >= 0 else len(text)]
    after = close + len(close_t)
    if close >= 0 and re.search(r"\d|\\boxed|\\fbox", text[after : after + 2000]):
        return None  # "<answer>7</answer> or maybe 8": another value after the block
    prev = low.rfind(open_t, 0, last)
    if prev >= 0:
        prev_close = low.find(close_t, prev, last)
        before = text[prev + len(open_t) : prev_close if prev_close >= 0 else last]
        if re.sub(r"\s+", "", before) != re.sub(r"\s+", "", inner):
            return None
    return inner.strip()


def strip_think(text: str, tag: str = "think") -> str | None:
    """The text after the last closed reasoning block; None while reasoning is open (never closed, or reopened)."""
    low, open_t, close_t = text.lower(), f"<{tag}>".lower(), f"</{tag}>".lower()
    end = low.rfind(close_t)
    if low.rfind(open_t) > end:
        return None  # reasoning opened (or reopened) and never closed
    return text[end + len(close_t) :] if end >= 0 else text


def reasoning_open(completion: str, tag: str = "think") -> bool:
    """True when this turn of ``completion`` ends inside reasoning: a ``<tag>`` never closed, or reopened after the
    last ``</tag>``; then nothing in it is a final answer yet.

    >>> reasoning_open("<think>a</think> 5"), reasoning_open("\\boxed{5}<think>\\boxed{3}")
    (False, True)
    """
    return strip_think(this_turn(completion[-MAX_COMPLETION_CHARS:]), tag) is None
