r"""The final answer of a completion: the one finder every reward uses (``math``, ``boxed_present``,
``think_answer_format``, ``tag_count``), so that they never disagree on what the answer is.

Where the answer is looked for (the same for every reward):

* **This turn only.** Chat-template tokens end the completion: anything after ``<|im_end|>``, ``<|eot_id|>``,
  ``<|im_start|>`` ... is another turn.
* **Never in reasoning.** Text inside ``<think>...</think>`` (or ``<|begin_of_thought|>...<|end_of_thought|>``)
  never counts, closed or not; a ``<think>`` that is never closed, or one reopened after the last ``</think>``,
  means the model has not answered yet: no answer, even if a box came before it.
* **Inside the answer block.** When an ``<answer>...</answer>`` block (the R1 format) follows the reasoning, the
  search runs inside the last one (several blocks that say different things, or a value after the last one,
  are a hedge: no answer).
* **Only what a reader sees.** Comments (on a line or in a group of their own: ``n % 2`` in prose stays),
  phantoms and white text are blanked before the search (an answer commented out is no answer), and a box or a
  statement whose content shows nothing (invisible characters, spacing or no-op commands, ``\ldots``:
  :mod:`rewards.visible`) is not an answer.

What the answer is, in order: the last box outside reasoning, ``\boxed{...}``, ``\fbox{...}`` or TeX's
one-token form ``\boxed 5`` (a last box that is opened and never closed means the text was cut off: no answer);
else the last explicitly anchored statement ("The answer is", "Final Answer:", "Answer:", "The correct option
is", GSM8K ``####``, "X is the answer", "Option (C) is correct", "Answer" alone opening a line when one math block
is all the rest of that line says; the sentence is cut at "because", "since", ", which" and every inline-math part
of it counts, so "$x=2$ or $x=3$" is seen as two answers; a prose statement with one number states that number;
an anchor with a negation before it in its sentence, "Not the answer: 5", anchors nothing); else a final sentence
that states a conclusion ("Therefore, the area of the triangle is 7/2."; a capitalized concluding word starts a
sentence even without a period before it) or corrects a denied value ("it's not 10, it's 12"); else a bold final
line; else the whole text when it is one math block after at most a short label, or a single short line that is
only an answer (never a question).

Several *different* boxed answers are reported as hedged (the caller compares them as a list: wrong for a
single-valued gold, right for the matching multi-valued one) unless the text before the last box revises the
earlier one or concludes ("wait", "I made an error", "the answer is", "therefore"): then the last box wins. A
final answer directly followed by an alternative ("The answer is 7. Or maybe 8.", ``**7** or **8**``, "or is it
8?") is a hedge: no answer.

With ``strict=False`` a completion without any of those falls back to its last ``= value`` or last number, which
is what lenient graders do; the default is strict, so prose that merely mentions the gold scores nothing.

Every scan is linear in the completion's length: no regex here has two adjacent unbounded quantifiers, nested
boxes are skipped in one pass, and only the tail of a completion is searched. The parts live apart: where the
answer may be (:mod:`rewards._answer_scope`), where the boxes are (:mod:`rewards._boxes`), the unboxed forms
(:mod:`rewards._unboxed`); this module decides which answer is final and whether it is hedged. It does not
normalize or parse the answer (:mod:`rewards.math` does) and does not judge the completion's format
(:mod:`rewards.format`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewards._answer_scope import MAX_COMPLETION_CHARS, answer_block, reasoning_open, strip_think, this_turn
from rewards._boxes import BOX, BOX_COMMANDS, box_rx, box_spans, box_spans_with_unclosed
from rewards._unboxed import (
    ANCHOR,
    anchored_statement,
    bold_final_line,
    conclusion,
    delimited,
    fallback,
    is_bare,
    statement,
)
from rewards.final_sentences import labelled_math
from rewards.visible import is_placeholder, strip_hidden

__all__ = ["Extraction", "extract_answer", "reasoning_open", "box_spans", "MAX_COMPLETION_CHARS", "BOX_COMMANDS"]


_MAX_BOXES = 64  # only the last boxes are compared for hedging
_RETRACT = re.compile(  # right after the answer, a sentence that takes it back
    r"^[\s.,;:!*)\]}$]{0,12}(?:wait|hmm+|actually|no(?:[,.!]|[ \t]+wait)|nope|oops|hold[ \t]+on|"
    r"(?:that|this)(?:'s|[ \t]+is)[ \t]+(?:wrong|incorrect|not[ \t]+right)|i[ \t]+made[ \t]+an?[ \t]+(?:error|mistake)|"
    r"let[ \t]+me[ \t]+re-?(?:check|consider|think|do|calculate|compute|evaluate))(?![A-Za-z])",
    re.IGNORECASE,
)
_REVISION = re.compile(
    r"\b(?:wait|actually|mistake|error|wrong|incorrect|correction|correct(?:ed|ing)|re-?check\w*|re-?evaluat\w*|instead|"
    r"revis\w*|final\s+answer|answer\s+is|fix\w*|therefore|thus|hence|in\s+conclusion|finally)\b",
    re.IGNORECASE,
)
_STEP_HEDGE = re.compile(  # a word between two boxes that offers the second as an alternative to the first
    r"\b(?:or|alternatively|alternative|maybe|perhaps|possibly|could|might|either|also|another|other|otherwise|"
    r"if|unless|else|but|however|part|parts|case|cases|subcase|option|options|possibility|possibilities|candidate|"
    r"candidates|scenario|choice|answers|solutions|roots|one|second|both|each|respectively|together|and)\b|"
    r"(?<![\w$^])\((?:[a-z]|i{1,3}|iv|\d{1,2})\)",
    re.IGNORECASE,
)
_HEDGE_AFTER = re.compile(  # "or equivalently", "or in other words" restate the answer, they do not hedge it
    r"^[\s.,;:!*()\[\]}$]{0,12}(?:or(?![ \t]+(?:equivalently|in[ \t]+other[ \t]+words|simply|written[ \t]+as)\b)|"
    r"maybe|perhaps|possibly)\b",
    re.IGNORECASE,
)
_ALTERNATIVE = re.compile(  # "Hmm, or is it 8?", "it might be 8", "possibly $8$": a hedge word right before a value
    r"\b(?:or[ \t]+(?:maybe|perhaps|possibly|is[ \t]+it)|maybe|perhaps|possibly|"
    r"(?:could|might)(?:[ \t]+also)?[ \t]+be|not[ \t]+sure)[ \t,:]{0,3}"
    r"(?:it'?s[ \t]+|it[ \t]+is[ \t]+|the[ \t]+answer[ \t]+is[ \t]+)?(?:\$|\\boxed|\\\(|\*\*)?[ \t]*-?\d",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract_answer` found.

    Attributes:
        answer: the final answer text, or None when the completion commits to none.
        source: ``boxed``, ``anchor``, ``sentence``, ``bold``, ``bare``, ``fallback`` or ``none``.
        hedged: True when several different boxed answers were given (``answer`` then lists them all).
        reason: why no answer was found, when ``answer`` is None.
        unclosed: True when no answer was found because the last box is never closed (the text was cut off).
        last: for boxed steps (different boxes in separate sentences with prose and no hedge word between the
            last two), the last box: the answer to a single-valued gold; a multi-valued gold takes the list.
    """

    answer: str | None
    source: str
    hedged: bool = False
    reason: str = ""
    last: str | None = None
    unclosed: bool = False


def _final_box(text: str, spans: list[tuple[int, int, int]]) -> tuple[Extraction, int] | None:
    """The last box with content and where it ends; different boxes are a hedge unless the last one is a revision.

    A box that shows nothing (``\\boxed{\\phantom{7}}``, ``\\boxed{\\ldots}``) is not an answer."""
    found = [(at, end, text[a:end].strip()) for at, a, end in spans[-_MAX_BOXES:]]
    found = [f for f in found if not is_placeholder(f[2])]
    if not found:
        return None

    def key(b: str) -> str:
        return re.sub(r"\s+|\$", "", b)

    last_at, last_end, last = found[-1]
    end = last_end + 1
    earlier = [(at, b) for at, _, b in found if key(b) != key(last)]
    if not earlier:
        return Extraction(last, "boxed"), end
    if _REVISION.search(text, earlier[-1][0], last_at):
        return Extraction(last, "boxed"), end  # "\boxed{5} ... wait, I made an error ... \boxed{7}"
    distinct: dict[str, str] = {}
    for _, _, b in found:
        distinct.setdefault(key(b), b)
    between = text[earlier[-1][0] : last_at]
    stepwise = (
        re.search(r"[.:;!?]\s|\n", between)
        and re.search(r"(?<![\\A-Za-z])[A-Za-z]{2,}", between)
        and not _STEP_HEDGE.search(between)
    )  # prose between: a step, not a list of boxes
    return Extraction(", ".join(distinct.values()), "boxed", hedged=True, last=last if stepwise else None), end


def _anchored_after(text: str, end: int, box: re.Pattern[str] = BOX) -> bool:
    """An explicit final-answer statement ("Final Answer:", "The answer is", ``####``) after ``end``, with no box
    in it: it, not an earlier box (an intermediate result), is the final answer."""
    anchor = None
    for found in ANCHOR.finditer(text, end):  # only the text after the box: usually a few characters
        anchor = found
    if anchor is None or re.search(r"would|will|must|should", anchor.group(0), re.I):
        return False  # "if the die were biased the answer would be different" is no statement of the answer
    stmt, _ = statement(text[anchor.end() :])
    if not re.search(r"\d|\\[A-Za-z]|^\(?[A-J]\)?$", stmt):
        return False
    return not box.search(text, anchor.start())


def _hedged_after(text: str, end: int) -> bool:
    """The final answer is followed at once by an alternative ("... 7. Or maybe 8.") or a retraction ("... 7.
    Wait, that is wrong.")."""
    after = text[end : end + 160]
    if _RETRACT.match(after):
        return True
    m = _HEDGE_AFTER.match(after)
    if m and re.search(r"\d|\\boxed|\$", after[m.end() :]):
        return True
    return bool(_ALTERNATIVE.search(after))


def extract_answer(
    completion: str,
    *,
    strict: bool = True,
    hedges: bool = True,
    boxes: Sequence[str] = BOX_COMMANDS,
    tags: tuple[str, str] = ("think", "answer"),
) -> Extraction:
    r"""Find the final answer a completion commits to (see the module doc for the rules every reward shares).

    Args:
        completion: the model's text.
        strict: when False, fall back to the last ``= value`` or number if nothing is anchored.
        hedges: when False (a gold written as a solution, trusted), an alternative after the answer is not a hedge
            ("$m = \\boxed{-1}$ or $m = 3$ (rejected)").
        boxes: the LaTeX commands that box an answer (``boxed_present`` passes its ``commands``).
        tags: the reasoning and answer tag names (``think_answer_format`` and ``tag_count`` pass theirs).

    >>> extract_answer("so $x=2$, hence \\boxed{\\frac{1}{2}}").answer
    '\\frac{1}{2}'
    >>> extract_answer("The area is 12 or maybe 13.").source
    'none'
    >>> extract_answer("Therefore, the area of the triangle is $7/2$.<|im_end|>").answer
    '7/2'
    >>> extract_answer("\\boxed 5").answer, extract_answer("\\boxed{5}<think>\\boxed{3}").answer
    ('5', None)
    """
    think, answer_tag = tags
    text = strip_think(this_turn(strip_hidden(completion[-MAX_COMPLETION_CHARS:])), think)
    if text is None:
        return Extraction(None, "none", reason=f"reasoning never closed (unterminated <{think}>)")
    if f"<{answer_tag}>".lower() in text.lower():
        text = answer_block(text, answer_tag)
        if text is None:
            reason = f"several different <{answer_tag}> blocks, or a value after the last"
            return Extraction(None, "none", reason=reason)
    found = _find_in(text, strict, hedges, box_rx(tuple(boxes)))
    if found.answer is not None and is_placeholder(found.answer):
        return Extraction(None, "none", reason="the final answer shows nothing a reader can see")
    return found


def _restates(text: str, boxed: Extraction) -> bool:
    """The final statement after the last box states that box's answer again ("\\boxed{5}. The answer is 5."): the
    final answer is still the boxed one."""
    stated = anchored_statement(text)
    return bool(stated and boxed.answer and _key(stated[0]) == _key(boxed.answer))


def _key(answer: str) -> str:
    return re.sub(r"\s+|\$|\.$", "", answer)


def _find_in(text: str, strict: bool, hedges: bool, box: re.Pattern[str]) -> Extraction:
    """The final answer of ``text`` (this turn, outside reasoning, inside the answer block)."""
    spans, unclosed = box_spans_with_unclosed(text, box)
    if unclosed >= 0 and not _anchored_after(text, unclosed, box):
        return Extraction(None, "none", reason="the last box is never closed", unclosed=True)
    boxed = _final_box(text, spans)
    if boxed is not None and _anchored_after(text, boxed[1], box) and not _restates(text, boxed[0]):
        boxed = None  # "... = \boxed{255} ... Final Answer: The final answer is $10,455$": the statement is final
    if boxed is not None:
        if hedges and _hedged_after(text, boxed[1]):
            return Extraction(None, "none", reason="the boxed answer is followed by an alternative")
        return boxed[0]
    if spans and not _anchored_after(text, 0, box):
        return Extraction(None, "none", reason="the box shows nothing (empty, or only a placeholder)")
    anchored = anchored_statement(text)
    if anchored:
        if hedges and _hedged_after(text, anchored[1]):
            return Extraction(None, "none", reason="the stated answer is followed by an alternative")
        return Extraction(anchored[0], "anchor")
    found = conclusion(text)
    if found:
        return Extraction(found, "sentence")
    bold = bold_final_line(text)
    if bold:
        return Extraction(bold, "bold")
    labelled = labelled_math(text)
    if labelled:
        return Extraction(labelled, "bare")
    if is_bare(text):
        return Extraction(delimited(text.strip()).strip().rstrip(".").strip("$").strip(), "bare")
    if not strict:
        fb = fallback(text)
        if fb:
            return Extraction(fb.strip(), "fallback")
    return Extraction(None, "none", reason="no boxed answer or anchored final statement")
