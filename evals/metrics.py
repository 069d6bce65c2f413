"""Held-out metrics as pure functions: reward means, unbiased pass@k, avg@k, maj@k, standard errors.

Definitions (the ones the tests check against closed forms and hand values):

* **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): for a prompt with
  ``n`` samples of which ``c`` succeed, ``1 - C(n-c, k) / C(n, k)``, computed in the numerically stable product
  form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``; exactly 1 when ``n - c < k``. The dataset value is the mean over
  prompts.
* **avg@k**: the mean success over the ``k`` samples of a prompt, averaged over prompts; DeepSeek-R1 reports it
  as "pass@1" (sampled at temperature 0.6, top-p 0.95). It equals pass@1.
* **maj@k** (also cons@k): a majority vote over the normalized final answers of the first ``k`` samples; the
  prompt counts as solved when the winning answer is a successful one (judged by the reward's verdict on the
  first sample that gave it). Samples with no extracted answer do not
  vote; a prompt where nobody votes is unsolved. **Tie rule:** among answers with the top count, the one that
  appears first in sample order wins.
* **standard error**: the sample standard deviation (``ddof=1``) of the per-prompt values over
  ``sqrt(number of prompts)``: prompts are the independent units; the ``k`` samples of one prompt are not.

Unscored samples (``value is None``) are never counted as failures: they are left out of ``n`` for that prompt,
and a prompt with fewer than ``k`` scored samples is left out of pass@k and maj@k at that ``k`` (the result says
how many prompts each value covers).

This module does no I/O and runs no rewards; :mod:`evals.runner` feeds it the scores.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from evals.result_types import AtK, AvgAtK, PromptMetrics
from harness.stats import mean_and_stderr, scored_values
from harness.types import Score

__all__ = [
    "pass_at_k",
    "pass_at_k_all",
    "mean_and_stderr",
    "normalize_answer",
    "majority_vote",
    "prompt_metrics",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with ``n`` samples, ``c`` of them correct.

    >>> pass_at_k(10, 0, 1), pass_at_k(10, 10, 5), pass_at_k(4, 1, 1), pass_at_k(4, 2, 2)
    (0.0, 1.0, 0.25, 0.8333333333333333)

    Raises:
        ValueError: ``k`` not in ``1..n`` or ``c`` not in ``0..n``.
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_all(n: int, c: int) -> dict[int, float]:
    """pass@k for every ``k`` in ``1..n``."""
    return {k: pass_at_k(n, c, k) for k in range(1, n + 1)}


_BOXED = re.compile(r"\\boxed\s*\{(.*)\}", re.DOTALL)
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def normalize_answer(answer: str | None) -> str | None:
    """A canonical form of an extracted answer for voting; None for no answer.

    Strips whitespace, surrounding ``$``, a ``\\boxed{...}`` wrapper, a trailing period, thousands separators in
    numbers and ``\\text{}``/``\\left``/``\\right``; lowercases; writes numbers canonically (``4.0`` -> ``4``,
    ``0.50`` -> ``0.5``). It does not decide mathematical equivalence (``1/2`` and ``0.5`` stay apart): that is the
    reward's job, and the vote is over what the model wrote.

    >>> [normalize_answer(a) for a in ["  $4.0$ ", "\\\\boxed{1,000}", "Paris.", "", None, "\\\\frac{1}{2}"]]
    ['4', '1000', 'paris', None, None, '\\\\frac{1}{2}']
    """
    if answer is None:
        return None
    s = str(answer).strip()
    m = _BOXED.search(s)
    if m:
        s = m.group(1)
    s = s.strip().strip("$").strip()
    s = re.sub(r"\\text\{([^}]*)\}", r"\1", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\!", "")
    s = s.rstrip(".").strip().lower()
    s = re.sub(r"\s+", " ", s)
    no_commas = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    if _NUMBER.match(no_commas.replace(" ", "")):
        num = float(no_commas.replace(" ", ""))
        s = str(int(num)) if num.is_integer() and abs(num) < 1e16 else repr(num)
    return s or None


def majority_vote(answers: Sequence[str | None]) -> tuple[str | None, int]:
    """The most frequent non-None answer and its count; ties go to the answer seen first. ``(None, 0)`` if none.

    >>> majority_vote(["b", "a", "a", "b", None])
    ('b', 2)
    """
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None, 0
    top = max(counts.values())
    for a in answers:
        if a is not None and counts[a] == top:
            return a, top
    raise AssertionError("unreachable: a counted answer was not found")


def _ks(n: int) -> list[int]:
    return list(range(1, n + 1))


def prompt_metrics(
    groups: Mapping[str, Sequence[Score]],
    *,
    k: int,
    threshold: float = 1.0,
) -> PromptMetrics:
    """pass@k for every k <= ``k``, avg@k and maj@k from the success reward's scores grouped by prompt.

    Args:
        groups: prompt id -> the success reward's Scores of that prompt's samples, in sample order. A sample
            succeeds when ``value >= threshold``; its vote for maj@k is ``normalize_answer(score.answer)``.
        k: samples drawn per prompt (the largest k reported).
        threshold: the success threshold on the reward value.

    Returns:
        ``{"pass@k": {k: {"value", "stderr", "prompts"}}, "avg@k": {...}, "maj@k": {k: {...}}, "prompts": int}``
        with ``value`` None where no prompt has enough scored samples.
    """
    per_k_pass: dict[int, list[float]] = {j: [] for j in _ks(k)}
    per_k_maj: dict[int, list[float]] = {j: [] for j in _ks(k)}
    avg: list[float] = []
    for scores in groups.values():
        scored = [s for s in scores if s.value is not None]
        n = len(scored)
        if n == 0:
            continue
        ok = [v >= threshold for v in scored_values(s.value for s in scored)]
        c = sum(ok)
        avg.append(c / n)
        for j in _ks(min(k, n)):
            per_k_pass[j].append(pass_at_k(n, c, j))
            head = scored[:j]
            votes = [normalize_answer(s.answer) for s in head]
            winner, _ = majority_vote(votes)
            solved = winner is not None and ok[votes.index(winner)]
            per_k_maj[j].append(1.0 if solved else 0.0)

    def pack(xs: list[float]) -> AtK:
        mean, se, m = mean_and_stderr(xs)
        return AtK(value=mean, stderr=se, prompts=m)

    return {
        "prompts": len(groups),
        "threshold": threshold,
        "pass@k": {j: pack(per_k_pass[j]) for j in _ks(k)},
        "avg@k": AvgAtK(k=k, **pack(avg)),
        "maj@k": {j: pack(per_k_maj[j]) for j in _ks(k)},
    }
