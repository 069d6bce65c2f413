r"""The final answer of a text that no box gives, in the order :mod:`rewards.final_answer` tries them.

* **Anchored statements**: the last "The answer is", "Final Answer:", "Answer:", "The correct option is", GSM8K
  ``####``, "X is the answer", "Option (C) is correct", or "Answer" alone opening a line when one math block is
  all the rest of that line says. The statement is cut at "because", "since", ", which" and the like, and every
  inline-math part of it counts; an anchor with a negation or a hedge before it in its sentence ("Not the answer:
  5", "Possible answer: 5") anchors nothing.
* **A concluding final sentence**: "Therefore, the area of the triangle is 7/2.", "The sum is $42$." (only unit
  words may follow the value), a sentence that states one value or corrects a denied one
  (:mod:`rewards.final_sentences`); a question states nothing.
* **A bold final line** (``**7** or **8**`` is a hedge), **a bare answer** (one short line that is only an
  answer), and for lenient grading the **fallback**: the last ``= value`` or last number.

Every scan is linear: no regex here has two adjacent unbounded quantifiers, and only the tail of a text is
searched. This module reads statements only; it does not look for boxes (:mod:`rewards._boxes`), decide where the
answer may be (:mod:`rewards._answer_scope`) or whether an answer is hedged (:mod:`rewards.final_answer`).
"""

from __future__ import annotations

import re

from rewards.final_sentences import corrected_value, one_value, prose_value

__all__ = [
    "ANCHOR",
    "anchored_statement",
    "bold_final_line",
    "conclusion",
    "delimited",
    "fallback",
    "is_bare",
    "statement",
]

_MAX_LINE = 1000

ANCHOR = re.compile(  # the lookahead lets the scan skip positions that cannot start an anchor
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
_REMARK_HEDGE = re.compile(r"\b(?:or|maybe|perhaps|possibly|might|could|not|unless|otherwise)\b", re.IGNORECASE)
_NAMED_VALUE = re.compile(r"^the\b[^\n]{0,200}[ \t](?:is|are|equals)[ \t]+([^ \t][^\n]{0,300})$", re.IGNORECASE)
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


def delimited(s: str) -> str:
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if s.startswith(open_):
            end = s.find(close, len(open_))
            while end > 0 and open_ == "$" and s[end - 1] == "\\":
                end = s.find(close, end + 1)  # an escaped \$ is currency, not a delimiter
            if end > 0:
                return s[len(open_) : end]
    return s


def statement(rest: str) -> tuple[str, int]:
    """The answer stated at the start of ``rest`` and how many characters of ``rest`` it spans."""
    n = len(rest)
    rest = rest.lstrip(" \t:*=}")
    rest = re.sub(r"^(?:is\b|:)[ \t]*", "", rest).lstrip(" \t*:")
    rest = rest.strip().lstrip("*").strip()  # the statement may start on the next line
    skipped = n - len(rest)
    if rest.startswith(("$$", "\\[")):
        inner = delimited(rest[:4000])
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


def anchored_statement(text: str) -> tuple[str, int] | None:
    """The latest anchored statement and where it ends: "The answer is X", "X is the answer", "(C) is correct"."""
    found: list[tuple[int, str, int]] = []
    anchor = _last_match(ANCHOR, text)
    if anchor is not None and not _negated(text, anchor.start()):
        stmt, span = statement(text[anchor.end() :])
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


def conclusion(text: str) -> str | None:
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
    value = delimited(stated.strip()).strip()
    value = re.sub(r"(?<!\\)\$|\\\(|\\\)", "", value).replace("**", "").strip().rstrip(".").strip()
    return value or None


def _is_unit_text(words: str) -> bool:
    # Imported here: rewards.math imports this module (through its reward), so a module-level import of a
    # rewards.math submodule would be circular when a format reward is loaded first.
    from rewards.math.units import is_unit_text

    return is_unit_text(words)


def bold_final_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.strip()[-_MAX_LINE * 4 :].split("\n") if ln.strip()]
    if not lines:
        return None
    bolds = re.findall(r"\*\*(.{1,200}?)\*\*", lines[-1][:_MAX_LINE])
    if not bolds:
        return None
    if len({re.sub(r"\s+|\$", "", b) for b in bolds}) > 1 and re.search(r"\*\*\s*(?:or|,|/)\s*\*\*", lines[-1]):
        return None  # "**7** or **8**": a hedge
    inner = re.sub(r"^[^:]{0,30}:\s*", "", bolds[0]).strip()
    return delimited(inner).strip().rstrip(".") or None


def is_bare(text: str) -> bool:
    t = text.strip()
    if not t or "\n" in t or len(t) > 120 or t.endswith("?"):  # "$5$?" asks, it does not answer
        return False
    if len(t.split()) <= 3:
        return True  # "42", "x = 3", "no solution", "(C) 12"
    return not [w for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{3,}", t) if w.lower() not in _MATH_WORDS]


def fallback(text: str) -> str | None:
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
