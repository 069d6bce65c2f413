r"""Final-answer extraction from a completion.

The final answer is, in order: the last ``\boxed{}`` / ``\fbox{}`` outside ``<think>`` reasoning; else the last
explicitly anchored statement ("The answer is", "Final Answer:", "Answer:", "The correct option is", GSM8K
``####``, "X is the answer", "Option (C) is correct"; the sentence is cut at "because", "since", ", which" and
every inline-math part of it counts, so "$x=2$ or $x=3$" is seen as two answers); else a bold final line; else
the whole completion when it is a single short line that is only an answer.

Reasoning inside ``<think>...</think>`` never counts; an unclosed ``<think>`` means no answer yet. Several
*different* boxed answers are reported as hedged (the caller compares them as a list: wrong for a single-valued
gold, right for the matching multi-valued one) unless the text before the last box revises the earlier one
("wait", "I made an error", "the answer is"): then the last box wins.

With ``strict=False`` a completion without any of those falls back to its last ``= value`` or last number, which
is what lenient graders do; the default is strict, so prose that merely mentions the gold scores nothing.

This module does not normalize or parse the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Extraction", "extract_answer", "MAX_COMPLETION_CHARS"]

#: Only the tail of a longer completion is searched (the final answer is at the end).
MAX_COMPLETION_CHARS = 200_000

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_BRACE = re.compile(r"(?<!\\)[{}]")
_ANCHOR = re.compile(
    r"final\s+answer\s*(?:is|:|=)?|"
    r"(?:the\s+)?(?:correct\s+|right\s+)?(?:answer|option|choice)\s+(?:is|(?:would|will|must|should)\s+be)\s*:?|"
    r"\banswer\s*(?:\*\*|\*|\})?\s*[:：]|####",
    re.IGNORECASE,
)
_REVISION = re.compile(
    r"\b(?:wait|actually|mistake|error|wrong|incorrect|correction|correcting|re-?check\w*|re-?evaluat\w*|instead|"
    r"revis\w*|final\s+answer|answer\s+is|fix\w*)\b",
    re.IGNORECASE,
)
_CHOICE = re.compile(
    r"\b(?:option|choice|answer)?\s*\(?\b([A-J])\)?\s+is\s+(?:the\s+)?(?:correct|right|best)\b", re.IGNORECASE
)
_IS_THE_ANSWER = re.compile(
    r"([^\n.:;!?]{1,80}?)\s+is\s+(?:the|our|my)\s+(?:final\s+|correct\s+|required\s+)?answer\b", re.IGNORECASE
)
_LEAD_CLAUSES = re.compile(r"^(?:[A-Za-z']+(?:\s+[A-Za-z']+)*\s*,\s*)+")  # words need spaces: no backtracking blowup
_LEAD_WORDS = re.compile(r"^\s*(?:(?:so|thus|therefore|hence|and|then|finally)\b[\s,]*)+", re.IGNORECASE)
_TAIL_NOISE = re.compile(r"\s*(?:I\s+hope\s+it\s+is\s+correct\.?|\(?final\)?\.?)\s*$", re.IGNORECASE)
_MATH_WORDS = {"sqrt", "frac", "dfrac", "pi", "infty", "text", "boxed", "cdot", "times", "left", "right", "none",
               "undefined", "exp", "log", "sin", "cos", "tan", "and", "begin", "end", "pmatrix", "mathrm"}


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract_answer` found.

    Attributes:
        answer: the final answer text, or None when the completion commits to none.
        source: ``boxed``, ``anchor``, ``bold``, ``bare``, ``fallback`` or ``none``.
        hedged: True when several different boxed answers were given (``answer`` then lists them all).
        reason: why no answer was found, when ``answer`` is None.
    """

    answer: str | None
    source: str
    hedged: bool = False
    reason: str = ""


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


def _boxed_contents(text: str) -> list[tuple[int, str]]:
    """(position, content) of every ``\\boxed``/``\\fbox``, in order (unclosed ones are skipped)."""
    out: list[tuple[int, str]] = []
    pairs: dict[int, int] | None = None
    for m in _BOX.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            if pairs is None:
                pairs = _brace_pairs(text)
            j = pairs.get(i)
            if j is not None:
                out.append((m.start(), text[i + 1 : j].strip()))
        else:
            tok = re.match(r"[^\s$]{1,200}", text[i : i + 200])
            if tok:
                out.append((m.start(), tok.group(0)))
    return out


def _final_box(text: str) -> Extraction | None:
    """The last non-empty box; several different boxes are a hedge unless the last one is an explicit revision."""
    found = [(at, b) for at, b in _boxed_contents(text) if b]
    if not found:
        return None
    key = lambda b: re.sub(r"\s+|\$", "", b)  # noqa: E731
    last_at, last = found[-1]
    earlier = [(at, b) for at, b in found if key(b) != key(last)]
    if not earlier:
        return Extraction(last, "boxed")
    if _REVISION.search(text, earlier[-1][0], last_at):
        return Extraction(last, "boxed")  # "\boxed{5} ... wait, I made an error ... \boxed{7}"
    distinct: dict[str, str] = {}
    for _, b in found:
        distinct.setdefault(key(b), b)
    return Extraction(", ".join(distinct.values()), "boxed", hedged=True)


def _strip_think(text: str) -> str | None:
    low = text.lower()
    end = low.rfind("</think>")
    if end >= 0:
        return text[end + len("</think>") :]
    if "<think>" in low:
        return None
    return text


def _delimited(s: str) -> str:
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if s.startswith(open_):
            end = s.find(close, len(open_))
            while end > 0 and open_ == "$" and s[end - 1] == "\\":
                end = s.find(close, end + 1)  # an escaped \$ is currency, not a delimiter
            if end > 0:
                return s[len(open_) : end]
    return s


def _statement(rest: str) -> str:
    rest = rest.lstrip(" \t:*=}")
    rest = re.sub(r"^(?:is\b|:)\s*", "", rest).lstrip(" \t*:")
    rest = rest.strip().lstrip("*").strip()  # the statement may start on the next line
    if rest.startswith(("$$", "\\[")):
        return _delimited(rest[:4000]).strip()  # display math may span lines
    line = rest.split("\n", 1)[0]
    line = _TAIL_NOISE.sub("", line)
    m = re.search(r"\.(?=\s|$)|[!?](?=\s|$)|,?\s+(?:because|since|as|which|so|when|where|given|if)\b", line)
    if m:
        line = line[: m.start()]
    line = re.sub(r"(?<![\w)}])\*\*|\*\*(?![\w({-])", "", line)  # bold markup, not a ** power
    line = re.sub(r"(?<!\\)\$|\\\(|\\\)", "", line)  # inline math delimiters; every part of the sentence counts
    return line.strip()


def _anchored(text: str) -> str | None:
    """The latest anchored statement: "The answer is X", "X is the answer", "Option (C) is correct"."""
    found: list[tuple[int, str]] = []
    anchors = list(_ANCHOR.finditer(text))
    if anchors:
        found.append((anchors[-1].start(), _statement(text[anchors[-1].end() :])))
    choices = [m for m in _CHOICE.finditer(text) if m.group(1).isupper()]
    if choices:
        found.append((choices[-1].start(), choices[-1].group(1)))
    trailing = list(_IS_THE_ANSWER.finditer(text[-3000:]))
    if trailing:
        m = trailing[-1]
        stmt = _LEAD_CLAUSES.sub("", m.group(1).strip())  # "Hmm, so 5" -> "so 5"
        stmt = _LEAD_WORDS.sub("", stmt).replace("**", "")
        found.append((len(text) - len(text[-3000:]) + m.start(), re.sub(r"(?<!\\)\$", "", stmt).strip()))
    found = [f for f in found if f[1]]
    return max(found)[1] if found else None


def _bold_final_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.strip().split("\n") if ln.strip()]
    if not lines:
        return None
    m = re.search(r"\*\*(.{1,200}?)\*\*", lines[-1])
    if not m:
        return None
    inner = re.sub(r"^[^:]{0,30}:\s*", "", m.group(1)).strip()
    return _delimited(inner).strip().rstrip(".") or None


def _is_bare(text: str) -> bool:
    t = text.strip()
    if not t or "\n" in t or len(t) > 120:
        return False
    if len(t.split()) <= 3:
        return True  # "42", "x = 3", "no solution", "(C) 12"
    return not [w for w in re.findall(r"[A-Za-z]{3,}", t) if w.lower() not in _MATH_WORDS]


def _fallback(text: str) -> str | None:
    tail = text.strip()[-2000:].split("\n")[-1]
    eq = re.findall(r"=\s*([^=\n,;]+?)\s*(?:[.,;]?\s*$)", tail)
    if eq:
        return eq[-1]
    nums = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text[-2000:])
    return nums[-1] if nums else None


def extract_answer(completion: str, *, strict: bool = True) -> Extraction:
    r"""Find the final answer a completion commits to.

    Args:
        completion: the model's text.
        strict: when False, fall back to the last ``= value`` or number if nothing is anchored.

    >>> extract_answer("so $x=2$, hence \\boxed{\\frac{1}{2}}").answer
    '\\frac{1}{2}'
    >>> extract_answer("The area is 12 or maybe 13.").source
    'none'
    """
    text = completion[-MAX_COMPLETION_CHARS:]
    text = _strip_think(text)
    if text is None:
        return Extraction(None, "none", reason="reasoning never closed (unterminated <think>)")
    boxed = _final_box(text)
    if boxed is not None:
        return boxed
    if _BOX.search(text):
        return Extraction(None, "none", reason="empty \\boxed{}")
    anchored = _anchored(text)
    if anchored:
        return Extraction(anchored, "anchor")
    bold = _bold_final_line(text)
    if bold:
        return Extraction(bold, "bold")
    if _is_bare(text):
        return Extraction(_delimited(text.strip()).strip().rstrip(".").strip("$").strip(), "bare")
    if not strict:
        fb = _fallback(text)
        if fb:
            return Extraction(fb.strip(), "fallback")
    return Extraction(None, "none", reason="no boxed answer or anchored final statement")
