"""Summary statistics of one reward over one batch, as recorded on a ``reward/<name>`` span.

:class:`RewardStats` is what the trainer hands to :meth:`StepSpan.record_reward`. The helpers here are pure
functions over plain lists, so they can be checked against hand-computed values; :meth:`RewardStats.from_batch`
adapts a :class:`harness.scoring.BatchResult`. This module does not run rewards and does not talk to OpenTelemetry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RewardStats", "zero_variance_group_frac", "percentile", "mean_std"]


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation over the scored (not None, not NaN) values.

    Returns:
        ``(None, None)`` when no value is scored.
    """
    xs = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def zero_variance_group_frac(values: Sequence[float | None], group_size: int | None) -> float | None:
    """Fraction of prompt groups whose scored values are all equal (GRPO gets no signal from them).

    ``values`` holds ``group_size`` consecutive completions per prompt. Unscored values are left out of a group;
    a group with no scored value is left out of the fraction; a group with one scored value counts as zero
    variance (it has nothing to compare against).

    Returns:
        None when ``group_size`` is None or below 1, or when no group has a scored value.
    """
    if not group_size or group_size < 1:
        return None
    groups = 0
    flat = 0
    for start in range(0, len(values), group_size):
        xs = [v for v in values[start : start + group_size] if v is not None and not math.isnan(v)]
        if not xs:
            continue
        groups += 1
        if max(xs) - min(xs) <= 1e-12:
            flat += 1
    return flat / groups if groups else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks; None for no values."""
    return _percentile_sorted(sorted(map(float, values)), q)


def _percentile_sorted(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    pos = (len(xs) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class RewardStats:
    """One reward's summary over one training batch.

    Attributes:
        mean: mean over scored samples; None when none is scored.
        std: population std over scored samples.
        count: number of samples.
        scored: number of samples with a value.
        statuses: count per :data:`harness.types.Status`.
        zero_variance_group_frac: fraction of prompt groups with no spread (see :func:`zero_variance_group_frac`).
        latency_p50_s: median scoring latency in seconds.
        latency_p99_s: 99th percentile scoring latency in seconds.
        weight: the reward's weight in the total (0 = logged only).
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
        m, s = mean_std(values)
        scored = sum(1 for v in values if v is not None and v == v)  # (NaN != NaN)
        latencies = sorted(map(float, latencies_s))
        if statuses is None:
            statuses = ["ok" if v is not None and not math.isnan(v) else "error" for v in values]
        return cls(
            mean=m,
            std=s,
            count=len(values),
            scored=scored,
            statuses=dict(Counter(statuses)),
            zero_variance_group_frac=zero_variance_group_frac(values, group_size),
            latency_p50_s=_percentile_sorted(latencies, 50),
            latency_p99_s=_percentile_sorted(latencies, 99),
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
        return cls.from_values(
            [s.value for s in scores[name]],
            [str(s.status) for s in scores[name]],
            latencies_s=list(latencies.get(name, ())),
            group_size=group_size,
            weight=weight,
        )


def _weight_of(result: Any, name: str) -> float:
    for spec in getattr(result, "specs", None) or ():
        if getattr(spec, "name", None) == name:
            return float(spec.weight)
    return 1.0
