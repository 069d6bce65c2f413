r"""String normalization of an extracted answer before it is parsed.

What it does, in order: caps the length; maps unicode math (``−`` ``×`` ``≤`` ``π`` ``√``) to LaTeX; drops
math delimiters, spacing and sizing commands (``$``, ``\(``, ``\left``, ``\,``); turns ``^\circ`` into ``°`` and
``\%`` into ``%``; drops currency; reads ``\text{...}`` as a unit (after a value), a connective ("or") or plain
words; drops thousands separators (``1,000`` and ``1{,}000``); rewrites repeating decimals
(``0.\overline{36}`` and ``0.3636...`` -> ``(4/11)``) and numerals with a base subscript
(``1011_2`` -> ``\based{1011}{2}``); strips
trailing unit words (``12 cm``, ``5 square feet``) but never single letters, so ``3ab`` stays a product (a
length unit with a Unicode power glued to a number, ``12m\u00b2``, is a unit: that is how text typesets it).

Text answers (words, yes/no, "no solution"), multiple-choice letters and numbered statements are recognised by
:mod:`rewards.math._text_answers` (re-exported here). This module does not parse math (see
:mod:`rewards.math.parse`).
"""

from __future__ import annotations

import re
from fractions import Fraction

from rewards.math._text_answers import MATH_WORDS, as_text, choice_letter, text_key
from rewards.math.units import is_unit_text, is_unit_word

__all__ = ["clean", "as_text", "choice_letter", "NormalizeError", "MAX_ANSWER_CHARS", "text_key"]

MAX_ANSWER_CHARS = 2000


class NormalizeError(ValueError):
    """The answer cannot be normalized (too long, too deeply nested)."""


_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2010": "-",
    "\u2011": "-",
    "\u00d7": r"\times ",
    "\u22c5": r"\cdot ",
    "\u00b7": r"\cdot ",
    "\u00f7": r"\div ",
    "\u2264": r"\le ",
    "\u2265": r"\ge ",
    "\u2260": r"\ne ",
    "\u221e": r"\infty ",
    "\u03c0": r"\pi ",
    "\u221a": r"\sqrt",
    "\u00ba": "°",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u2032": "'",
    "\u222a": r"\cup ",
    "\u2208": r"\in ",
    "\u2205": r"\emptyset ",
    "\u2248": r"\approx ",
    "\u2223": r"\mid ",
    "\uff0c": ",",
    "\u00bd": "(1/2)",
    "\u00bc": "(1/4)",
    "\u00be": "(3/4)",
    "\u2217": "*",
    "\u00b1": r"\pm ",
    "\u2213": r"\mp ",
}
_SUPERSCRIPT = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b\u207a", "0123456789-+")
_SUBSCRIPT = str.maketrans("\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089", "0123456789")
_SUPER_RUN = re.compile("[\u207b\u207a]?[\u2070\u00b9\u00b2\u00b3\u2074-\u2079]+")
_SUB_RUN = re.compile("[\u2080-\u2089]+")
_DROP = re.compile(
    r"\\(?:displaystyle|textstyle|left|right|middle|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg|limits|"
    r"quad|qquad|mathrm\{\s*\}|!|,|;|:|>| )|~|\\\(|\\\)|\\\[|\\\]|\$"
)
_UNITS = (
    "cm|mm|km|m|kg|mg|g|ml|mL|L|ft|in|yd|mi|mph|kph|kmh|hr|hrs|h|min|mins|s|sec|secs|lb|lbs|oz|cal|kcal|"
    "sq|units?|dollars?|cents?|usd|m/s|km/h|km/hr|ft/s|m\\^?2|cm\\^?2|cm\\^?3|m\\^?3|rs|inr|eur|euros?|pounds?"
)
_UNIT_RE = re.compile(rf"^(?:{_UNITS})$", re.IGNORECASE)
#: A length unit written with a Unicode power, glued to a number, at the end (``12m\u00b2``, ``3.5cm\u00b3``): a
#: unit, as text typesets it (algebra in LaTeX writes ``m^2``; only ``5 m^2`` with a space, or the glued
#: multi-letter units below, are units there).
_TYPESET_UNIT = re.compile("(?<=\\d)(?:[kcdm]?m|ft)[\u00b2\u00b3]\\s*$")
_ATTACHED_UNIT = re.compile(r"(?<=\d)(?:cm|mm|km|kg|mg|ml|mL|ft|yd|mph|hrs?|mins?|secs?|lbs?|oz)(?:\^?\{?[23]\}?)?\b")
_UNIT_TAIL = 80
_WORD = r"[A-Za-z]+(?:\.|/[A-Za-z]+)?(?:\^\{?\d\}?)?"
# words separated by required whitespace: no nested ambiguity, so no catastrophic backtracking
_TRAILING_WORDS = re.compile(r"(?<=[\d})%°.])\s+(" + _WORD + r"(?:\s+" + _WORD + r")*)\s*$")
_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|textup|mbox|mathrm|mathit|mathsf|texttt|emph)"
    r"\s*\{([^{}]*)\}(\s*\^\s*\{?\d\}?)?"
)
_THOUSANDS = re.compile(r"(?<![\d.])([1-9]\d{0,2})((?:,\d{3})+)(?![\d])")  # 0,111 is a decimal comma
#: The command names of a doubly escaped answer (``\\\\frac``): LaTeX reads ``\\\\`` then letters as a row
#: break and text, which no answer means.
_ESCAPED_CMD = re.compile(
    r"(?<!\\)\\\\(?=(?:frac|dfrac|tfrac|left|right|sqrt|pi|cdot|times|div|le|leq|ge|geq|ne|neq|infty|in|cup|"
    r"cap|mathbb|mathrm|text|boxed|pm|mp|sin|cos|tan|log|ln|circ|alpha|beta|theta|approx|emptyset)(?![A-Za-z]))"
)
_ROW_SPACING = re.compile(r"\\\\\s*\[\s*-?\d*\.?\d+\s*(?:pt|em|ex|mm|cm|in|bp|pc|dd|cc|sp|mu)\s*\]")
_DELIMITERS = {"lbrace": "\\{", "rbrace": "\\}", "lbrack": "[", "rbrack": "]", "lvert": "|", "rvert": "|", "vert": "|"}
_DELIMITER_NAMES = re.compile(r"\\(lbrace|rbrace|lbrack|rbrack|lvert|rvert|vert)(?![A-Za-z])")
#: Set-builder notation around a condition on one variable: the condition is the set.
_SET_BUILDER = re.compile(r"^\\\{\s*[a-z]\s*(?:\\in\s*\\mathbb\s*\{?\s*R\s*\}?\s*)?(?:\\mid|\||:|\\colon)\s*(.*)\\\}$")
_REAL_DOMAIN = re.compile(r"^[a-z]\s*\\in\s*\\mathbb\s*\{?\s*R\s*\}?\s*(?:\\wedge|\\land|,|and)\s*")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.,])(\d{1,3})((?: \d{3})+)(?![\d.])")
_BRACE_COMMA_THOUSANDS = re.compile(r"(?<=\d)\s?(?:\{\s?,\s?\}|,\\!)\s?(?=\d{3}(?!\d))")  # 12{,}345, 32,\! 349
_BRACE_COMMA_DECIMAL = re.compile(r"(?<=\d)\{,\}(?=\d)")
_REPEATING = re.compile(r"(\d*)\.(\d*)\\(?:overline|bar|dot)\{?(\d+)\}?")
_ELLIPSIS = re.compile(r"(?<![\d.])(\d*)\.(\d{2,40})\s*(?:\.\.\.|\\ldots|\\dots|\\cdots|…)")
_BASE = re.compile(r"(?<![A-Za-z\\\d])([0-9][0-9A-Za-z]*|[A-F][0-9A-F]*)_\{?\(?(\d{1,2})\)?\}?")
_CONNECTIVES = {"or": " or ", "and": " and ", ",": ","}
_ALL_REALS = {"allrealnumbers", "allreals", "allrealvalues", "everyrealnumber", "realnumbers", "allrealx"}


def clean(s: str) -> str:
    """Normalize a raw answer string for the parser (see the module docstring).

    Raises:
        NormalizeError: when the answer is longer than :data:`MAX_ANSWER_CHARS`.
    """
    s = s.strip()
    if len(s) > MAX_ANSWER_CHARS:
        raise NormalizeError(f"answer longer than {MAX_ANSWER_CHARS} characters ({len(s)})")
    for k, v in _UNICODE.items():
        if k in s:
            s = s.replace(k, v)
    s = _TYPESET_UNIT.sub("", s)  # 1,000.99m\u00b2: a unit typeset with its power glued to a number
    s = _SUPER_RUN.sub(lambda m: "^{" + m.group(0).translate(_SUPERSCRIPT) + "}", s)  # x\u00b2, 10\u207b\u00b3
    s = _SUB_RUN.sub(lambda m: "_{" + m.group(0).translate(_SUBSCRIPT) + "}", s)
    s = re.sub(r"\\\$|\\textdollar|\\euro|£|€|\\pounds", "", s)
    s = re.sub(r"(?<=[\w)}])\*\*(?=[\w({-])", "^", s)
    if "\\\\" in s:
        s = _ESCAPED_CMD.sub(r"\\", s)  # \\frac, \\left( from a doubly escaped string: one backslash meant
        s = _ROW_SPACING.sub(r"\\\\", s)  # \\[2pt]: the spacing of a row break, not a bracket
    s = s.replace("\\\\", "\x00")  # keep matrix row breaks apart from spacing commands
    if "\\l" in s or "\\r" in s or "\\vert" in s:
        s = _DELIMITER_NAMES.sub(lambda m: _DELIMITERS[m.group(1)], s)  # \lbrace 1 \rbrace is \{1\}
    if "." in s:
        s = re.sub(r"\\(?:left|right)\s*\.", "", s)  # the invisible delimiter of \left. 5 \right|
    s = _BRACE_COMMA_THOUSANDS.sub("", s)  # before \! is dropped: 11,\! 111,\! 100 has spaces after the commas
    s = _DROP.sub("", s)
    s = s.replace("\x00", r"\\ ")
    if "\\" in s:
        s = _typesetting(s)
    elif "^" in s:
        s = _STYLE.sub("", s)  # 5^{}
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree", "°", s)
    s = re.sub(r"\{\s*\}\s*(?=°)|(?<=°)\s*(?:\\(?:mathrm|text)\{\s*[CF]\s*\}|[CF](?![A-Za-z]))", "", s)  # 30{}°, 25°C
    s = re.sub(r"\\%|\\percent", "%", s)
    s = re.sub(r"\\[dtc]frac", r"\\frac", s)
    s = re.sub(r"\\\{\s*\\\}", r"\\emptyset ", s)
    if s.startswith("\\{"):
        s = _SET_BUILDER.sub(r"\1", s.strip())  # {x | 2 < x < 5}, {x \in \mathbb{R} \mid x > 2}
        s = _REAL_DOMAIN.sub("", s)  # {x | x \in \mathbb{R} \wedge x > 2}: the domain is the reals anyway
    s = re.sub(r"^\s*(?:\\approx|\\sim|=)\s*", "", s)
    s = _BRACE_COMMA_DECIMAL.sub(".", s)  # 2{,}74: a decimal comma (the group after it is not 3 digits)
    s = s.replace("{,}", ",").replace(r"\cdot10", r"\cdot 10")
    s = _text_commands(s)
    if "mathbb" in s:
        s = _INTEGER_PARAMETER.sub("", s)  # 2k\pi + \frac{\pi}{6}, k \in \mathbb{Z}
    s = re.sub(r"(?<=\d)\s*[xX]\s*(?=10\s*\^)", r"\\times ", s)  # 1.5 x 10^3
    if "j" in s and set(re.findall(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", s))) <= {"j", "e"}:
        s = re.sub(r"(?<=\d)\s?j\b|\bj\b", "i", s)  # python's complex unit: 14-1j, 45 + 7 j, -7 + j
    s = re.sub(r"^(-?)(\d+)\s+(\d+)\s*/\s*(\d+)$", r"\1(\2+\3/\4)", s.strip())  # plain mixed number 2 1/2
    s = _THOUSANDS.sub(_thousands, s)
    s = _SPACE_THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(" ", ""), s)  # 1 000 000
    s = _REPEATING.sub(_repeating, s)
    s = _ELLIPSIS.sub(_ellipsis, s)
    s = _BASE.sub(_base, s)
    s = _ATTACHED_UNIT.sub("", s)
    if s.rstrip()[-2:] in ("st", "nd", "rd", "th"):
        s = re.sub(r"^(\d+)\s*(?:st|nd|rd|th)$", r"\1", s.strip())  # an ordinal, 8th
    s = re.sub(r"\s*(?:degrees?|percent|pct)\b", lambda m: "°" if "deg" in m.group(0) else "%", s)
    s = _strip_trailing_units(s)
    s = re.sub(r"^[A-Za-z](?:\^\{?-1\}?|')?\s*\(\s*[A-Za-z]\s*\)\s*=(?![^=]*=)", "", s)  # f(x) =, f^{-1}(x) =
    s = s.strip().rstrip(".").strip()
    if "real" in s and text_key(s) in _ALL_REALS:
        s = r"(-\infty, \infty)"
    return s


_ANGLE = re.compile(r"(?<![A-Za-z\\])(?:m\s*)?\\(?:angle|measuredangle)\s*\{?\s*([A-Z]{1,3})\s*\}?(?=\s*=)")
#: A trailing "k is an integer" qualifier of a periodic answer (the parameter stays a variable of the answer).
_INTEGER_PARAMETER = re.compile(
    r"[,;]?\s*\(?\s*(?:(?:for|where)\s+)?(?:all\s+|any\s+)?[a-z]\s*\\in\s*\\mathbb\s*\{?\s*[ZN]\s*\}?\s*\)?\s*$"
)
_STYLE = re.compile(
    r"\\(?:bf|it|rm|sf|tt|large|Large|LARGE|small|footnotesize|normalsize|huge|Huge|underline|bm)(?![A-Za-z])|"
    r"\^\s*\{\s*\}|\\\s*$"
)
_INVISIBLE = re.compile(r"\\(?:[hv]?phantom\s*\{[^{}]{0,200}\}|(?:text)?color\s*\{[a-zA-Z]{1,20}\})")
_WHOLE_BOX = re.compile(r"^\s*\\(?:boxed|fbox)\s*\{")


def _typesetting(s: str) -> str:
    """Commands that change how an answer looks, not what it is (see :func:`clean`)."""
    s = _unbox(s)
    s = _STYLE.sub("", s)  # \bf 5, \large 5, \underline{5}, 5^{}
    s = _INVISIBLE.sub("", s)  # \phantom{1}10 renders as 10; \color{red}{10} as 10
    if "angle" in s:
        s = s.replace("\\langle", "(").replace("\\rangle", ")")  # the vector <1, -2, 3>
        s = _ANGLE.sub(r"\1", s)  # m\angle ABC = 90°: the angle's name is a label
    return s


def _unbox(s: str) -> str:
    """``\\boxed{\\boxed{7}}`` -> ``7``: a box that is the whole answer is its content (balanced braces only)."""
    for _ in range(8):
        m = _WHOLE_BOX.match(s)
        if not m or not s.rstrip().endswith("}"):
            return s
        inner = s[m.end() : len(s.rstrip()) - 1]
        depth = 0
        for c in inner:
            depth += {"{": 1, "}": -1}.get(c, 0)
            if depth < 0:
                return s  # \boxed{1}+\boxed{2}: the braces close earlier
        if depth:
            return s
        s = inner
    return s


def _thousands(m: re.Match[str]) -> str:
    """``12,345`` -> ``12345``, except a pair alone in brackets: ``(12,102)`` is an interval or a point."""
    s, a, b = m.string, m.start(), m.end()
    if m.group(2).count(",") == 1 and s[:a].rstrip()[-1:] in ("(", "[") and s[b:].lstrip()[:1] in (")", "]"):
        return m.group(0)
    return m.group(1) + m.group(2).replace(",", "")


def _text_commands(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        inner = m.group(1)
        word = inner.strip().lower()
        if word in _CONNECTIVES:
            return _CONNECTIVES[word]
        before = s[: m.start()].rstrip()
        if before and not re.search(r"[-+*/=(,^_{&]$", before) and is_unit_text(inner):
            return ""  # a unit after a value: \text{ cm}, \text{ square feet}, \text{ cm}^2
        tail = m.group(2) or ""
        if len(inner.strip()) == 1 and inner.strip().isalpha():
            return inner.strip() + tail
        return " " + inner + " " + tail

    prev = None
    while prev != s:  # nested \text{\textbf{...}}
        prev = s
        s = _TEXT_CMD.sub(repl, s)
    return s


def _strip_trailing_units(s: str) -> str:
    tail = s[-_UNIT_TAIL:]  # units are short: looking at the tail keeps this linear
    m = _TRAILING_WORDS.search(tail)
    if not m:
        return s
    words = re.findall(r"[A-Za-z]+(?:/[A-Za-z]+)?", m.group(1))
    if all(_is_unit_word(w) for w in words):
        return s[: len(s) - len(tail) + m.start()]
    return s


def _is_unit_word(w: str) -> bool:
    low = w.lower()
    if low in MATH_WORDS or low in ("or", "and"):
        return False
    return is_unit_word(w)


def _repeating(m: re.Match[str]) -> str:
    whole, fixed, rep = m.group(1) or "0", m.group(2), m.group(3)
    value = Fraction(int(whole)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value += Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    return f"({value.numerator}/{value.denominator})"


def _ellipsis(m: re.Match[str]) -> str:
    """``0.363636...`` -> 4/11 when the shown digits repeat a block at least twice; else left as written."""
    whole, digits = m.group(1) or "0", m.group(2)
    for start in range(len(digits)):
        tail = digits[start:]
        for period in range(1, len(tail) // 2 + 1):
            if all(tail[i] == tail[i % period] for i in range(len(tail))):
                value = Fraction(int(whole)) + (Fraction(int(digits[:start]), 10**start) if start else 0)
                value += Fraction(int(tail[:period]), (10**period - 1) * 10**start)
                return f"({value.numerator}/{value.denominator})"
    return m.group(0)


def _base(m: re.Match[str]) -> str:
    digits, base = m.group(1), int(m.group(2))
    if not 2 <= base <= 36:
        return m.group(0)
    try:
        int(digits, base)
    except ValueError:
        return m.group(0)
    return rf"\based{{{digits}}}{{{base}}}"
