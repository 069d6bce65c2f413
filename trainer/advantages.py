"""Group-relative advantages (GRPO, DeepSeekMath 2402.03300 section 4.1.2) as pure tensor functions.

Rewards arrive as one flat tensor of ``num_groups * G`` values, group-major (the G completions of a prompt are
adjacent), with NaN for *unscored* samples. Unscored samples are excluded from their group's mean and std and
get no gradient; a group with fewer than two scored samples has no baseline and contributes no gradient.

Scaling (``scale``):
    ``group``: (r - mean_g) / (std_g + eps), the paper's form.
    ``batch``: (r - mean_g) / (std over every scored reward of the batch + eps), a more robust scale. "Every"
               includes a group's lone scored reward (a group with no baseline and no gradient): it is a sample
               of the same reward distribution, and leaving it out would make every other group's scale depend
               on whether its siblings happened to be scored (one sandbox timeout would move all advantages).
               Under data parallelism "the batch" is the global one: pass ``global_moments`` summed over ranks
               (:func:`batch_moments` on each rank, then an all-reduce), and each rank's advantages equal the
               single-process advantages of the union.
    ``none``:  r - mean_g, Dr. GRPO (2503.20783), which removes the std term's difficulty bias.

Standard deviations are the unbiased (n - 1) estimate, as in TRL; which groups have zero variance is
:func:`harness.stats.group_has_zero_variance`'s rule, the one every logged statistic uses. This module knows nothing
about models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from harness.stats import group_has_zero_variance

__all__ = ["GroupAdvantages", "group_advantages", "zero_variance_groups", "batch_moments", "std_from_moments"]

Scale = Literal["group", "batch", "none"]


@dataclass(frozen=True)
class GroupAdvantages:
    """The result of :func:`group_advantages`.

    Attributes:
        advantages: (N,) float; 0 where ``trainable`` is False.
        trainable: (N,) bool; False for unscored samples and for every sample of a group with < 2 scored.
        zero_variance: (num_groups,) bool; True when a group's scored rewards are all equal (or < 2 scored),
            by :func:`harness.stats.group_has_zero_variance`.
        group_mean: (num_groups,) float; NaN for groups with no scored sample.
        group_std: (num_groups,) float; NaN for groups with < 2 scored samples.
    """

    advantages: torch.Tensor
    trainable: torch.Tensor
    zero_variance: torch.Tensor
    group_mean: torch.Tensor
    group_std: torch.Tensor


def _masked_group_stats(r: torch.Tensor, scored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean, unbiased std, count) per row of (num_groups, G), ignoring unscored entries."""
    n = scored.sum(dim=1).to(r.dtype)  # (num_groups,)
    x = torch.where(scored, r, torch.zeros_like(r))
    mean = x.sum(dim=1) / n.clamp(min=1)
    dev = torch.where(scored, r - mean[:, None], torch.zeros_like(r))
    var = (dev * dev).sum(dim=1) / (n - 1).clamp(min=1)
    mean = torch.where(n > 0, mean, torch.full_like(mean, float("nan")))
    std = torch.where(n > 1, var.sqrt(), torch.full_like(var, float("nan")))
    return mean, std, n


def batch_moments(rewards: torch.Tensor) -> tuple[float, float, float]:
    """(count, sum, sum of squares) of the scored (non-NaN) rewards, in float64; sums over ranks add up.

    >>> batch_moments(torch.tensor([1.0, float("nan"), 3.0]))
    (2.0, 4.0, 10.0)
    """
    r = rewards.to(torch.float64).reshape(-1)
    r = r[~torch.isnan(r)]
    return float(r.numel()), float(r.sum()), float((r * r).sum())


def std_from_moments(moments: tuple[float, float, float]) -> float:
    """The unbiased std of the values that :func:`batch_moments` summarized (0 for fewer than two values)."""
    n, s, sq = moments
    if n < 2:
        return 0.0
    return max(0.0, (sq - s * s / n) / (n - 1)) ** 0.5


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    *,
    scale: Scale = "group",
    eps: float = 1e-4,
    global_moments: tuple[float, float, float] | None = None,
) -> GroupAdvantages:
    """Group-relative advantages with unscored (NaN) rewards excluded.

    Args:
        rewards: (N,) total rewards, group-major, NaN = unscored.
        group_size: G; N must be a multiple of it.
        scale: ``group``, ``batch`` or ``none`` (see the module docstring).
        eps: added to the std so that zero-variance groups give 0, not NaN.
        global_moments: for ``scale="batch"``, the (count, sum, sum of squares) of every scored reward of the
            global batch (summed over ranks); None: this tensor is the whole batch.

    Returns:
        :class:`GroupAdvantages`.

    >>> a = group_advantages(torch.tensor([1.0, 0.0, float("nan"), 1.0]), 2)
    >>> [round(x, 3) for x in a.advantages.tolist()], a.trainable.tolist()
    ([0.707, -0.707, 0.0, 0.0], [True, True, False, False])
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (N,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards.to(torch.float64).view(-1, group_size)
    scored = ~torch.isnan(r)
    mean, std, n = _masked_group_stats(r, scored)
    has_baseline = n >= 2  # (num_groups,)
    centered = torch.where(scored, r - torch.nan_to_num(mean)[:, None], torch.zeros_like(r))
    if scale == "group":
        adv = centered / (torch.nan_to_num(std)[:, None] + eps)
    elif scale == "batch":
        if global_moments is None:
            pooled = r[scored]  # every scored reward, lone ones included (module docstring)
            batch_std = pooled.std() if pooled.numel() > 1 else torch.zeros((), dtype=r.dtype)
        else:
            batch_std = torch.tensor(std_from_moments(global_moments), dtype=r.dtype)
        adv = centered / (batch_std + eps)
    elif scale == "none":
        adv = centered
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    trainable = scored & has_baseline[:, None]
    adv = torch.where(trainable, adv, torch.zeros_like(adv))
    zero_var = torch.tensor([group_has_zero_variance(group) for group in r.tolist()], dtype=torch.bool)
    return GroupAdvantages(
        advantages=adv.reshape(-1).to(rewards.dtype if rewards.is_floating_point() else torch.float32),
        trainable=trainable.reshape(-1),
        zero_variance=zero_var,
        group_mean=mean.to(torch.float32),
        group_std=std.to(torch.float32),
    )


def zero_variance_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(num_groups,) bool: True where a group cannot teach anything (equal scored rewards, or < 2 scored).

    DAPO's dynamic sampling drops these groups and samples more prompts.
    """
    return group_advantages(rewards, group_size, scale="none").zero_variance
