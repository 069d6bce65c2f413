"""The one definition of each statistic that scoring, telemetry, the trainer and the evaluator report.

Conventions (every summary in ``metrics.jsonl``, on spans and in evaluation results follows them):

- **Scored values only.** ``None`` and NaN mean *unscored* and are left out of every statistic; a count says how
  many were left out.
- **std is the sample standard deviation** with Bessel's correction (divides by n - 1), as TRL logs
  ``rewards/<name>/std`` and as :mod:`trainer.advantages` normalizes; it is ``None`` for fewer than two scored
  values.
- **Zero variance**: a prompt group has zero reward variance when fewer than two of its values are scored, or when
  its scored values span at most :data:`ZERO_VARIANCE_TOL` (GRPO gets no signal from it). The fraction of such
  groups counts every group, all-unscored ones included.
- **Percentiles** interpolate linearly between closest ranks; ``q`` is clamped to [0, 100].

Pure functions over plain sequences; this module imports neither torch nor numpy and runs no reward.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "mean_and_stderr",
    "ZERO_VARIANCE_TOL",
    "scored_values",
    "mean_std",
    "percentile",
    "group_has_zero_variance",
    "zero_variance_group_frac",
    "score_summary",
    "window_mean",
]

#: The largest spread of a group's scored values that still counts as no variance (float noise, not signal).
ZERO_VARIANCE_TOL = 1e-12


def scored_values(values: Iterable[float | None]) -> list[float]:
    """The values that are scored: not None and not NaN, as floats.

    >>> scored_values([1, None, float("nan"), 0.5])
    [1.0, 0.5]
    """
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample std (n - 1) over the scored values.

    Returns:
        ``(None, None)`` when no value is scored; ``(mean, None)`` when one is.

    >>> mean_std([1.0, None, 3.0, float("nan")])
    (2.0, 1.4142135623730951)
    """
    xs = scored_values(values)
    if not xs:
        return None, None
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, None
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, clamped) by linear interpolation between closest ranks; None for no values.

    >>> percentile([4.0, 1.0, 2.0, 3.0], 50), percentile([1.0, 2.0], 150)
    (2.5, 2.0)
    """
    xs = sorted(map(float, values))
    if not xs:
        return None
    pos = (len(xs) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def group_has_zero_variance(group: Iterable[float | None]) -> bool:
    """True when one prompt group's rewards give GRPO no signal (see the module docstring).

    >>> group_has_zero_variance([1.0, 1.0, None]), group_has_zero_variance([1.0, None]), group_has_zero_variance([0, 1])
    (True, True, False)
    """
    xs = scored_values(group)
    return len(xs) < 2 or max(xs) - min(xs) <= ZERO_VARIANCE_TOL


def zero_variance_group_frac(values: Sequence[float | None], group_size: int | None) -> float | None:
    """Fraction of prompt groups with zero reward variance; ``values`` holds ``group_size`` adjacent per prompt.

    Returns:
        None when ``group_size`` is None or below 1, or when there are no values.
    """
    if not group_size or group_size < 1 or not values:
        return None
    groups = [values[start : start + group_size] for start in range(0, len(values), group_size)]
    return sum(group_has_zero_variance(g) for g in groups) / len(groups)


def score_summary(
    values: Sequence[float | None], statuses: Iterable[str], latencies_s: Iterable[float] = ()
) -> dict[str, Any]:
    """One reward's summary over a batch: mean, std, count, scored, statuses, p50_s, p99_s.

    Args:
        values: one value per sample (None = unscored).
        statuses: one status per sample.
        latencies_s: the seconds each call took (empty: the percentiles are None).
    """
    mean, std = mean_std(values)
    latencies = list(latencies_s)
    return {
        "mean": mean,
        "std": std,
        "count": len(values),
        "scored": len(scored_values(values)),
        "statuses": dict(Counter(statuses)),
        "p50_s": percentile(latencies, 50),
        "p99_s": percentile(latencies, 99),
    }


def mean_and_stderr(values: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """``(mean, standard error, count)`` over the non-None values; stderr is None with fewer than 2 values.

    >>> mean_and_stderr([1.0, 0.0, None, 1.0, 0.0])
    (0.5, 0.28867513459481287, 4)
    """
    xs = scored_values(values)
    mean, std = mean_std(xs)
    return mean, (std / math.sqrt(len(xs)) if std is not None else None), len(xs)


def window_mean(points: Iterable[tuple[int, float | None]], since: int | None, until: int) -> tuple[float | None, int]:
    """``(mean, count)`` of the scored values at steps in ``(since, until]``; ``since`` None: from the first step.

    The training reward a checkpoint is compared with: the mean of the per-step means since the previous checkpoint.
    The trainer computes it for the checkpoint's context and ``harness report`` again from the spans; both call this.

    >>> window_mean([(1, 0.2), (2, None), (3, 0.4), (4, 0.9)], 1, 3)
    (0.4, 1)
    >>> window_mean([(1, 0.2), (3, 0.4)], None, 3), window_mean([], 2, 3)
    ((0.30000000000000004, 2), (None, 0))
    """
    xs = scored_values(v for step, v in points if (since is None or step > since) and step <= until)
    return (sum(xs) / len(xs) if xs else None), len(xs)
