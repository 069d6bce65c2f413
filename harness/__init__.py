"""grpo-harness: reward plugins, one scoring path, and the contracts the trainer and evaluator share.

The public names are few: the data types (:class:`Sample`, :class:`Score`, :class:`RewardSpec`), the registry
(:func:`reward`, :func:`get_reward`, :func:`list_rewards`), the scoring path (:func:`score_batch`,
:class:`ScoringSession`, :class:`BatchResult`, :func:`weighted_total`; imported on first use) and the root of the
error hierarchy (:class:`HarnessError`).
"""

from harness.errors import HarnessError
from harness.registry import get_reward, list_rewards, reward
from harness.types import RewardSpec, Sample, Score

__all__ = [
    "Sample",
    "Score",
    "RewardSpec",
    "reward",
    "get_reward",
    "list_rewards",
    "score_batch",
    "ScoringSession",
    "BatchResult",
    "weighted_total",
    "HarnessError",
]

__version__ = "0.1.0"

_SCORING = {"score_batch", "ScoringSession", "BatchResult", "weighted_total"}


def __getattr__(name: str):  # the scoring path (multiprocessing, workers) loads on first use
    if name in _SCORING:
        from harness import scoring

        return getattr(scoring, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
