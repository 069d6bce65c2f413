"""The one scoring path: every reward the trainer and the evaluator compute runs through here.

:func:`score_batch` scores a batch and waits; :class:`ScoringSession` submits batches and collects them later, so
scoring overlaps generation. Rewards run in warm worker processes with a hard wall-clock kill per call, on this
machine (the default) or on Ray actors across a cluster (:func:`scoring_pool`, ``scoring.backend: ray``).
"""

from harness.scoring._backend import scoring_pool
from harness.scoring._pool import WorkerPool, default_pool, shutdown_default_pool
from harness.scoring._result import BatchResult, RewardSummary, reward_summary, weighted_total
from harness.scoring._session import DEFAULT_TIMEOUT_S, PendingBatch, ScoringSession, score_batch
from harness.scoring._stream import Submitted, score_while_generating
from harness.scoring._task import TaskPool

__all__ = [
    "score_batch",
    "ScoringSession",
    "PendingBatch",
    "score_while_generating",
    "Submitted",
    "BatchResult",
    "weighted_total",
    "reward_summary",
    "RewardSummary",
    "WorkerPool",
    "TaskPool",
    "scoring_pool",
    "default_pool",
    "shutdown_default_pool",
    "DEFAULT_TIMEOUT_S",
]
