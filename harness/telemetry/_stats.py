"""Summary statistics of one reward over one batch, as recorded on a ``reward/<name>`` span.

:class:`RewardStats` is what the trainer hands to :meth:`StepSpan.record_reward`. :meth:`RewardStats.from_values`
builds it from plain lists, so it can be checked against hand-computed values; :meth:`RewardStats.from_batch`
adapts a :class:`harness.scoring.BatchResult`. The statistics themselves (std with n - 1, the zero-variance rule,
percentiles) are :mod:`harness.stats`'s. This module does not run rewards and does not talk to OpenTelemetry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.stats import score_summary, zero_variance_group_frac

__all__ = ["RewardStats"]


@dataclass(frozen=True)
class RewardStats:
    """One reward's summary over one training batch.

    Attributes:
        mean: mean over scored samples; None when none is scored.
        std: sample std (n - 1) over scored samples; None below two.
        count: number of samples.
        scored: number of samples with a value.
        statuses: count per :data:`harness.types.Status`.
        zero_variance_group_frac: fraction of prompt groups with zero variance (see :mod:`harness.stats`).
        latency_p50_s: median scoring latency in seconds.
        latency_p99_s: 99th percentile scoring latency in seconds.
        weight: the reward's weight in the total (0 = logged only).
        nodes: calls per cluster node that scored them (the Ray scoring backend; empty on this machine's pool).
    """

    mean: float | None
    std: float | None
    count: int
    scored: int
    statuses: dict[str, int] = field(default_factory=dict)
    zero_variance_group_frac: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    weight: float = 1.0
    nodes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_values(
        cls,
        values: Sequence[float | None],
        statuses: Sequence[str] | None = None,
        *,
        latencies_s: Sequence[float] = (),
        group_size: int | None = None,
        weight: float = 1.0,
    ) -> RewardStats:
        """Build from per-sample values (None = unscored) and, optionally, their statuses and latencies."""
        if statuses is None:
            statuses = ["ok" if v is not None and not math.isnan(v) else "error" for v in values]
        summary = score_summary(values, statuses, latencies_s)
        return cls(
            mean=summary["mean"],
            std=summary["std"],
            count=summary["count"],
            scored=summary["scored"],
            statuses=summary["statuses"],
            zero_variance_group_frac=zero_variance_group_frac(values, group_size),
            latency_p50_s=summary["p50_s"],
            latency_p99_s=summary["p99_s"],
            weight=float(weight),
        )

    @classmethod
    def from_batch(
        cls, result: Any, name: str, group_size: int | None = None, *, weight: float | None = None
    ) -> RewardStats:
        """Summarise reward ``name`` of a :class:`harness.scoring.BatchResult`.

        Args:
            result: the batch result (``scores[name]`` and, when present, ``latency_s[name]`` are read).
            name: the reward spec name.
            group_size: completions per prompt, for the zero-variance group fraction.
            weight: the spec's weight; default: looked up in ``result.specs`` when it has them, else 1.0.

        Raises:
            KeyError: when ``result`` has no scores for ``name`` (the message lists the names it has).
        """
        scores = result.scores
        if name not in scores:
            raise KeyError(f"batch result has no reward {name!r}; it has {sorted(scores)}")
        if weight is None:
            weight = _weight_of(result, name)
        latencies: Mapping[str, Sequence[float]] = getattr(result, "latency_s", None) or {}
        stats = cls.from_values(
            [s.value for s in scores[name]],
            [str(s.status) for s in scores[name]],
            latencies_s=list(latencies.get(name, ())),
            group_size=group_size,
            weight=weight,
        )
        nodes: Mapping[str, Sequence[str | None]] = getattr(result, "nodes", None) or {}
        return replace(stats, nodes=dict(sorted(Counter(n for n in nodes.get(name, ()) if n).items())))


def _weight_of(result: Any, name: str) -> float:
    for spec in getattr(result, "specs", None) or ():
        if getattr(spec, "name", None) == name:
            return float(spec.weight)
    return 1.0
