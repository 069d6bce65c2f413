"""Task results as lm-evaluation-harness users script against them, and the table across checkpoints and tasks.

Each task evaluation's ``results.json`` keeps everything the evaluator writes and adds:

* ``task``: the task's configuration as run (:class:`TaskConfig`);
* ``results``: a list of :class:`TaskMetric` entries ``{"task", "metric", "value", "stderr", "n", "config"}``;
* ``lm_eval``: the same numbers in lm-evaluation-harness's layout, ``{"results": {task: {"alias": task,
  "pass@1,none": v, "pass@1_stderr,none": se, ...}}, "n-samples": {task: {"original", "effective"}},
  "configs": {task: config}}``.

Metrics: ``pass@1`` (= avg@k, the mean success over the k samples of a prompt), ``pass@k`` and ``maj@k`` when
k > 1, all on the task's success reward; ``reward/<name>`` for every reward's mean. Standard errors: for the
pass/maj metrics, the sample standard deviation (n-1) of the per-prompt values over sqrt(prompts), ``n`` =
prompts; for ``reward/<name>``, the same over the scored completions, ``n`` = scored completions
(:mod:`evals.metrics`, :func:`harness.stats.mean_and_stderr`).

The run summary (:func:`summary`) holds every (checkpoint, task) entry and the console table: one row per
checkpoint, one column per task metric, ``value ± stderr``. Pure functions; the CLI writes the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from evals.result_types import EvalResults, TaskConfig, TaskMetric
from harness.table import align_columns

__all__ = [
    "TaskConfig",
    "TaskMetric",
    "CheckpointMetric",
    "EvaluationRecord",
    "TaskSummary",
    "task_metrics",
    "lm_eval_section",
    "format_task_table",
    "summary",
    "TABLE_METRICS",
]


class CheckpointMetric(TaskMetric):
    """A :class:`TaskMetric` of one checkpoint, in the run summary."""

    checkpoint: str
    checkpoint_path: str


class EvaluationRecord(TypedDict):
    """One (checkpoint, task) evaluation: where its files are and its ``results.json`` content."""

    checkpoint: str
    task: str
    output_dir: str
    results: EvalResults


class TaskSummary(TypedDict):
    """The run summary written to ``<output>/results.json`` (see :func:`summary`)."""

    results: list[CheckpointMetric]
    evaluations: list[dict[str, str]]
    table: str
    stderr: str
    lm_eval: dict[str, dict[str, Any]]


#: The metrics the console table shows per task (when present).
TABLE_METRICS = ("pass@1", "pass@k", "maj@k")


def task_metrics(task: str, results: EvalResults, config: TaskConfig) -> list[TaskMetric]:
    """The entries of one task evaluation from its ``results.json`` content.

    >>> res = {"k": 1, "pass@k": {"1": {"value": 0.5, "stderr": 0.5, "prompts": 2}}, "maj@k": {}, "rewards": {}}
    >>> [(m["metric"], m["value"], m["n"]) for m in task_metrics("t", res, {})]  # type: ignore[arg-type]
    [('pass@1', 0.5, 2)]
    """
    k = int(results.get("k") or 1)
    out: list[TaskMetric] = []

    def add(metric: str, v: Mapping[str, Any] | None, n_key: str) -> None:
        if v:
            n = int(v.get(n_key) or 0)
            out.append(
                TaskMetric(task=task, metric=metric, value=v.get("value"), stderr=v.get("stderr"), n=n, config=config)
            )

    add("pass@1", results.get("pass@k", {}).get("1"), "prompts")
    if k > 1:
        add(f"pass@{k}", results.get("pass@k", {}).get(str(k)), "prompts")
        add(f"maj@{k}", results.get("maj@k", {}).get(str(k)), "prompts")
    for name, r in results.get("rewards", {}).items():
        add(f"reward/{name}", {"value": r.get("mean"), "stderr": r.get("stderr"), "n": r.get("scored")}, "n")
    return out


def lm_eval_section(per_task: Mapping[str, EvalResults]) -> dict[str, Any]:
    """lm-evaluation-harness's ``results`` / ``n-samples`` / ``configs`` layout from task results (each holding its
    ``results`` entries and ``dataset``); the filter name is ``none``, as lm-eval writes it without filters."""
    results: dict[str, dict[str, Any]] = {}
    n_samples: dict[str, dict[str, int]] = {}
    configs: dict[str, Any] = {}
    for task, res in per_task.items():
        row: dict[str, Any] = {"alias": task}
        for m in res.get("results", []):
            row[f"{m['metric']},none"] = m["value"]
            row[f"{m['metric']}_stderr,none"] = m["stderr"]
        results[task] = row
        ds = res.get("dataset", {})
        n_samples[task] = {
            "original": int(ds.get("prompts", 0)) + int(ds.get("skipped_rows", 0)),
            "effective": int(ds.get("prompts", 0)),
        }
        configs[task] = res.get("task")
    return {"results": results, "n-samples": n_samples, "configs": configs}


def _fmt(v: float | None, se: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if se is None else f"{v:.4f} ± {se:.4f}"


def _shown(metric: str) -> bool:
    return metric == "pass@1" or metric.startswith(("pass@", "maj@"))


def format_task_table(entries: Sequence[CheckpointMetric]) -> str:
    """Rows = checkpoints (in order of appearance), columns = ``task/metric`` for pass@1, pass@k, maj@k.

    >>> cfg = {"task": "gsm8k"}
    >>> e = [{"checkpoint": "step-1", "checkpoint_path": "x", "task": "gsm8k", "metric": "pass@1", "value": 0.25,
    ...       "stderr": 0.1, "n": 20, "config": cfg}]
    >>> print(format_task_table(e))  # type: ignore[arg-type]
    checkpoint  gsm8k/pass@1 (n=20)
    ----------  -------------------
    step-1      0.2500 ± 0.1000
    """
    rows: list[str] = list(dict.fromkeys(e["checkpoint"] for e in entries))
    cols: list[tuple[str, str]] = list(dict.fromkeys((e["task"], e["metric"]) for e in entries if _shown(e["metric"])))
    cell = {(e["checkpoint"], e["task"], e["metric"]): e for e in entries}
    ns = {(e["task"], e["metric"]): e["n"] for e in entries}
    header = ["checkpoint"] + [f"{t}/{m} (n={ns[(t, m)]})" for t, m in cols]
    table = [tuple(header)]
    for r in rows:
        vals = [cell.get((r, t, m)) for t, m in cols]
        table.append(tuple([r] + [_fmt(v["value"], v["stderr"]) if v else "-" for v in vals]))
    return "\n".join(align_columns(table, rule=True))


def summary(entries: Sequence[CheckpointMetric], evaluations: Sequence[EvaluationRecord]) -> TaskSummary:
    """The run summary: every entry, where each evaluation's files are, the table, and lm-eval's layout per
    checkpoint (``lm_eval[checkpoint]["results"][task]["pass@1,none"]``)."""
    per_ckpt: dict[str, dict[str, EvalResults]] = {}
    for ev in evaluations:
        per_ckpt.setdefault(ev["checkpoint"], {})[ev["task"]] = ev["results"]
    return TaskSummary(
        results=list(entries),
        evaluations=[
            {"checkpoint": e["checkpoint"], "task": e["task"], "output_dir": e["output_dir"]} for e in evaluations
        ],
        table=format_task_table(entries),
        stderr="sample std (n-1) of per-prompt values / sqrt(prompts); reward/<name>: over scored completions",
        lm_eval={ck: lm_eval_section(tasks) for ck, tasks in per_ckpt.items()},
    )
