"""Scores of a batch: per-reward Scores in input order, the weighted total, and a summary per reward.

Pure data and arithmetic; nothing here runs a reward.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from harness.stats import mean_and_stderr, score_summary
from harness.types import RewardSpec, Score

__all__ = ["BatchResult", "weighted_total", "reward_summary", "RewardSummary"]


def weighted_total(scores: Mapping[str, Score], specs: Sequence[RewardSpec]) -> float | None:
    """NaN-aware weighted sum of one completion's scores.

    Rewards with weight 0 are *log only* and never enter the total. Unscored components are left out of the
    sum; when every weighted component is unscored the total is ``None`` (unscored), never 0.

    >>> specs = [RewardSpec(name="a", weight=1.0), RewardSpec(name="b", weight=0.5), RewardSpec(name="c", weight=0)]
    >>> weighted_total({"a": Score(value=1.0), "b": Score(value=None, status="error"), "c": Score(value=9.0)}, specs)
    1.0
    >>> unscored = {"a": Score(value=None, status="timeout"), "b": Score(value=None, status="error")}
    >>> weighted_total(unscored, specs) is None
    True
    """
    total, any_scored = 0.0, False
    for spec in specs:
        if spec.weight == 0:
            continue
        s = scores.get(spec.name)
        if s is None or s.value is None:
            continue
        total += spec.weight * s.value
        any_scored = True
    return total if any_scored else None


class RewardSummary(TypedDict):
    """One reward's summary over a batch (:func:`reward_summary`)."""

    mean: float | None
    std: float | None
    count: int
    scored: int
    statuses: dict[str, int]
    p50_s: float | None
    p99_s: float | None
    stderr: float | None
    unscored: int


def reward_summary(scores: Sequence[Score], latencies: Sequence[float] = ()) -> RewardSummary:
    """One reward's summary over scores: what the trainer logs, ``harness score`` prints and ``results.json`` holds.

    Keys: ``mean``, ``std`` (sample std, n - 1) and ``stderr`` over scored values; ``count``, ``scored``,
    ``unscored``; ``statuses`` (count per status, sorted by status); ``p50_s``/``p99_s`` latency (None without
    latencies). The statistics are :mod:`harness.stats`'s; the standard error treats the values as independent.

    >>> s = reward_summary([Score(value=1.0), Score(value=0.0), Score.unscored("timeout", "slow")])
    >>> s["mean"], s["scored"], s["unscored"], s["statuses"]
    (0.5, 2, 1, {'ok': 2, 'timeout': 1})
    """
    values = [s.value for s in scores]
    summary = score_summary(values, [s.status for s in scores], latencies)
    return RewardSummary(  # score_summary's keys in its order, then this summary's own
        mean=summary["mean"],
        std=summary["std"],
        count=summary["count"],
        scored=summary["scored"],
        statuses=dict(sorted(summary["statuses"].items())),
        p50_s=summary["p50_s"],
        p99_s=summary["p99_s"],
        stderr=mean_and_stderr(values)[1],
        unscored=summary["count"] - summary["scored"],
    )


@dataclass
class BatchResult:
    """What :func:`harness.score_batch` returns.

    Attributes:
        specs: the reward specs, in order.
        scores: per spec name, one Score per input completion, in input order.
        latency_s: per spec name, wall seconds each call took (0 for cache hits).
        cached: per spec name, how many results came from the cache.
        nodes: per spec name, the cluster node that scored each call (the Ray backend); None for a call scored on
            this machine or answered from the cache.
    """

    specs: list[RewardSpec]
    scores: dict[str, list[Score]]
    latency_s: dict[str, list[float]] = field(default_factory=dict)
    cached: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, list[str | None]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.scores.values()), []))

    def values(self, name: str) -> list[float | None]:
        """The values of reward ``name`` (None where unscored)."""
        return [s.value for s in self.scores[name]]

    @property
    def totals(self) -> list[float | None]:
        """The weighted total of each completion (see :func:`weighted_total`)."""
        return [weighted_total({n: col[i] for n, col in self.scores.items()}, self.specs) for i in range(len(self))]

    def row(self, i: int) -> dict[str, Score]:
        """Every reward's Score for completion ``i``."""
        return {n: col[i] for n, col in self.scores.items()}

    def summary(self) -> dict[str, RewardSummary]:
        """Per reward: mean/std over scored, count, scored, statuses, p50_s, p99_s."""
        return {n: reward_summary(col, self.latency_s.get(n, ())) for n, col in self.scores.items()}

    def failures(self) -> dict[str, Counter]:
        """Per reward, the unscored statuses and how often (only rewards with any)."""
        out = {}
        for n, col in self.scores.items():
            c = Counter(s.status for s in col if s.value is None)
            if c:
                out[n] = c
        return out
