"""The shapes of what the evaluator writes and hands between its modules: ``results.json``, its parts, and one line
of ``samples.jsonl``.

These files are the contract (scripts read them, ``harness report`` reads them), so each part is a ``TypedDict``:
a plain dict at run time, which ``json.dumps`` writes exactly as the untyped dicts were written, and a checked shape
where it is built (:mod:`evals.results`, :mod:`evals.runner`, :mod:`evals.task_run`) and read (:mod:`evals.cli`,
:mod:`evals.task_cli`, :mod:`evals.task_results`). Keys that are not identifiers (``pass@k``) use the functional
form. Key order in the files is the order in which the builders write them, not the order here.

This module holds types only: it computes, reads and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from harness.scoring import RewardSummary

__all__ = [
    "AtK",
    "AvgAtK",
    "PromptMetrics",
    "RewardResult",
    "TotalResult",
    "SuccessRule",
    "CompletionStats",
    "EvalMetrics",
    "DatasetRecord",
    "SeedsRecord",
    "EvaluationInfo",
    "TaskConfig",
    "TaskMetric",
    "EvalResults",
    "SampleRecord",
]


class AtK(TypedDict):
    """A per-prompt metric at one k: its mean over prompts, standard error, and how many prompts it covers."""

    value: float | None
    stderr: float | None
    prompts: int


class AvgAtK(AtK):
    """avg@k: the mean success over the ``k`` samples of a prompt, over prompts."""

    k: int


#: What :func:`evals.metrics.prompt_metrics` returns: pass@j and maj@j keyed by the int ``j``.
PromptMetrics = TypedDict(
    "PromptMetrics",
    {"prompts": int, "threshold": float, "pass@k": dict[int, AtK], "avg@k": AvgAtK, "maj@k": dict[int, AtK]},
)


class _ScoredOnNodes(TypedDict, total=False):
    nodes: dict[str, int]  # scored on a cluster (the Ray backend): calls per node


class RewardResult(RewardSummary, _ScoredOnNodes):
    """One reward in ``results.json``: its weight and parameters, then its summary over every completion."""

    weight: float
    params: dict[str, Any]


class TotalResult(TypedDict):
    """The weighted total over scored completions."""

    mean: float | None
    stderr: float | None
    scored: int


class SuccessRule(TypedDict):
    """What counts as a success for pass@k and maj@k: ``reward >= threshold``."""

    reward: str
    threshold: float


class CompletionStats(TypedDict):
    """How the completions ended: how many, the share cut at the token limit, backend errors, mean length."""

    count: int
    truncated_frac: float
    errors: int
    mean_tokens: float | None


#: What :func:`evals.results.build_results` computes from the records (``pass@k``/``maj@k`` keyed by ``str(j)``).
EvalMetrics = TypedDict(
    "EvalMetrics",
    {
        "rewards": dict[str, RewardResult],
        "total": TotalResult,
        "success": SuccessRule,
        "prompts": int,
        "pass@k": dict[str, AtK],
        "avg@k": AvgAtK,
        "maj@k": dict[str, AtK],
        "completions": CompletionStats,
    },
)


class DatasetRecord(TypedDict):
    """The held-out set as it was read."""

    source: str
    fingerprint: str
    prompts: int
    skipped_rows: int
    row_errors: list[str]
    fields: dict[str, Any]
    chat_template: bool
    system_prompt: str | None


class SeedsRecord(TypedDict):
    """The run's sampling seed and how each prompt's seed derives from it."""

    run_seed: int
    per_prompt: str


class EvaluationInfo(TypedDict):
    """Which evaluation this is (:func:`evals.identity.describe_evaluation`): also what its spans carry."""

    id: str
    own: bool
    data: str
    fingerprint: str
    prompts: int
    k: int
    temperature: Any
    top_p: Any
    max_new_tokens: Any
    seed: Any
    rewards: list[str]


class TaskConfig(TypedDict):
    """A task as it was run: source, prompt rendering, sampling, rewards, success rule."""

    task: str
    source: str
    split: str | None
    num_fewshot: int
    chat_template: bool
    system_prompt: str | None
    k: int
    generation: dict[str, Any]
    rewards: list[dict[str, Any]]
    success_reward: str | None
    success_threshold: float
    limit: int | None
    origin: str


class TaskMetric(TypedDict):
    """One number of one task, with its standard error and sample size."""

    task: str
    metric: str
    value: float | None
    stderr: float | None
    n: int
    config: TaskConfig


class _TaskKeys(TypedDict, total=False):
    task: TaskConfig
    results: list[TaskMetric]
    lm_eval: dict[str, Any]


class EvalResults(EvalMetrics, _TaskKeys):
    """``results.json`` of one evaluation: the checkpoint, the metrics, and every setting that made them.

    A task evaluation (:mod:`evals.task_run`) adds ``task``, ``results`` and ``lm_eval``.
    """

    checkpoint: str
    step: int | None
    run_id: str | None
    k: int
    dataset: DatasetRecord
    sampling: dict[str, Any]
    seeds: SeedsRecord
    backend: dict[str, Any]
    contamination: Mapping[str, Any]
    timing: dict[str, float]
    versions: dict[str, str | None]
    started: str
    finished: str
    evaluation: EvaluationInfo
    truncation_warning: bool  # more than TRUNCATION_WARN_FRAC of completions hit the token limit


class _SampleNodes(TypedDict, total=False):
    nodes: dict[str, str]  # scored on a cluster (the Ray backend): the node of each reward's call


class SampleRecord(_SampleNodes):
    """One line of ``samples.jsonl``: one completion, every reward's Score (as JSON) and the weighted total."""

    prompt_id: str
    sample_index: int
    seed: int
    prompt: str | list[dict[str, Any]]
    answer: Any
    completion: str
    finish_reason: str | None
    tokens: int | None
    scores: dict[str, dict[str, Any]]
    total: float | None
