r"""What a reader can see: the characters of a completion that say something.

Content is what a reader would take as reasoning or an answer once the text is rendered. A character is content
when it is a letter, a digit, or a non-ASCII symbol (``∞``, ``∅``), and:

* it is not invisible by its Unicode general category: controls and format characters (``Cc``, ``Cf``: zero-width
  spaces and joiners, soft hyphens, bidirectional marks, tag characters), surrogates, private-use and unassigned
  code points (``Cs``, ``Co``, ``Cn``), every space and separator (``Z*``), and combining marks (``M*``: a mark
  adds to the letter before it and says nothing alone);
* it is not a letter or symbol that Unicode itself names a blank, a filler or a fill space (the Braille
  blank, the Hangul fillers, the ideographic half fill space): these render as empty space by design (the
  "BLANK SYMBOL" ␢ shows a glyph and counts), nor a math symbol named an ellipsis (``⋯``, ``⋮``: a placeholder);
* it is not inside LaTeX or markup that renders nothing: a comment (``%`` to the end of the line; a ``%`` right
  after a digit is a percent sign), an HTML comment or tag, an HTML entity for an invisible character
  (``&nbsp;``, ``&#8203;``), the argument of ``\phantom``/``\hphantom``/``\vphantom``, ``\hspace``, ``\vspace``,
  ``\rule``, ``\label`` (nested braces included, or TeX's one-token argument), a ``\kern``- or
  ``\penalty``-style dimension, text set in white (``\color{white}`` to the end of its group,
  ``\textcolor{white}{...}``, an xcolor mix such as ``black!0`` whose every weighted part is white), source
  that TeX skips (``\iffalse ... \fi``, the ``comment`` environment), and an HTML element that its own
  attributes hide (``hidden``, ``display: none``, ``visibility: hidden``, ``opacity: 0``, white text), and a
  Markdown link reference definition (``[//]: # (note)``: a line that renders nothing);
* it is not the name of a command that draws nothing a reader takes as content: spacing (``\quad``, ``\hfill``,
  ``\,``), no-ops (``\relax``, ``\null``, ``\strut``), style and size switches (``\displaystyle``, ``\bf``,
  ``\left``), placeholders (``\ldots``, ``\dots``, ``\cdots``), and wrappers whose argument is the content
  (``\text``, ``\boxed``, ``\mathrm``: the argument counts, the name does not).

Other command names count (``\infty``, ``\pi``, ``\emptyset``), and so do a set's braces (``\{\}``). ASCII
punctuation and operators alone (``.``, ``+``, ``=``) are not content, nor are non-ASCII punctuation marks (``…``).

One pass over the text and one over its braces and commands: linear in the length, with an optional deadline
checked as it goes. This module does not decide what the final answer is (see :mod:`rewards.final_answer`).
"""

from __future__ import annotations

import bisect
import functools
import html
import re
import time
import unicodedata
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate

from rewards.skipped import skipped_spans

__all__ = [
    "OutOfTime",
    "Deadline",
    "substance_mask",
    "substance_prefix",
    "is_placeholder",
    "is_invisible_char",
    "strip_hidden",
]


class OutOfTime(Exception):
    """A reward's own time limit passed before it finished (the reward then reports ``timeout``, unscored)."""


class Deadline:
    """A cooperative deadline: :meth:`check` raises :class:`OutOfTime` once ``seconds`` have passed.

    >>> Deadline(None).check()  # no limit: never raises
    """

    __slots__ = ("at",)

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds

    def check(self) -> None:
        if self.at is not None and time.monotonic() > self.at:
            raise OutOfTime("ran past its time limit")


_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Mc", "Me"})
#: Letters and symbols Unicode names as blanks, fillers or fill spaces: they render as empty space (not "BLANK
#: SYMBOL" ␢, which shows a glyph).
_BLANK_NAME = re.compile(r"\bFILLER\b|\bBLANK$|\bFILL SPACE$")
#: Math symbols that stand in for what is left out (``⋯``, ``⋮``), as ``\cdots`` does.
_ELLIPSIS_NAME = re.compile(r"\bELLIPSIS$")


@functools.lru_cache(maxsize=65536)
def _counts(c: str) -> bool:
    if c.isascii():
        return c.isalnum()
    cat = unicodedata.category(c)
    if cat in _INVISIBLE_CATEGORIES or cat[0] not in "LNS" or cat == "Sk":
        return False  # Sk: a lone modifier symbol (a spacing accent) says nothing
    if cat == "Sc":
        return False  # a currency sign alone is punctuation around a value, like "$"
    name = unicodedata.name(c, "")
    return not _BLANK_NAME.search(name) and not (cat == "Sm" and _ELLIPSIS_NAME.search(name))


def is_invisible_char(c: str) -> bool:
    """True when the single character ``c`` shows nothing: whitespace, a control or format character, a mark
    alone, a private-use or unassigned code point, or a character Unicode names a blank or a filler.

    >>> [is_invisible_char(c) for c in ("\u200b", "\u2800", "\u3164", "\u00a0", " ", "x", ".", "\u221e")]
    [True, True, True, True, True, False, False, False]
    """
    if c.isascii():
        return not c.isprintable() or c.isspace()
    return unicodedata.category(c) in _INVISIBLE_CATEGORIES or bool(_BLANK_NAME.search(unicodedata.name(c, "")))


_ARG_HIDDEN = r"[hv]?phantom|[hvm]space\*?|rule|label|setlength|addtolength|tag\*?"
_COLOR_ARG = r"color|textcolor|colorbox|fcolorbox|pagecolor|definecolor"
_SILENT = (
    # spacing and breaks
    "quad|qquad|enspace|enskip|thinspace|medspace|thickspace|negthinspace|negmedspace|negthickspace|hfill|vfill|"
    "hfil|vfil|hss|vss|break|newline|linebreak|nolinebreak|pagebreak|newpage|clearpage|par|noindent|indent|"
    "nobreak|allowbreak|smallskip|medskip|bigskip|space|xspace|hfilneg|nopagebreak|cr|crcr|hidewidth|"
    # no-ops
    "relax|null|empty|strut|mathstrut|protect|ignorespaces|unskip|leavevmode|nonumber|notag|displaybreak|"
    "centering|raggedright|raggedleft|hline|cline|toprule|midrule|bottomrule|limits|nolimits|phantomsection|"
    "expandafter|noexpand|selectfont|vcenter|"
    # style and size switches
    "displaystyle|textstyle|scriptstyle|scriptscriptstyle|left|right|middle|big|Big|bigg|Bigg|bigl|bigr|Bigl|Bigr|"
    "biggl|biggr|Biggl|Biggr|rm|bf|it|sf|tt|sc|em|normalfont|upshape|itshape|bfseries|mdseries|tiny|scriptsize|"
    "footnotesize|small|normalsize|large|Large|LARGE|huge|Huge|"
    # placeholders
    "ldots|dots|cdots|vdots|ddots|iddots|adots|dotsc|dotsb|dotsm|dotsi|dotso|hdots|cdotp|ldotp|"
    # wrappers: the argument is the content, the name is not
    "text|textbf|textit|textrm|textsf|texttt|textnormal|textup|textmd|emph|mathrm|mathbf|mathit|mathsf|mathtt|"
    "mathcal|mathbb|mathfrak|mathscr|mathnormal|boldsymbol|bm|operatorname|mbox|hbox|vbox|makebox|framebox|"
    "boxed|fbox|underline|ensuremath|displaylines|mathop|mathrel|mathbin|mathord|mathpunct|mathinner|"
    "smash|mathrlap|mathllap|mathclap|rlap|llap|clap|raisebox|scalebox|resizebox"
)
_COMMAND = re.compile(
    r"\\(?:"
    rf"(?P<hide>{_ARG_HIDDEN})(?![A-Za-z])|(?P<env>begin|end)(?![A-Za-z])|"
    rf"(?P<color>{_COLOR_ARG})(?![A-Za-z])|"
    r"(?P<dim>[mh]?kern|[hvm]skip|hspace|vspace|penalty)(?![A-Za-z])[ \t]*(?P<size>[-+]?[ \t]*\d*\.?\d+[ \t]*"
    r"(?:pt|em|ex|mu|cm|mm|in|bp|pc|sp|dd|cc|fil{1,3})?)|"
    rf"(?P<silent>{_SILENT})(?![A-Za-z])|"
    r"(?P<name>[A-Za-z]+)|(?P<sym>[,;:!> ]))"
)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]{0,300}>")
_COMMENT = re.compile(r"(?<![\\\d])%(?<!\d[ \t]%)[^\n]*")
#: A comment that stands on its own (at the start of a line or of a group): what :func:`strip_hidden` removes. A
#: ``%`` after a word (``n % 2``) may be a modulo or a percent sign in prose, so the finder keeps that text.
_OWN_COMMENT = re.compile(r"(?:^|(?<=\{))[ \t]*%[^\n]*", re.MULTILINE)
_BRACE = re.compile(r"(?<!\\)[{}]")
_SET_BRACE = re.compile(r"\\[{}]")
_TOKEN_ARG = re.compile(r"[ \t]*(\\[A-Za-z]+|[^\s{}\\])")
_ENTITY = re.compile(r"&(?:[A-Za-z]{2,10}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
_WHITE = re.compile(
    r"^\s*(?:white(?:!100)?|transparent|none|#?fff(?:fff)?|1(?:\.0*)?(?:\s*,\s*1(?:\.0*)?){0,3}|255\s*,\s*255\s*,\s*255)\s*$",
    re.IGNORECASE,
)
_COLOR_STOP = re.compile(r"(?<!\\)\$|\\[)\]]|</?[A-Za-z]")
_CHECK_EVERY = 4096
#: Commands that can hide what they cover (a quick test before the full scan of :func:`strip_hidden`).
_HIDERS = rf"{_ARG_HIDDEN}|{_COLOR_ARG}|[mh]?kern|[hvm]skip|penalty"
_HIDING = re.compile(rf"\\(?:iffalse|begin\s*\{{comment\}}|{_HIDERS})(?![A-Za-z])")
#: A letter or digit that does not continue a command name, and anything that could hide it: the quick test of
#: :func:`is_placeholder` (such a character is content unless something hides it).
_PLAIN_ALNUM = re.compile(r"(?<![\\A-Za-z])[A-Za-z0-9]")
_MAY_HIDE = re.compile(rf"[%<&]|\]:|\\(?:begin|end|iffalse|{_HIDERS})(?![A-Za-z])")


def _brace_pairs(text: str, deadline: Deadline) -> dict[int, int]:
    """Position of each unescaped ``{`` -> its matching ``}``, in one pass over the braces."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k, m in enumerate(_BRACE.finditer(text)):
        if k % _CHECK_EVERY == 0:
            deadline.check()
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _arg(text: str, at: int, pairs: dict[int, int]) -> tuple[int, int] | None:
    """The span of the braced argument starting at ``at`` (spaces and one ``[...]`` option skipped), or None."""
    n = len(text)
    while at < n and text[at] in " \t":
        at += 1
    if at < n and text[at] == "[":
        close = text.find("]", at, at + 200)
        at = close + 1 if close > 0 else at
    while at < n and text[at] in " \t":
        at += 1
    if at < n and text[at] == "{" and at in pairs:
        return at, pairs[at] + 1
    return None


def _arg_or_token(text: str, at: int, pairs: dict[int, int]) -> tuple[int, int] | None:
    """A braced argument, or TeX's one-token argument (``\phantom 5``, ``\phantom\frac``)."""
    arg = _arg(text, at, pairs)
    if arg is not None:
        return arg
    tok = _TOKEN_ARG.match(text, at)
    return (tok.start(1), tok.end()) if tok else None


def _group_end(text: str, at: int, opens: list[int], pairs: dict[int, int]) -> int:
    """Where a ``\\color`` declaration at ``at`` stops: the end of its enclosing group, a math delimiter or a tag.

    The enclosing group is looked for among the nearest 256 open braces before ``at`` (a bounded walk)."""
    end = len(text)
    i = bisect.bisect_left(opens, at)
    for o in opens[max(0, i - 256) : i][::-1]:
        if pairs[o] > at:
            end = pairs[o]
            break
    stop = _COLOR_STOP.search(text, at, end)
    return stop.start() if stop else end


def _command_spans(text: str, deadline: Deadline) -> Iterator[tuple[int, int, bool]]:
    """(start, end, hides text) of every command that shows nothing: ``hides text`` when it also hides what it
    covers (a phantom's or a spacing command's argument, white text), not only its own name."""
    if "\\" not in text:
        return
    pairs = _brace_pairs(text, deadline) if "{" in text else {}
    opens = sorted(pairs)
    hidden_until = -1
    for k, m in enumerate(_COMMAND.finditer(text)):
        if k % _CHECK_EVERY == 0:
            deadline.check()
        start, end = m.start(), m.end()
        if start < hidden_until:
            continue  # inside an argument or white text already hidden
        hides = bool(m.group("hide") or m.group("dim"))
        if m.group("hide") or m.group("env"):
            arg = _arg_or_token(text, end, pairs) if m.group("hide") else _arg(text, end, pairs)
            end = arg[1] if arg else end
            if m.group("hide") == "rule" and arg:  # \rule{w}{h}: both arguments are sizes
                second = _arg(text, end, pairs)
                end = second[1] if second else end
        elif m.group("color"):
            end, hides = _mask_color(text, m, pairs, opens)
        elif m.group("name"):
            continue  # a command that draws something: \infty, \pi, \emptyset
        yield start, end, hides
        hidden_until = end if hides else hidden_until


def _mask_color(text: str, m: re.Match[str], pairs: dict[int, int], opens: list[int]) -> tuple[int, bool]:
    """Where a color command's own arguments end, or the text it sets in white; and whether it hides text."""
    cmd = m.group("color")
    spec = _arg(text, m.end(), pairs)
    if spec is None:
        return m.end(), False
    end = spec[1]
    if cmd in ("definecolor", "colorbox", "fcolorbox", "pagecolor"):
        if cmd == "definecolor":  # \definecolor{name}{model}{spec}
            for _ in range(2):
                nxt = _arg(text, end, pairs)
                end = nxt[1] if nxt else end
        return end, False
    if not _is_white(text[spec[0] + 1 : spec[1] - 1]):
        return end, False
    body = _arg(text, end, pairs)
    if cmd == "textcolor" or body is not None and body[0] == end:
        return (body[1] if body else end), True  # \textcolor{white}{x}, \color{white}{x}
    return _group_end(text, end, opens, pairs), True  # \color{white} x ... to the end of the group


def _is_white(spec: str) -> bool:
    """A color spec that renders white: white itself, or an xcolor mix (``white!100!black!0``, ``black!0``: a
    color at p percent, the rest the next color, white when none is named) whose every weighted part is white."""
    if _WHITE.match(spec):
        return True
    parts = spec.split("!")
    if len(parts) < 2 or len(parts) > 21 or parts[0].strip().startswith("-"):
        return False
    weights = {0: 1.0}  # part index -> weight in the mix
    for i in range(1, len(parts), 2):
        try:
            p = float(parts[i].strip()) / 100
        except ValueError:
            return False
        if not 0 <= p <= 1:
            return False
        weights = {k: w * p for k, w in weights.items()}
        nxt = i + 1 if i + 1 < len(parts) else -1  # -1: the implied white
        weights[nxt] = weights.get(nxt, 0.0) + (1 - p)
    return all(k == -1 or _WHITE.match(parts[k]) for k, w in weights.items() if w > 0)


def substance_mask(text: str, deadline: Deadline | None = None) -> bytearray:
    """One byte per character of ``text``: 1 where the character is content a reader sees, else 0."""
    dl = deadline or Deadline(None)
    table = {ord(c): 1 if _counts(c) else 0 for c in set(text)}
    mask = bytearray(text.translate(table), "latin-1") if text else bytearray()
    dl.check()
    for rx in (_HTML_COMMENT, _HTML_TAG, _COMMENT) if ("<" in text or "%" in text) else ():
        for m in rx.finditer(text):
            mask[m.start() : m.end()] = bytes(m.end() - m.start())
    for a, b in skipped_spans(text, dl.check):
        mask[a:b] = bytes(b - a)
    for m in _ENTITY.finditer(text) if "&" in text else ():
        if not any(map(_counts, html.unescape(m.group(0)))):
            mask[m.start() : m.end()] = bytes(m.end() - m.start())  # &nbsp; &#8203; &zwj;: entities that show nothing
    for m in _SET_BRACE.finditer(text) if "\\" in text else ():
        mask[m.start() + 1] = 1  # \{ \}: a set's braces are content (\{\} is the empty set)
    for start, end, _ in _command_spans(text, dl):
        mask[start:end] = bytes(end - start)
    return mask


def strip_hidden(text: str, deadline: Deadline | None = None) -> str:
    r"""``text`` with every region a reader cannot see blanked to spaces (same length, same positions): LaTeX
    comments that stand on their own line or open a group, HTML comments, phantoms and spacing arguments, white
    text. Tags, command names and punctuation stay.

    >>> strip_hidden("The answer is {\\color{white} 3} 5.\n% or 4")
    'The answer is {               } 5.\n      '
    """
    if "%" not in text and "<" not in text and "]:" not in text and not _HIDING.search(text):
        return text
    dl = deadline or Deadline(None)
    spans = [(m.start(), m.end()) for rx in (_HTML_COMMENT, _OWN_COMMENT) for m in rx.finditer(text)]
    spans += list(skipped_spans(text, dl.check))
    spans += [(a, b) for a, b, hides in _command_spans(text, dl) if hides]
    if not spans:
        return text
    out, last = [], 0
    for a, b in sorted(spans):
        if b <= last:
            continue
        a = max(a, last)
        out += [text[last:a], " " * (b - a)]
        last = b
    out.append(text[last:])
    return "".join(out)


def substance_prefix(text: str, deadline: Deadline | None = None) -> Sequence[int]:
    """Prefix counts of content characters: ``p[b] - p[a]`` is the content in ``text[a:b]`` (O(1) per span)."""
    mask = substance_mask(text, deadline)
    return array("q", accumulate(mask, initial=0))


def is_placeholder(content: str, deadline: Deadline | None = None) -> bool:
    r"""True when ``content`` shows a reader nothing: only whitespace, punctuation, invisible characters, comments,
    spacing or no-op commands, placeholders, ``\phantom{...}`` or white text.

    >>> is_placeholder(r"\,"), is_placeholder("\u200b\u2800"), is_placeholder(r"\ldots \relax")
    (True, True, True)
    >>> is_placeholder(r"\infty")
    False
    >>> is_placeholder(r"{\color{white} 42}"), is_placeholder(r"\phantom{\phantom{7}}"), is_placeholder("% 7\n")
    (True, True, True)
    >>> is_placeholder("50%"), is_placeholder(r"\textcolor{red}{7}")
    (False, False)
    """
    if _PLAIN_ALNUM.search(content) and not _MAY_HIDE.search(content):
        return False
    return not any(substance_mask(content, deadline))
