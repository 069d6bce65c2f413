"""Turn an evaluation's per-completion records into ``results.json`` and a console table.

A record is one line of ``samples.jsonl`` (see :mod:`evals.outputs`). :func:`build_results` computes, from the
records alone, the per-reward summaries, the weighted total, pass@k / avg@k / maj@k on the success reward, and
the share of completions that hit the token limit; the caller adds the run's identity (checkpoint, dataset,
sampling, versions). :func:`format_table` prints the numbers people compare.

Pure functions except :func:`package_versions`, which reads installed package metadata.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evals.metrics import mean_and_stderr, prompt_metrics
from evals.result_types import CompletionStats, EvalMetrics, RewardResult, SuccessRule, TotalResult
from harness.scoring import reward_summary
from harness.table import align_columns
from harness.types import RewardSpec, Score

__all__ = ["build_results", "format_table", "package_versions", "TRUNCATION_WARN_FRAC", "headline_metrics"]

#: Warn when more than this share of completions stopped at the token limit.
TRUNCATION_WARN_FRAC = 0.5

_PACKAGES = ("grpo-harness", "torch", "transformers", "datasets", "vllm", "math-verify", "pydantic", "numpy")


def package_versions() -> dict[str, str | None]:
    """Python and the installed versions of the packages that can change a score (None when not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


#: Records written before each status had one meaning: a value beside these was a judged program's verdict.
_LEGACY_VERDICTS = {"timeout": "time_limit", "error": "program_error"}


def _recorded(raw: Mapping[str, Any]) -> Score:
    if raw.get("value") is not None and raw.get("status") in _LEGACY_VERDICTS:
        raw = {**raw, "status": _LEGACY_VERDICTS[raw["status"]]}
    return Score.model_validate(raw)


def _scores(records: Sequence[Mapping[str, Any]], name: str) -> list[Score]:
    out = []
    for r in records:
        raw = (r.get("scores") or {}).get(name)
        out.append(_recorded(raw) if raw is not None else Score.unscored("error", "no score recorded"))
    return out


def build_results(
    records: Sequence[Mapping[str, Any]],
    specs: Sequence[RewardSpec],
    *,
    k: int,
    success_reward: str,
    threshold: float,
) -> EvalMetrics:
    """Metrics of an evaluation from its records (every completion of every prompt, in any order).

    Records are read back from ``samples.jsonl`` (older files included), so they are taken as plain mappings.

    Returns:
        ``{"rewards": {name: summary}, "total": {...}, "success": {...}, "pass@k": {...}, "avg@k": {...},
        "maj@k": {...}, "completions": {...}}``; ``pass@k`` and ``maj@k`` are keyed by the string ``str(k)``.
    """
    ordered = sorted(records, key=lambda r: (str(r["prompt_id"]), int(r["sample_index"])))
    rewards: dict[str, RewardResult] = {}
    for spec in specs:
        rewards[spec.name] = {
            "weight": spec.weight,
            "params": spec.model_dump()["params"],  # a plain copy of the read-only params
            **reward_summary(_scores(ordered, spec.name)),
        }
        nodes = Counter(n for r in ordered if (n := (r.get("nodes") or {}).get(spec.name)))
        if nodes:  # scored on a cluster (the Ray backend): calls per node
            rewards[spec.name]["nodes"] = dict(sorted(nodes.items()))
    total_mean, total_se, total_n = mean_and_stderr(r.get("total") for r in ordered)
    groups: dict[str, list[Score]] = {}
    for r, s in zip(ordered, _scores(ordered, success_reward), strict=True):
        groups.setdefault(str(r["prompt_id"]), []).append(s)
    pm = prompt_metrics(groups, k=k, threshold=threshold)
    finish: list[str | None] = [r.get("finish_reason") for r in ordered]
    tokens: list[int] = [t for r in ordered if isinstance(t := r.get("tokens"), int)]
    truncated = sum(f == "length" for f in finish) / len(finish) if finish else 0.0
    return {
        "rewards": rewards,
        "total": TotalResult(mean=total_mean, stderr=total_se, scored=total_n),
        "success": SuccessRule(reward=success_reward, threshold=threshold),
        "prompts": pm["prompts"],
        "pass@k": {str(j): v for j, v in pm["pass@k"].items()},
        "avg@k": pm["avg@k"],
        "maj@k": {str(j): v for j, v in pm["maj@k"].items()},
        "completions": CompletionStats(
            count=len(ordered),
            truncated_frac=truncated,
            errors=sum(f == "error" for f in finish),
            mean_tokens=sum(tokens) / len(tokens) if tokens else None,
        ),
    }


def headline_metrics(results: EvalMetrics) -> dict[str, Any]:
    """The headline numbers by name: pass@j, maj@j, avg@k, total/mean, completions/truncated_frac (None: not computed).

    The evaluation span records them with :meth:`harness.telemetry.EvalSpan.set_metrics`, whose one flattener turns
    them into ``harness.metric.<name>`` numbers and leaves out the None ones.
    """
    out: dict[str, Any] = {f"pass@{j}": v.get("value") for j, v in results.get("pass@k", {}).items()}
    out.update({f"maj@{j}": v.get("value") for j, v in results.get("maj@k", {}).items()})
    avg = results.get("avg@k", {})
    out[f"avg@{avg.get('k')}"] = avg.get("value")
    out["total/mean"] = results.get("total", {}).get("mean")
    out["completions/truncated_frac"] = results.get("completions", {}).get("truncated_frac") or 0.0
    return out


def _fmt(v: float | None, se: float | None = None) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if se is None else f"{v:.4f} ± {se:.4f}"


def _headline_ks(k: int) -> list[int]:
    ks = [1]
    while ks[-1] * 2 <= k:
        ks.append(ks[-1] * 2)
    if ks[-1] != k:
        ks.append(k)
    return ks


def format_table(results: EvalMetrics) -> str:
    """A plain-text summary: one row per reward (mean ± stderr, scored/count, statuses), then pass@k and maj@k."""
    rows = [("reward", "weight", "mean ± stderr", "scored", "statuses")]
    for name, r in results.get("rewards", {}).items():
        statuses = ", ".join(f"{s}={n}" for s, n in r.get("statuses", {}).items())
        rows.append(
            (
                name,
                f"{r.get('weight', 1.0):g}",
                _fmt(r.get("mean"), r.get("stderr")),
                f"{r.get('scored')}/{r.get('count')}",
                statuses,
            )
        )
    total = results.get("total", {})
    rows.append(("total", "", _fmt(total.get("mean"), total.get("stderr")), str(total.get("scored", "")), ""))
    lines = align_columns(rows)
    succ = results.get("success", {})
    k = int(results.get("avg@k", {}).get("k") or 1)  # avg@k is at the evaluation's k
    lines.append("")
    lines.append(f"success: {succ.get('reward')} >= {succ.get('threshold')}   prompts: {results.get('prompts')}")
    for label, per_k in (("pass@", results.get("pass@k", {})), ("maj@", results.get("maj@k", {}))):
        parts = []
        for j in _headline_ks(k):
            v = per_k.get(str(j))
            parts.append(f"{label}{j}={_fmt(v['value'], v['stderr']) if v else _fmt(None)}")
        lines.append("  ".join(parts))
    avg = results.get("avg@k", {})
    lines.append(
        f"avg@{avg.get('k')}={_fmt(avg.get('value'), avg.get('stderr'))}   "
        f"truncated: {100 * (results.get('completions', {}).get('truncated_frac') or 0):.1f}%"
    )
    return "\n".join(lines)
