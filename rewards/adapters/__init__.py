"""Adapters that hand grpo-harness rewards to other trainers, still scored through :func:`harness.score_batch`.

* :func:`as_trl_reward_funcs`: TRL's ``reward_funcs`` contract (``GRPOTrainer(reward_funcs=...)``).
* :func:`as_verl_compute_score` / :func:`as_verl_batch_compute_score`: verl's ``custom_reward_function``.
"""

from rewards.adapters._common import completion_text
from rewards.adapters.trl import TrlRewardFunc, as_trl_reward_funcs, trl_reward_weights
from rewards.adapters.verl import as_verl_batch_compute_score, as_verl_compute_score

__all__ = [
    "as_trl_reward_funcs",
    "trl_reward_weights",
    "TrlRewardFunc",
    "as_verl_compute_score",
    "as_verl_batch_compute_score",
    "completion_text",
]
