"""Format rewards: does a completion have the shape we asked for?

Registered rewards (each reads only the completion, never the gold answer):

* ``format_regex``: a user pattern, by search, match or full match. Runs in a scoring worker process
  (``isolation="process"``) because a user pattern can backtrack catastrophically; the scoring path kills it at
  its time limit. Input is also capped at ``max_chars``.
* ``think_answer_format``: ``<think>...</think><answer>...</answer>`` (DeepSeek-R1 template), tags configurable.
* ``boxed_present``: a balanced ``\\boxed{...}`` (or ``\\fbox{...}``) is present; its content is the answer.
* ``tag_count``: partial credit for each well-formed tag pair.
* ``repetition``: n-gram repetition penalty (Yeo et al. 2025, "Demystifying Long Chain-of-Thought Reasoning").

Empty or placeholder content is not a format: a block or box whose content is only whitespace, punctuation,
spacing commands (``\\,``, ``\\quad``), ``\\phantom{}`` or invisible characters (a zero-width space) earns
nothing (``<think></think><answer>\\boxed{.}</answer>`` scores 0 on every format reward), and tags must be
properly ordered (no interleaved or reversed pairs).

All but ``format_regex`` are written without backtracking regexes (plain ``str.find``/``str.count`` scans), so
their cost is linear in the completion length and they may run inline.

What this module deliberately does not do: judge the *content* of an answer (see :mod:`rewards.math`), or
count tokens (length shaping, which can use a tokenizer, lives in :mod:`rewards.length`).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from typing import Literal

from harness.errors import RewardParameterError
from harness.registry import reward
from harness.types import Sample, Score

__all__ = [
    "format_regex",
    "think_answer_format",
    "boxed_present",
    "tag_count",
    "repetition",
    "parse_regex_flags",
    "last_boxed",
    "ngram_repetition_fraction",
    "is_placeholder",
]

_FLAG_LETTERS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "a": re.ASCII}
_FLAG_NAMES = {
    "IGNORECASE": re.IGNORECASE,
    "MULTILINE": re.MULTILINE,
    "DOTALL": re.DOTALL,
    "VERBOSE": re.VERBOSE,
    "ASCII": re.ASCII,
}
_ANSWER_LOG_CHARS = 200


_SPACING = re.compile(
    r"\\(?:[hv]?phantom|[hv]space\*?)\s*\{[^{}]{0,200}\}|"
    r"\\(?:quad|qquad|enspace|thinspace|negthinspace|medspace|thickspace|displaystyle|textstyle|[,;:!> ])|~"
)
_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|boxed|fbox|left|right)\b")
_ANY_TAG = re.compile(r"</?[A-Za-z][\w-]{0,30}>")


def _substance(text: str) -> list[int]:
    """Prefix counts of the characters of ``text`` that say something: letters, digits, non-ASCII math symbols
    (``∞``), and command names (``\\infty``), but not spacing commands, ``\\phantom{}``, ``\\text``/``\\boxed``
    wrappers, tags, punctuation or invisible characters. One pass: a block's check is then O(1)."""
    mask = bytearray(c.isalnum() or (not c.isascii() and unicodedata.category(c) in ("Sm", "So")) for c in text)
    for rx in (_SPACING, _WRAPPERS, _ANY_TAG):
        for m in rx.finditer(text):
            mask[m.start() : m.end()] = bytes(m.end() - m.start())
    out = [0]
    for v in mask:
        out.append(out[-1] + v)
    return out


def is_placeholder(content: str) -> bool:
    r"""True when ``content`` says nothing: only whitespace, punctuation, braces, tags, spacing commands,
    ``\phantom{}`` or invisible characters.

    >>> is_placeholder(r"\,"), is_placeholder("\u200b"), is_placeholder("."), is_placeholder(r"\infty")
    (True, True, True, False)
    """
    return _substance(content)[-1] == 0


_OPEN_TAG = re.compile(r"<([A-Za-z][\w-]{0,30})>")


def _tag_blocks(text: str) -> list[tuple[str, int, int]]:
    """(tag, start, end) of each ``<tag>...</tag>`` content: every opening tag with the first closing tag after it."""
    closes: dict[str, list[int]] = {}
    out: list[tuple[str, int, int]] = []
    for m in _OPEN_TAG.finditer(text):
        name = m.group(1)
        if name not in closes:
            closes[name] = [c.start() for c in re.finditer(re.escape(f"</{name}>"), text)]
        at = bisect.bisect_left(closes[name], m.end())
        if at < len(closes[name]):
            out.append((name, m.end(), closes[name][at]))
    return out


def _box_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the content of every balanced ``\\boxed{...}``/``\\fbox{...}`` (one pass over braces)."""
    starts = {m.end() - 1 for m in re.finditer(r"\\(?:boxed|fbox)\{", text)}
    out: list[tuple[int, int]] = []
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text) if starts else ():
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            at = stack.pop()
            if at in starts:
                out.append((at + 1, m.start()))
    return out


def _empty_shell(text: str) -> str | None:
    """Why ``text`` is an empty shell (a tag block or a box with placeholder content), or None."""
    blocks = _tag_blocks(text)
    boxes = _box_spans(text)
    if not blocks and not boxes:
        return None
    sub = _substance(text)
    for name, a, b in blocks:
        if sub[b] == sub[a]:
            return f"the <{name}> block has no content"
    for a, b in boxes:
        if sub[b] == sub[a]:
            return "a \\boxed{} has no content"
    return None


def parse_regex_flags(flags: str | Sequence[str] | int) -> int:
    """Turn ``"ims"``, ``"IGNORECASE|DOTALL"``, ``["MULTILINE", "s"]`` or an int into ``re`` flags.

    >>> parse_regex_flags("is") == re.IGNORECASE | re.DOTALL
    True
    >>> parse_regex_flags("MULTILINE|DOTALL") == re.MULTILINE | re.DOTALL
    True
    """
    if isinstance(flags, bool):  # an int to Python, but never meant as flags
        raise RewardParameterError(f"format_regex: flags must be letters, names or an int, got {flags!r}")
    if isinstance(flags, int):
        return flags
    if isinstance(flags, str):
        parts = [p for p in re.split(r"[|,\s]+", flags.strip()) if p]
    else:
        parts = [str(p) for p in flags]
    out = 0
    for part in parts:
        name = part.upper().removeprefix("RE.")
        if name in _FLAG_NAMES:
            out |= _FLAG_NAMES[name]
        elif all(c in _FLAG_LETTERS for c in part.lower()):
            for c in part.lower():
                out |= _FLAG_LETTERS[c]
        else:
            raise RewardParameterError(
                f"format_regex: unknown flag {part!r} in flags={flags!r}; expected letters of 'imsxa' "
                f"or names {'|'.join(_FLAG_NAMES)}"
            )
    return out


@reward("format_regex", isolation="process", reads=())
def format_regex(
    *,
    pattern: str,
    mode: Literal["search", "match", "fullmatch"] = "search",
    flags: str = "",
    max_chars: int = 50_000,
):
    """1.0 when the completion matches a user regex, else 0.0.

    ``mode`` is ``search`` (anywhere), ``match`` (at the start) or ``fullmatch`` (the whole completion).
    ``flags`` takes letters (``"ims"``) or names (``"IGNORECASE|DOTALL"``). A completion longer than
    ``max_chars`` is not scanned: 0.0 with status ``parse_error`` and the reason in ``info``. A pattern that
    backtracks catastrophically is killed by the scoring path at its time limit (status ``timeout``).

    >>> from harness import get_reward
    >>> fn = get_reward("format_regex", pattern=r"^Answer: \\d+$", flags="m")
    >>> fn({}, "work...\\nAnswer: 42").value, fn({}, "Answer: forty-two").value
    (1.0, 0.0)
    """
    if mode not in ("search", "match", "fullmatch"):
        raise RewardParameterError(f"format_regex: mode must be 'search', 'match' or 'fullmatch', got {mode!r}")
    if max_chars <= 0:
        raise RewardParameterError(f"format_regex: max_chars must be positive, got {max_chars!r}")
    try:
        compiled = re.compile(pattern, parse_regex_flags(flags))
    except re.error as e:
        raise RewardParameterError(f"format_regex: pattern {pattern!r} does not compile: {e}") from None
    matcher = getattr(compiled, mode)

    def score(sample: Sample, completion: str) -> Score:
        if len(completion) > max_chars:
            return Score(
                value=0.0,
                status="parse_error",
                info={"reason": f"completion has {len(completion)} chars, over max_chars={max_chars}; not scanned"},
            )
        m = matcher(completion)
        if m is None:
            return Score(value=0.0, info={"reason": f"the pattern does not {mode} the completion"})
        shell = _empty_shell(m.group(0))
        if shell is not None:
            return Score(value=0.0, status="no_answer", info={"reason": f"the match is an empty shell: {shell}"})
        return Score(value=1.0, answer=m.group(0)[:_ANSWER_LOG_CHARS], info={"span": [m.start(), m.end()]})

    return score


def _think_part(text: str, think_tag: str, prefilled: bool) -> tuple[str | None, str, str]:
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
    if is_placeholder(text[start:end]):
        return None, "", f"empty {open_t} block"
    return text[start:end], text[end + len(close_t) :], ""


def _answer_part(rest: str, answer_tag: str) -> tuple[str | None, str, str]:
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
    if is_placeholder(content) or _empty_shell(content):
        return None, "no_answer", f"empty {open_t} block (no content, or a placeholder)"
    return content.strip(), "ok", ""


@reward("think_answer_format", isolation="inline", reads=())
def think_answer_format(
    *,
    think_tag: str = "think",
    answer_tag: str | None = "answer",
    think_prefilled: bool = False,
):
    """1.0 for ``<think>reasoning</think><answer>answer</answer>`` and nothing else, else 0.0.

    Whitespace around the blocks is allowed. With ``answer_tag=None`` any non-empty text may follow the
    reasoning. With ``think_prefilled=True`` the prompt already ends in ``<think>`` (as in the R1 and Qwen3
    chat templates), so the completion must *not* open it again. A missing answer is status ``no_answer``,
    malformed tags ``parse_error``; both score 0.0 and say why in ``info["reason"]``.

    >>> from harness import get_reward
    >>> fn = get_reward("think_answer_format")
    >>> s = fn({}, "<think>\\n2+2 is 4\\n</think>\\n<answer>4</answer>")
    >>> s.value, s.answer
    (1.0, '4')
    >>> fn({}, "<think>hmm</think> 4").status
    'no_answer'
    """
    for label, tag in (("think_tag", think_tag), ("answer_tag", answer_tag)):
        if tag is not None and (not tag or "<" in tag or ">" in tag):
            raise RewardParameterError(
                f"think_answer_format: {label} must be a bare tag name like 'think', got {tag!r}"
            )

    def score(sample: Sample, completion: str) -> Score:
        text = completion.strip()
        think, rest, why = _think_part(text, think_tag, think_prefilled)
        if think is None:
            return Score(value=0.0, status="parse_error", info={"reason": why})
        if answer_tag is None:
            if is_placeholder(rest) or _empty_shell(rest):
                return Score(value=0.0, status="no_answer", info={"reason": "no text after the reasoning"})
            return Score(value=1.0, answer=rest.strip()[:_ANSWER_LOG_CHARS])
        answer, status, why = _answer_part(rest, answer_tag)
        if answer is None:
            return Score(value=0.0, status=status, info={"reason": why})
        return Score(value=1.0, answer=answer[:_ANSWER_LOG_CHARS])

    return score


def last_boxed(text: str, commands: Sequence[str] = ("boxed", "fbox")) -> tuple[str | None, str]:
    """The content of the last ``\\boxed{...}`` in ``text`` and a status (``ok``, ``no_answer``, ``parse_error``).

    Only the last box is scanned, so the cost is linear in the text length.

    >>> last_boxed(r"first \\boxed{1} then \\boxed{\\frac{1}{2}}")
    ('\\\\frac{1}{2}', 'ok')
    >>> last_boxed(r"\\boxed{1")
    (None, 'parse_error')
    """
    best = -1
    best_len = 0
    for cmd in commands:
        token = "\\" + cmd + "{"
        at = text.rfind(token)
        if at > best:
            best, best_len = at, len(token)
    if best < 0:
        return None, "no_answer"
    depth = 1
    i = best + best_len
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[best + best_len : i], "ok"
        i += 1
    return None, "parse_error"


@reward("boxed_present", isolation="inline", reads=())
def boxed_present(*, commands: tuple[str, ...] = ("boxed", "fbox")):
    """1.0 when the completion ends its work in a balanced, non-empty ``\\boxed{...}``, else 0.0.

    The content of the last box is the extracted ``answer``. No box is status ``no_answer``; an unclosed box
    ``parse_error``. It checks presence only; whether the boxed answer is right is :mod:`rewards.math`'s job.

    >>> from harness import get_reward
    >>> fn = get_reward("boxed_present")
    >>> s = fn({}, "so the answer is \\\\boxed{\\\\frac{3}{4}}.")
    >>> s.value, s.answer
    (1.0, '\\\\frac{3}{4}')
    >>> fn({}, "the answer is 3/4").status
    'no_answer'
    """
    cmds = tuple(commands)
    if not cmds or not all(isinstance(c, str) and c.isalpha() for c in cmds):
        raise RewardParameterError(f"boxed_present: commands must be letter-only LaTeX command names, got {commands!r}")

    def score(sample: Sample, completion: str) -> Score:
        content, status = last_boxed(completion, cmds)
        if content is None:
            reason = "no \\boxed{...} found" if status == "no_answer" else "the last \\boxed{ is never closed"
            return Score(value=0.0, status=status, info={"reason": reason})
        if is_placeholder(content):
            return Score(value=0.0, status="no_answer", info={"reason": "the last \\boxed{} is empty or a placeholder"})
        return Score(value=1.0, answer=content.strip()[:_ANSWER_LOG_CHARS])

    return score


def _tag_pair(text: str, tag: str) -> tuple[float, tuple[int, int] | None]:
    """(credit, span): 0.5 for exactly one ``<tag>``, 0.5 more for exactly one ``</tag>`` after it around real
    content; the span of the complete pair, if any."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    if text.count(open_t) != 1:
        return 0.0, None
    start, end = text.find(open_t), text.find(close_t)
    if text.count(close_t) != 1 or end < start:
        return 0.5, None  # a closing tag without its opening, or before it, earns nothing
    if is_placeholder(text[start + len(open_t) : end]) or _empty_shell(text[start + len(open_t) : end]):
        return 0.5, None
    return 1.0, (start, end + len(close_t))


def _tag_credits(text: str, tags: tuple[str, ...]) -> dict[str, float]:
    """Per-tag credit; a complete pair that crosses another, or comes before an earlier tag's pair, loses its
    closing half (tags must be properly nested-free and in the order given)."""
    pairs = {t: _tag_pair(text, t) for t in tags}
    credit = {t: c for t, (c, _) in pairs.items()}
    for i, ti in enumerate(tags):
        for tj in tags[i + 1 :]:
            si, sj = pairs[ti][1], pairs[tj][1]
            if si is None or sj is None or si[1] <= sj[0]:
                continue  # ordered: the earlier tag's pair closes before the later one opens
            credit[tj] = min(credit[tj], 0.5)
            if si[0] < sj[0] < si[1] < sj[1] or sj[0] < si[0] < sj[1] < si[1]:
                credit[ti] = min(credit[ti], 0.5)  # interleaved: neither pair is well formed
    return credit


@reward("tag_count", isolation="inline", reads=())
def tag_count(*, tags: tuple[str, ...] = ("think", "answer")):
    """Partial credit per well-formed tag pair, in [0, 1].

    Each tag is worth ``1/len(tags)``: half for exactly one opening tag, half for exactly one closing tag after
    it around real content, in the order of ``tags`` (a pair that interleaves with another, or comes before an
    earlier tag's pair, loses its closing half). Per-tag credit is in ``info["tags"]``. Useful early in training,
    when the strict ``think_answer_format`` is almost always 0 and gives no signal.

    >>> from harness import get_reward
    >>> fn = get_reward("tag_count")
    >>> fn({}, "<think>a</think><answer>b</answer>").value
    1.0
    >>> s = fn({}, "<think>a</think> b </answer>")
    >>> s.value, s.info["tags"]
    (0.5, {'think': 1.0, 'answer': 0.0})
    """
    names = tuple(tags)
    if not names or not all(isinstance(t, str) and t and "<" not in t and ">" not in t for t in names):
        raise RewardParameterError(f"tag_count: tags must be non-empty bare tag names like 'think', got {tags!r}")

    def score(sample: Sample, completion: str) -> Score:
        per_tag = _tag_credits(completion, names)
        return Score(value=sum(per_tag.values()) / len(names), info={"tags": per_tag})

    return score


def ngram_repetition_fraction(words: Sequence[str], n: int) -> float:
    """Fraction of word n-grams that repeat an earlier one: ``1 - distinct / total`` (0 if fewer than n words).

    >>> ngram_repetition_fraction("a b a b a b".split(), 2)  # ab ba ab ba ab: 2 distinct of 5
    0.6
    """
    total = len(words) - n + 1
    if total <= 0:
        return 0.0
    distinct = len({tuple(words[i : i + n]) for i in range(total)})
    return 1.0 - distinct / total


@reward("repetition", isolation="inline", reads=())
def repetition(*, ngram_size: int = 3, max_penalty: float = -1.0):
    """N-gram repetition penalty in ``[max_penalty, 0]``: ``max_penalty * (1 - distinct n-grams / n-grams)``.

    Words are the lower-cased whitespace-separated tokens. Defaults follow the paper's setting as reproduced
    in open-r1 (3-grams, penalty down to -1). ``info`` carries the repeated fraction and the n-gram count.

    >>> from harness import get_reward
    >>> fn = get_reward("repetition", ngram_size=2)
    >>> fn({}, "the cat sat on the mat").value
    0.0
    >>> fn({}, "go go go go go").value  # 4 bigrams, 1 distinct
    -0.75
    """
    if isinstance(ngram_size, bool) or not isinstance(ngram_size, int) or ngram_size < 1:
        raise RewardParameterError(f"repetition: ngram_size must be a positive integer, got {ngram_size!r}")
    if max_penalty > 0:
        raise RewardParameterError(f"repetition: max_penalty must be <= 0 (it is a penalty), got {max_penalty!r}")

    def score(sample: Sample, completion: str) -> Score:
        words = completion.lower().split()
        frac = ngram_repetition_fraction(words, ngram_size)
        value = max_penalty * frac if frac else 0.0
        return Score(value=value, info={"repeated_fraction": frac, "ngrams": max(0, len(words) - ngram_size + 1)})

    return score
