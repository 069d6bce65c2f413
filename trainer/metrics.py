"""The names of the metrics one training step records (``metrics.jsonl``, the console bar, ``harness.metric.*``).

Every module that writes or reads a step metric names it through these constants, so a misspelt name is a type
error (mypy) instead of a metric that is silently missing; the per-reward names are built by :func:`reward_key`.
The names follow TRL's where TRL has one (``reward/<name>/mean``, ``frac_reward_zero_std``,
``completions/clipped_ratio``). This module computes nothing.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "STEP",
    "TOTAL_MEAN",
    "TOTAL_STD",
    "TOTAL_SCORED_FRAC",
    "ZERO_STD_FRAC",
    "LOSS",
    "CLIP_LOW",
    "CLIP_HIGH",
    "KL",
    "ENTROPY",
    "GRAD_NORM",
    "LR",
    "MICRO_BATCHES",
    "IS_MEAN",
    "IS_MAX",
    "IS_CAPPED_FRAC",
    "MEAN_LENGTH",
    "MAX_LENGTH",
    "CLIPPED_RATIO",
    "TOKENS_PER_S",
    "GENERATE_S",
    "SCORE_SUBMIT_S",
    "SCORE_WAIT_S",
    "SCORE_WAIT_SAMPLING_S",
    "UPDATE_S",
    "STEP_S",
    "REWARD_CRITICAL_S",
    "REWARD_CRITICAL_PARTS",
    "DYNAMIC_ROUNDS",
    "DYNAMIC_GENERATED",
    "DYNAMIC_KEPT",
    "RewardStat",
    "REWARD_STATS",
    "reward_key",
]

#: what is recorded per reward spec
RewardStat = Literal["mean", "std", "unscored_frac", "statuses"]
REWARD_STATS: Final[tuple[RewardStat, ...]] = get_args(RewardStat)

STEP: Final = "step"

# rewards over the batch (loop); per reward see reward_key
TOTAL_MEAN: Final = "reward/total/mean"
TOTAL_STD: Final = "reward/total/std"
TOTAL_SCORED_FRAC: Final = "reward/total/scored_frac"
ZERO_STD_FRAC: Final = "frac_reward_zero_std"

# the update (trainer.update.UpdateTally)
LOSS: Final = "loss"
CLIP_LOW: Final = "clip_ratio/low_mean"
CLIP_HIGH: Final = "clip_ratio/high_mean"
KL: Final = "kl"
ENTROPY: Final = "entropy"
GRAD_NORM: Final = "grad_norm"
LR: Final = "lr"
MICRO_BATCHES: Final = "micro_batches"
IS_MEAN: Final = "is_ratio/mean"
IS_MAX: Final = "is_ratio/max"
IS_CAPPED_FRAC: Final = "is_ratio/capped_frac"

# the completions (loop)
MEAN_LENGTH: Final = "completions/mean_length"
MAX_LENGTH: Final = "completions/max_length"
CLIPPED_RATIO: Final = "completions/clipped_ratio"
TOKENS_PER_S: Final = "tokens_per_s"

# timing (collect and loop), seconds
GENERATE_S: Final = "timing/generate_s"
SCORE_SUBMIT_S: Final = "timing/score_submit_s"
SCORE_WAIT_S: Final = "timing/score_wait_s"
SCORE_WAIT_SAMPLING_S: Final = "timing/score_wait_s_sampling"
UPDATE_S: Final = "timing/update_s"
STEP_S: Final = "timing/step_s"
REWARD_CRITICAL_S: Final = "timing/reward_critical_s"
#: what REWARD_CRITICAL_S sums: the reward time nothing else overlapped (blocking submits and waits)
REWARD_CRITICAL_PARTS: Final = (SCORE_SUBMIT_S, SCORE_WAIT_S, SCORE_WAIT_SAMPLING_S)

# dynamic sampling (collect)
DYNAMIC_ROUNDS: Final = "dynamic/rounds"
DYNAMIC_GENERATED: Final = "dynamic/generated_groups"
DYNAMIC_KEPT: Final = "dynamic/kept_groups"


def reward_key(name: str, stat: RewardStat) -> str:
    """The metric of one reward spec: ``reward/<name>/<stat>``.

    >>> reward_key("math", "mean")
    'reward/math/mean'
    """
    return f"reward/{name}/{stat}"
