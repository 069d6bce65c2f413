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

This module registers the rewards, checks their parameters and turns what it finds into scores; the tag structure
it reads (tag blocks, empty shells, the reasoning/answer split, per-tag credit) is :mod:`rewards._format_tags`.
What it deliberately does not do: judge the *content* of an answer (see :mod:`rewards.math`), or count tokens
(length shaping, which can use a tokenizer, lives in :mod:`rewards.length`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Literal

from harness.errors import RewardParameterError
from harness.registry import reward
from harness.types import Sample, Score
from rewards._format_tags import answer_part, empty_shell, shows_nothing, tag_credits, think_part
from rewards.final_answer import BOX_COMMANDS, Extraction, extract_answer
from rewards.loops import loop_coverage, loop_severity, loop_tokens, ngram_repetition_fraction, words
from rewards.visible import Deadline, OutOfTime, is_placeholder

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
        shell = empty_shell(m.group(0))
        if shell is not None:
            return Score(value=0.0, status="no_answer", info={"reason": f"the match is an empty shell: {shell}"})
        return Score(value=1.0, answer=m.group(0)[:_ANSWER_LOG_CHARS], info={"span": [m.start(), m.end()]})

    return score


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
        think, rest, why = think_part(text, think_tag, think_prefilled, dl)
        if think is None:
            return Score(value=0.0, status="parse_error", info={"reason": why})
        if answer_tag is None:
            if shows_nothing(rest, dl):
                return Score(value=0.0, status="no_answer", info={"reason": "no visible text after the reasoning"})
            block = rest.strip()
        else:
            found, status, why = answer_part(rest, answer_tag, dl)
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
        per_tag = tag_credits(completion, names, dl)
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
