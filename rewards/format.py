"""Format rewards: does a completion have the shape we asked for?

Registered rewards (each reads only the completion, never the gold answer):

* ``format_regex``: a user pattern, by search, match or full match. Runs in a scoring worker process
  (``isolation="process"``) because a user pattern can backtrack catastrophically; the scoring path kills it at
  its time limit. Input is also capped at ``max_chars``.
* ``think_answer_format``: ``<think>...</think><answer>...</answer>`` (DeepSeek-R1 template), tags configurable.
* ``boxed_present``: the final answer is in a balanced ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed 5``).
* ``tag_count``: partial credit for each well-formed tag pair.
* ``repetition``: n-gram repetition penalty (Yeo et al. 2025, "Demystifying Long Chain-of-Thought Reasoning"), and a
  loop penalty that sees loops through counters, numbering, invisible joins and missing spaces
  (:mod:`rewards.loops`).

**One final answer.** Every reward that reports an answer reports the one :func:`rewards.final_answer.extract_answer`
finds, the same one ``math`` grades: never inside reasoning (an unclosed or reopened ``<think>`` means no answer
yet), inside the last ``<answer>`` block when there is one, this turn only.

**Content is what a reader sees** (:mod:`rewards.visible`). A block or a box whose content is only whitespace,
punctuation, invisible characters (zero-width ones, the Braille blank, Hangul fillers: by Unicode category and
name, never a list of code points), comments, spacing or no-op commands (``\\relax``, ``\\hfill``, ``\\quad``),
placeholders (``\\ldots``), ``\\phantom{...}`` (nested too) or white text earns nothing
(``<think></think><answer>\\boxed{.}</answer>`` scores 0 on every format reward), and tags must be properly
ordered (no interleaved or reversed pairs).

**Time.** All but ``format_regex`` use only two fixed tag patterns (``<name>`` and ``</name>``, a name of at most
31 characters, which cannot backtrack) and linear scans, so their cost is linear in the completion length, and they
may run inline. Each also takes ``time_limit`` (seconds, default 2): a call that
runs past it stops at its next check and returns ``Score(None, "timeout")`` (unscored, like the scoring path's
kill), so no inline call keeps burning CPU after its limit.

What this module deliberately does not do: judge the *content* of an answer (see :mod:`rewards.math`), or
count tokens (length shaping, which can use a tokenizer, lives in :mod:`rewards.length`).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence
from typing import Literal

from harness.errors import RewardParameterError
from harness.registry import reward
from harness.types import Sample, Score
from rewards.final_answer import BOX_COMMANDS, Extraction, box_spans, extract_answer, reasoning_open
from rewards.loops import loop_coverage, loop_severity, loop_tokens, ngram_repetition_fraction, words
from rewards.visible import Deadline, OutOfTime, is_placeholder, substance_prefix

__all__ = [
    "format_regex",
    "think_answer_format",
    "boxed_present",
    "tag_count",
    "repetition",
    "parse_regex_flags",
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


def _empty_shell(text: str, deadline: Deadline | None = None) -> str | None:
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


def _shows_nothing(text: str, deadline: Deadline) -> bool:
    return is_placeholder(text, deadline) or _empty_shell(text, deadline) is not None


def _bounded(
    name: str, time_limit: float, fn: Callable[[Sample, str, Deadline], Score]
) -> Callable[[Sample, str], Score]:
    """``fn`` under a cooperative deadline of ``time_limit`` seconds: past it, an unscored ``timeout``."""
    if isinstance(time_limit, bool) or not time_limit > 0:
        raise RewardParameterError(f"{name}: time_limit must be a positive number of seconds, got {time_limit!r}")

    @functools.wraps(fn)
    def score(sample: Sample, completion: str) -> Score:
        try:
            return fn(sample, completion, Deadline(time_limit))
        except OutOfTime:
            return Score.unscored("timeout", f"{name} ran past its own {time_limit:g} s time limit")

    return score


def _answer_info(ex: Extraction) -> dict[str, object]:
    info: dict[str, object] = {"answer_source": ex.source}
    if ex.answer is None:
        info["no_answer_reason"] = ex.reason
    if ex.hedged:
        info["hedged"] = True
    return info


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


def _think_part(text: str, think_tag: str, prefilled: bool, dl: Deadline) -> tuple[str | None, str, str]:
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
    if _shows_nothing(text[start:end], dl):
        return None, "", f"empty {open_t} block (nothing a reader can see)"
    return text[start:end], text[end + len(close_t) :], ""


def _answer_part(rest: str, answer_tag: str, dl: Deadline) -> tuple[str | None, str, str]:
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
    if _shows_nothing(content, dl):
        return None, "no_answer", f"empty {open_t} block (nothing a reader can see, or a placeholder)"
    return content.strip(), "ok", ""


@reward("think_answer_format", isolation="inline", reads=())
def think_answer_format(
    *,
    think_tag: str = "think",
    answer_tag: str | None = "answer",
    think_prefilled: bool = False,
    time_limit: float = 2.0,
):
    """1.0 for ``<think>reasoning</think><answer>answer</answer>`` and nothing else, else 0.0.

    Whitespace around the blocks is allowed; both blocks must hold something a reader can see. With
    ``answer_tag=None`` any visible text may follow the reasoning. With ``think_prefilled=True`` the prompt already
    ends in ``<think>`` (as in the R1 and Qwen3 chat templates), so the completion must *not* open it again. A
    missing answer is status ``no_answer``, malformed tags ``parse_error``; both score 0.0 and say why in
    ``info["reason"]``. ``answer`` is the final answer found in the block (:mod:`rewards.final_answer`), None when
    the block commits to none (the block itself is in ``info["answer_block"]``).

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
    tags = (think_tag, answer_tag or "answer")

    def score(sample: Sample, completion: str, dl: Deadline) -> Score:
        text = completion.strip()
        think, rest, why = _think_part(text, think_tag, think_prefilled, dl)
        if think is None:
            return Score(value=0.0, status="parse_error", info={"reason": why})
        if answer_tag is None:
            if _shows_nothing(rest, dl):
                return Score(value=0.0, status="no_answer", info={"reason": "no visible text after the reasoning"})
            block = rest.strip()
        else:
            found, status, why = _answer_part(rest, answer_tag, dl)
            if found is None:
                return Score(value=0.0, status=status, info={"reason": why})
            block = found
        ex = extract_answer(completion, tags=tags)
        info = {"answer_block": block[:_ANSWER_LOG_CHARS], **_answer_info(ex)}
        return Score(value=1.0, answer=ex.answer[:_ANSWER_LOG_CHARS] if ex.answer else None, info=info)

    return _bounded("think_answer_format", time_limit, score)


@reward("boxed_present", isolation="inline", reads=())
def boxed_present(*, commands: tuple[str, ...] = BOX_COMMANDS, time_limit: float = 2.0):
    """1.0 when the completion's final answer is boxed (``\\boxed{...}``, ``\\fbox{...}``, ``\\boxed 5``), else 0.0.

    The final answer is the one :mod:`rewards.final_answer` finds, as ``math`` does: a box inside reasoning, in
    a box that shows nothing, followed by an alternative ("or maybe 8") or superseded by a later unboxed final
    statement is not a boxed final answer (``no_answer``); a last box never closed is ``parse_error``. It checks
    the form only; whether the answer is right is :mod:`rewards.math`'s job.

    >>> from harness import get_reward
    >>> fn = get_reward("boxed_present")
    >>> s = fn({}, "so the answer is \\\\boxed{\\\\frac{3}{4}}.")
    >>> s.value, s.answer
    (1.0, '\\\\frac{3}{4}')
    >>> fn({}, "the answer is 3/4").status, fn({}, "\\\\boxed{5}<think>\\\\boxed{3}").status
    ('no_answer', 'no_answer')
    """
    cmds = tuple(commands)
    if not cmds or not all(isinstance(c, str) and c.isalpha() for c in cmds):
        raise RewardParameterError(f"boxed_present: commands must be letter-only LaTeX command names, got {commands!r}")

    def score(sample: Sample, completion: str, dl: Deadline) -> Score:
        ex = extract_answer(completion, boxes=cmds)
        dl.check()
        if ex.answer is None:
            status = "parse_error" if ex.unclosed else "no_answer"
            return Score(value=0.0, status=status, info={"reason": ex.reason, **_answer_info(ex)})
        if ex.source != "boxed":
            reason = f"the final answer is not boxed (found as: {ex.source})"
            return Score(value=0.0, status="no_answer", info={"reason": reason, **_answer_info(ex)})
        return Score(value=1.0, answer=ex.answer[:_ANSWER_LOG_CHARS], info=_answer_info(ex))

    return _bounded("boxed_present", time_limit, score)


def _tag_pair(text: str, tag: str, dl: Deadline) -> tuple[float, tuple[int, int] | None]:
    """(credit, span): 0.5 for exactly one ``<tag>`` followed by something a reader sees, 0.5 more for exactly one
    ``</tag>`` after it closing that content; the span of the complete pair, if any. Tags around nothing (empty,
    invisible characters, no-op commands) earn nothing: a shell is no format."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    if text.count(open_t) != 1:
        return 0.0, None
    start, end = text.find(open_t), text.find(close_t)
    closed = text.count(close_t) == 1 and end > start  # a closing tag without its opening, or before it: unclosed
    if _shows_nothing(text[start + len(open_t) : end if closed else len(text)], dl):
        return 0.0, None
    if not closed:
        return 0.5, None
    return 1.0, (start, end + len(close_t))


def _tag_credits(text: str, tags: tuple[str, ...], dl: Deadline) -> dict[str, float]:
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


@reward("tag_count", isolation="inline", reads=())
def tag_count(*, tags: tuple[str, ...] = ("think", "answer"), time_limit: float = 2.0):
    """Partial credit per well-formed tag pair, in [0, 1].

    Each tag is worth ``1/len(tags)``: half for exactly one opening tag followed by visible content, half for
    exactly one closing tag after it closing that content, in the order of ``tags``: tags around nothing a reader
    sees earn nothing, and a pair that interleaves with another, or comes before an earlier tag's pair, loses its
    closing half (so do the later pairs when the first tag, the reasoning, is reopened after them and never
    closed). Per-tag credit is in ``info["tags"]``; ``answer`` is the final answer
    (:mod:`rewards.final_answer`, reasoning tag ``tags[0]``, answer tag ``tags[-1]``) when the last pair earns
    full credit. Useful early in training, when the strict ``think_answer_format`` is almost always 0.

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

    def score(sample: Sample, completion: str, dl: Deadline) -> Score:
        per_tag = _tag_credits(completion, names, dl)
        answer = None
        if len(names) > 1 and per_tag[names[-1]] == 1.0:
            answer = extract_answer(completion, tags=(names[0], names[-1])).answer
        return Score(
            value=sum(per_tag.values()) / len(names),
            answer=answer[:_ANSWER_LOG_CHARS] if answer else None,
            info={"tags": per_tag},
        )

    return _bounded("tag_count", time_limit, score)


@reward("repetition", isolation="inline", reads=())
def repetition(*, ngram_size: int = 3, max_penalty: float = -1.0, time_limit: float = 2.0):
    """Repetition penalty in ``[max_penalty, 0]``: the stronger of an n-gram penalty and a loop penalty.

    * n-gram (the paper's, as in open-r1): ``max_penalty * (1 - distinct n-grams / n-grams)`` over lower-cased
      words, split at whitespace and at invisible characters (words joined by zero-width spaces are still words).
    * loop: ``max_penalty * severity`` where the severity grows from 0 to 1 as the share of the text inside
      repeated 12-token runs goes from 0.25 to 0.65, read through a normalization that sees a counter
      (``0 again 1 again``), numbered lines (``Check 1: ...``), words joined by invisible characters and symbols
      without spaces (``\\boxed{5}\\boxed{5}``) as the loop they are (:mod:`rewards.loops`). Honest reasoning,
      which repeats words and short formulas but not whole runs, measures at most 0.11 on our set of long
      solutions: no loop penalty.

    ``info`` carries ``repeated_fraction``, ``ngrams``, ``loop_coverage`` and which penalty applied.

    >>> from harness import get_reward
    >>> fn = get_reward("repetition", ngram_size=2)
    >>> fn({}, "the cat sat on the mat").value
    0.0
    >>> fn({}, "go go go go go").value  # 4 bigrams, 1 distinct
    -0.75
    >>> get_reward("repetition")({}, " ".join(f"{i} again" for i in range(200))).value
    -1.0
    """
    if isinstance(ngram_size, bool) or not isinstance(ngram_size, int) or ngram_size < 1:
        raise RewardParameterError(f"repetition: ngram_size must be a positive integer, got {ngram_size!r}")
    if max_penalty > 0:
        raise RewardParameterError(f"repetition: max_penalty must be <= 0 (it is a penalty), got {max_penalty!r}")

    def score(sample: Sample, completion: str, dl: Deadline) -> Score:
        ws = words(completion)
        frac = ngram_repetition_fraction(ws, ngram_size)
        dl.check()
        coverage = loop_coverage(loop_tokens(completion), deadline=dl)
        ngram_value, loop_value = max_penalty * frac, max_penalty * loop_severity(coverage)
        value = min(ngram_value, loop_value)
        info = {
            "repeated_fraction": frac,
            "ngrams": max(0, len(ws) - ngram_size + 1),
            "loop_coverage": coverage,
            "penalty": "loop" if loop_value < ngram_value else "ngram",
        }
        return Score(value=value if value else 0.0, info=info)

    return _bounded("repetition", time_limit, score)
