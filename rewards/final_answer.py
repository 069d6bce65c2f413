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
boxes are skipped in one pass, and only the tail of a completion is searched. This module does not normalize or
parse the answer (:mod:`rewards.math` does) and does not judge the completion's format (:mod:`rewards.format`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewards.final_sentences import corrected_value, labelled_math, one_value, prose_value
from rewards.visible import is_placeholder, strip_hidden

__all__ = ["Extraction", "extract_answer", "reasoning_open", "box_spans", "MAX_COMPLETION_CHARS", "BOX_COMMANDS"]

#: Only the tail of a longer completion is searched (the final answer is at the end).
MAX_COMPLETION_CHARS = 200_000
_MAX_BOXES = 64  # only the last boxes are compared for hedging
_MAX_LINE = 1000

#: The box commands every reward reads by default; ``\boxed 5`` (TeX's one-token argument) is a box too.
BOX_COMMANDS: tuple[str, ...] = ("boxed", "fbox")


@functools.lru_cache(maxsize=32)
def _box_rx(commands: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\\(?:" + "|".join(map(re.escape, commands)) + r")(?![A-Za-z])[ \t]{0,3}")


_BOX = _box_rx(BOX_COMMANDS)
_BRACE = re.compile(r"(?<!\\)[{}]")
_ANCHOR = re.compile(  # the lookahead lets the scan skip positions that cannot start an anchor
    r"(?=[afoc#])(?:final[ \t]{1,3}answer[ \t]{0,3}(?:is|:|=)?|"
    r"(?:answer|option|choice)[ \t]{1,3}(?:is|(?:would|will|must|should)[ \t]{1,3}be)[ \t]{0,3}:?|"
    r"\banswer[ \t]{0,3}(?:\*\*|\*|\})?[ \t]{0,3}[:：]|####|\#{1,4}[ \t]{0,3}answer[ \t]*(?=\n))",
    re.IGNORECASE,
)
_ANSWER_MATH = re.compile(  # "Answer $9$", "Answer \[ 9 \]": the word alone opening a line, then math
    r"(?:^|\n)[ \t]{0,3}(?:\*\*)?(?:final[ \t]{1,3})?answer(?:\*\*)?[ \t]{0,3}\n?[ \t]{0,3}(?=\$|\\[\[(])",
    re.IGNORECASE,
)
_NEGATED = re.compile(  # "Not the answer: 5", "Possible answer: 5": a negation or a hedge before the anchor
    r"\b(?:not|no|never|wrong|incorrect|possible|possibly|maybe|perhaps|candidate|tentative|preliminary|partial|"
    r"previous|earlier|old|initial|guess(?:ed)?)\b|n't\b",
    re.IGNORECASE,
)
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
_CHOICE = re.compile(
    r"\b(?:(?:option|choice|answer)[ \t]{0,3})?\$?\(?\b([A-J])\)?\$?[ \t]{1,3}is[ \t]{1,3}(?:the[ \t]{1,3})?"
    r"(?:correct|right|best)\b",
    re.IGNORECASE,
)
_IS_THE_ANSWER = re.compile(
    r"[ \t]{1,3}is[ \t]{1,3}(?:the|our|my)[ \t]{1,3}(?:(?:final|correct|required)[ \t]{1,3})?answer\b",
    re.IGNORECASE,
)
_LEAD_CLAUSES = re.compile(r"^(?:[A-Za-z']+(?:\s+[A-Za-z']+)*\s*,\s*)+")  # words need spaces: no backtracking blowup
_LEAD_WORDS = re.compile(r"^\s*(?:(?:so|thus|therefore|hence|and|then|finally)\b[\s,]*)+", re.IGNORECASE)
_TAIL_NOISE = re.compile(r"[ \t]{0,3}(?:I[ \t]+hope[ \t]+it[ \t]+is[ \t]+correct\.?|\(?final\)?\.?)[ \t]*$", re.I)
_SENTENCE_END = re.compile(
    r"\.(?=\s|$)|[!?](?=\s|$)|,?[ \t]{1,3}(?:because|since|as|which|so|when|where|given|if)\b|"
    r"[ \t]{1,3}\((?=(?:since|because|as|which|where|when|given|from|by|using|note|noting|rounded|"
    r"approximately|exactly|simplified|in[ \t]+simplest)\b)"  # "2 (since the other root is negative)": a remark
)
_CONCLUSION = re.compile(
    r"^(?:therefore|thus|so|hence|consequently|in\s+conclusion|in\s+summary|in\s+total|finally|overall|altogether)"
    r"\b[ \t,]{0,3}(.{0,240})[ \t](?:is|are|was|equals|will[ \t]be)[ \t]{1,3}(.{1,160})$",
    re.IGNORECASE,
)
_STATED = re.compile(
    r"^the\b(.{0,240})[ \t](?:is|are|equals)[ \t]{1,3}(\$[^$]{1,160}\$)((?:[ \t]{1,3}[A-Za-z][A-Za-z.]{0,20}){0,3})$",
    re.IGNORECASE,
)
_CONCLUDED_MATH = re.compile(  # "Thus $m = 2$.": a concluding word, then only inline math
    r"^(?:therefore|thus|so|hence|consequently|finally)\b[ \t,]{0,3}(?:we[ \t]+(?:get|have|obtain)[ \t]+)?"
    r"(\$[^$]{1,160}\$|\\\((?:[^\\]|\\[^)]){1,160}\\\))$",
    re.IGNORECASE,
)
_IS_SOLUTION = re.compile(  # "$x = 2$ is the only solution": the value is before "is"
    r"^(?:the|an?)[ \t]+(?:(?:only|unique|final|required|desired|correct)[ \t]+)?"
    r"(?:solution|answer|value|root|result)$",
    re.IGNORECASE,
)
_HEDGE_AFTER = re.compile(  # "or equivalently", "or in other words" restate the answer, they do not hedge it
    r"^[\s.,;:!*()\[\]}$]{0,12}(?:or(?![ \t]+(?:equivalently|in[ \t]+other[ \t]+words|simply|written[ \t]+as)\b)|"
    r"maybe|perhaps|possibly)\b",
    re.IGNORECASE,
)
_REMARK_HEDGE = re.compile(r"\b(?:or|maybe|perhaps|possibly|might|could|not|unless|otherwise)\b", re.IGNORECASE)
_NAMED_VALUE = re.compile(r"^the\b[^\n]{0,200}[ \t](?:is|are|equals)[ \t]+([^ \t][^\n]{0,300})$", re.IGNORECASE)
_ALTERNATIVE = re.compile(  # "Hmm, or is it 8?", "it might be 8", "possibly $8$": a hedge word right before a value
    r"\b(?:or[ \t]+(?:maybe|perhaps|possibly|is[ \t]+it)|maybe|perhaps|possibly|"
    r"(?:could|might)(?:[ \t]+also)?[ \t]+be|not[ \t]+sure)[ \t,:]{0,3}"
    r"(?:it'?s[ \t]+|it[ \t]+is[ \t]+|the[ \t]+answer[ \t]+is[ \t]+)?(?:\$|\\boxed|\\\(|\*\*)?[ \t]*-?\d",
    re.IGNORECASE,
)
_TURN = re.compile(r"<\|[A-Za-z0-9_\-]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|</s>|<(?:start|end)_of_turn>")
_THOUGHT = {
    "<|begin_of_thought|>": "<think>",
    "<|end_of_thought|>": "</think>",
    "<|begin_of_solution|>": "",
    "<|end_of_solution|>": "",
}
_MATH_WORDS = {
    "sqrt",
    "frac",
    "dfrac",
    "pi",
    "infty",
    "text",
    "boxed",
    "cdot",
    "times",
    "left",
    "right",
    "none",
    "undefined",
    "exp",
    "log",
    "sin",
    "cos",
    "tan",
    "and",
    "begin",
    "end",
    "pmatrix",
    "mathrm",
}


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


def _box_spans(text: str, box: re.Pattern[str] = _BOX) -> tuple[list[tuple[int, int, int]], int]:
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


def _this_turn(text: str) -> str:
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


def _answer_tag(text: str, tag: str = "answer") -> str | None:
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


def _strip_think(text: str, tag: str = "think") -> str | None:
    """The text after the last closed reasoning block; None while reasoning is open (never closed, or reopened)."""
    low, open_t, close_t = text.lower(), f"<{tag}>".lower(), f"</{tag}>".lower()
    end = low.rfind(close_t)
    if low.rfind(open_t) > end:
        return None  # reasoning opened (or reopened) and never closed
    return text[end + len(close_t) :] if end >= 0 else text


def box_spans(text: str, commands: Sequence[str] = BOX_COMMANDS) -> list[tuple[int, int]]:
    r"""(start, end) of the content of every outermost closed box in ``text``, in order (one pass: linear).

    >>> t = "\\boxed{1} and \\fbox 2"
    >>> [t[a:b] for a, b in box_spans(t)]
    ['1', '2']
    """
    return [(a, b) for _, a, b in _box_spans(text, _box_rx(tuple(commands)))[0]]


def reasoning_open(completion: str, tag: str = "think") -> bool:
    """True when this turn of ``completion`` ends inside reasoning: a ``<tag>`` never closed, or reopened after the
    last ``</tag>``; then nothing in it is a final answer yet.

    >>> reasoning_open("<think>a</think> 5"), reasoning_open("\\boxed{5}<think>\\boxed{3}")
    (False, True)
    """
    return _strip_think(_this_turn(completion[-MAX_COMPLETION_CHARS:]), tag) is None


def _delimited(s: str) -> str:
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if s.startswith(open_):
            end = s.find(close, len(open_))
            while end > 0 and open_ == "$" and s[end - 1] == "\\":
                end = s.find(close, end + 1)  # an escaped \$ is currency, not a delimiter
            if end > 0:
                return s[len(open_) : end]
    return s


def _statement(rest: str) -> tuple[str, int]:
    """The answer stated at the start of ``rest`` and how many characters of ``rest`` it spans."""
    n = len(rest)
    rest = rest.lstrip(" \t:*=}")
    rest = re.sub(r"^(?:is\b|:)[ \t]*", "", rest).lstrip(" \t*:")
    rest = rest.strip().lstrip("*").strip()  # the statement may start on the next line
    skipped = n - len(rest)
    if rest.startswith(("$$", "\\[")):
        inner = _delimited(rest[:4000])
        return inner.strip(), skipped + len(inner) + 4  # display math may span lines
    line = rest[:_MAX_LINE].split("\n", 1)[0]
    line = _TAIL_NOISE.sub("", line)
    m = _SENTENCE_END.search(line)
    if m and m.group(0).endswith("("):
        close = line.find(")", m.end())
        if _REMARK_HEDGE.search(line, m.end(), close if close >= 0 else len(line)):
            m = None  # a remark with a hedge in it, "7 (rounded, or 8)", stays part of the answer
    if m:
        line = line[: m.start()]
    span = skipped + len(line)
    line = re.sub(r"(?<![\w)}])\*\*|\*\*(?![\w({-])", "", line)  # bold markup, not a ** power
    line = re.sub(r"(?<!\\)\$|\\\(|\\\)", "", line)  # inline math delimiters; every part of the sentence counts
    named = _NAMED_VALUE.match(line.strip())
    if named:
        line = named.group(1)  # "Final Answer: The volume of $ABCD$ is 120."
    quoted = re.fullmatch(r'\\?["\u201c]([^"\u201c\u201d]{1,400}?)\\?["\u201d]', line.strip())
    return (quoted.group(1) if quoted else line).strip(), span  # quotation marks are not part of the answer


def _answer_before(text: str, at: int) -> str:
    """The phrase before "is the answer" at ``at``: back to the sentence start, lead clauses dropped."""
    head = text[max(0, at - 80) : at]
    head = re.split(r"[\n.:;!?](?=\s|$)|\n", head)[-1]
    stmt = _LEAD_CLAUSES.sub("", head.strip())  # "Hmm, so 5" -> "so 5"
    stmt = _LEAD_WORDS.sub("", stmt).replace("**", "")
    return re.sub(r"(?<!\\)\$", "", stmt).strip()


def _math_line(text: str, at: int) -> tuple[str, int] | None:
    """The math block that starts at ``at`` and where it ends, when it is all its line says (a period may close
    it); None when anything else follows on that line ("Answer $9$ is wrong", "Answer $9$ or $10$", "$9$?")."""
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if text.startswith(open_, at):
            end = text.find(close, at + len(open_), at + 4000)
            while end > 0 and open_ == "$" and text[end - 1] == "\\":
                end = text.find(close, end + 1, at + 4000)  # an escaped \$ is currency, not a delimiter
            inner = text[at + len(open_) : end] if end > 0 else ""
            if open_ in ("$", "\\(") and "\n" in inner:
                return None  # inline math stays on its line; display math ($$, \[) may span lines
            after = end + len(close)
            if inner.strip() and re.match(r"[ \t]{0,3}\.?[ \t]*(?:\n|$)", text[after : after + 40]):
                return inner.strip(), after
            return None
    return None


def _negated(text: str, at: int) -> bool:
    """A negation earlier in the sentence of the anchor at ``at``: "Not the answer: 5", "This isn't the final answer:
    7" anchor nothing."""
    head = re.split(r"[\n.!?](?=\s|$)", text[max(0, at - 80) : at])[-1]
    return bool(_NEGATED.search(head))


def _last_match(rx: re.Pattern[str], text: str, tail: int = 4000) -> re.Match[str] | None:
    """The last match of ``rx``: searched in the tail first (any match there starts after every match before it),
    the whole text only when the tail has none."""
    last = None
    for last in rx.finditer(text, max(0, len(text) - tail)):  # noqa: B007 (keeps the last match, read below)
        pass
    if last is None and len(text) > tail:
        for last in rx.finditer(text):  # noqa: B007 (keeps the last match, read below)
            pass
    return last


def _anchored(text: str) -> tuple[str, int] | None:
    """The latest anchored statement and where it ends: "The answer is X", "X is the answer", "(C) is correct"."""
    found: list[tuple[int, str, int]] = []
    anchor = _last_match(_ANCHOR, text)
    if anchor is not None and not _negated(text, anchor.start()):
        stmt, span = _statement(text[anchor.end() :])
        found.append((anchor.start(), prose_value(stmt) or stmt, anchor.end() + span))
    bare_anchor = _last_match(_ANSWER_MATH, text)
    if bare_anchor is not None:
        stated = _math_line(text, bare_anchor.end())
        if stated is not None:
            found.append((bare_anchor.start(), *stated))
    choice = _last_match(_CHOICE, text)
    if choice is not None and choice.group(1).isupper():
        found.append((choice.start(), choice.group(1), choice.end()))
    base = max(0, len(text) - 3000)
    trailing = None
    for trailing in _IS_THE_ANSWER.finditer(text, base):  # noqa: B007 (keeps the last match, read below)
        pass
    if trailing is not None:
        found.append((trailing.start(), _answer_before(text, trailing.start()), trailing.end()))
    found = [f for f in found if f[1]]
    if not found:
        return None
    _, stmt, end = max(found)
    return stmt, end


def _last_sentence(text: str) -> str:
    line = text.strip()[-_MAX_LINE:].rsplit("\n", 1)[-1].strip()
    line = _TAIL_NOISE.sub("", line).strip()
    parts = re.split(
        r"(?<=[.!?])[ \t]+(?=[A-Z])|(?<=[\w$)\]])[ \t]+(?=(?:Therefore|Thus|Hence|So|Finally),?[ \t])", line
    )
    return parts[-1].rstrip(" .!").strip()


def _conclusion(text: str) -> str | None:
    """The value a final concluding sentence states: "Therefore, the area of the triangle is $\\frac72$.", or
    "The sum is $42$." (without a concluding word, only a value that is wholly inline math counts)."""
    sentence = _last_sentence(text)
    if sentence.endswith("?"):
        return None  # "So is it 7?": a question states nothing
    one = one_value(sentence) or corrected_value(sentence)
    if one:
        return one  # "So she makes $18 per day.", "Thus, there are 10 ways to do it."
    m = _CONCLUSION.match(sentence)
    stated = m.group(2).strip() if m else ""
    if m and _IS_SOLUTION.match(stated.rstrip(".")):
        stated = m.group(1).strip()  # "Therefore, $x = 2$ is the only solution."
        if not re.fullmatch(r"\$[^$]{1,160}\$", stated):
            return None
    elif not m:
        m = _STATED.match(sentence) or _CONCLUDED_MATH.match(sentence)
        if not m:
            return None
        if m.re is _STATED and m.group(3).strip() and not _is_unit_text(m.group(3)):
            return None  # "The sum is $42$ less than ...": only unit words may follow the value
        stated = m.group(2) if m.re is _STATED else m.group(1)
    if len(re.findall(r"(?<!\\)\$[^$]{1,160}(?<!\\)\$", stated)) > 1:
        return None  # "the total is $7$ apples and $8$ pears": two values
    value = _delimited(stated.strip()).strip()
    value = re.sub(r"(?<!\\)\$|\\\(|\\\)", "", value).replace("**", "").strip().rstrip(".").strip()
    return value or None


def _is_unit_text(words: str) -> bool:
    # Imported here: rewards.math imports this module (through its reward), so a module-level import of a
    # rewards.math submodule would be circular when a format reward is loaded first.
    from rewards.math.units import is_unit_text

    return is_unit_text(words)


def _bold_final_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.strip()[-_MAX_LINE * 4 :].split("\n") if ln.strip()]
    if not lines:
        return None
    bolds = re.findall(r"\*\*(.{1,200}?)\*\*", lines[-1][:_MAX_LINE])
    if not bolds:
        return None
    if len({re.sub(r"\s+|\$", "", b) for b in bolds}) > 1 and re.search(r"\*\*\s*(?:or|,|/)\s*\*\*", lines[-1]):
        return None  # "**7** or **8**": a hedge
    inner = re.sub(r"^[^:]{0,30}:\s*", "", bolds[0]).strip()
    return _delimited(inner).strip().rstrip(".") or None


def _is_bare(text: str) -> bool:
    t = text.strip()
    if not t or "\n" in t or len(t) > 120 or t.endswith("?"):  # "$5$?" asks, it does not answer
        return False
    if len(t.split()) <= 3:
        return True  # "42", "x = 3", "no solution", "(C) 12"
    return not [w for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{3,}", t) if w.lower() not in _MATH_WORDS]


def _fallback(text: str) -> str | None:
    tail = text.strip()[-2000:]
    line = tail.rsplit("\n", 1)[-1]
    eq = line.rfind("=")
    if eq >= 0:
        value = line[eq + 1 :].strip()
        value = value[:-1].strip() if value.endswith((".", ",", ";")) else value
        if value and "," not in value and ";" not in value:
            return value
    nums = re.findall(r"-?\d[\d,]*(?:\.\d+)?", tail)
    return nums[-1] if nums else None


def _anchored_after(text: str, end: int, box: re.Pattern[str] = _BOX) -> bool:
    """An explicit final-answer statement ("Final Answer:", "The answer is", ``####``) after ``end``, with no box
    in it: it, not an earlier box (an intermediate result), is the final answer."""
    anchor = None
    for found in _ANCHOR.finditer(text, end):  # only the text after the box: usually a few characters
        anchor = found
    if anchor is None or re.search(r"would|will|must|should", anchor.group(0), re.I):
        return False  # "if the die were biased the answer would be different" is no statement of the answer
    stmt, _ = _statement(text[anchor.end() :])
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
    text = _strip_think(_this_turn(strip_hidden(completion[-MAX_COMPLETION_CHARS:])), think)
    if text is None:
        return Extraction(None, "none", reason=f"reasoning never closed (unterminated <{think}>)")
    if f"<{answer_tag}>".lower() in text.lower():
        text = _answer_tag(text, answer_tag)
        if text is None:
            reason = f"several different <{answer_tag}> blocks, or a value after the last"
            return Extraction(None, "none", reason=reason)
    found = _find_in(text, strict, hedges, _box_rx(tuple(boxes)))
    if found.answer is not None and is_placeholder(found.answer):
        return Extraction(None, "none", reason="the final answer shows nothing a reader can see")
    return found


def _restates(text: str, boxed: Extraction) -> bool:
    """The final statement after the last box states that box's answer again ("\\boxed{5}. The answer is 5."): the
    final answer is still the boxed one."""
    stated = _anchored(text)
    return bool(stated and boxed.answer and _key(stated[0]) == _key(boxed.answer))


def _key(answer: str) -> str:
    return re.sub(r"\s+|\$|\.$", "", answer)


def _find_in(text: str, strict: bool, hedges: bool, box: re.Pattern[str]) -> Extraction:
    """The final answer of ``text`` (this turn, outside reasoning, inside the answer block)."""
    spans, unclosed = _box_spans(text, box)
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
    anchored = _anchored(text)
    if anchored:
        if hedges and _hedged_after(text, anchored[1]):
            return Extraction(None, "none", reason="the stated answer is followed by an alternative")
        return Extraction(anchored[0], "anchor")
    found = _conclusion(text)
    if found:
        return Extraction(found, "sentence")
    bold = _bold_final_line(text)
    if bold:
        return Extraction(bold, "bold")
    labelled = labelled_math(text)
    if labelled:
        return Extraction(labelled, "bare")
    if _is_bare(text):
        return Extraction(_delimited(text.strip()).strip().rstrip(".").strip("$").strip(), "bare")
    if not strict:
        fb = _fallback(text)
        if fb:
            return Extraction(fb.strip(), "fallback")
    return Extraction(None, "none", reason="no boxed answer or anchored final statement")
