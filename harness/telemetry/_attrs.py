"""What goes on a span: a reward's batch summary, attribute builders for the step, reward and evaluation spans,
links, and span ids.

:class:`RewardStats` is what the trainer hands to :meth:`StepSpan.record_reward`; :meth:`RewardStats.from_values`
builds it from plain lists (checked against hand-computed values), :meth:`RewardStats.from_batch` from a
:class:`harness.scoring.BatchResult`; the statistics themselves (std with n - 1, the zero-variance rule,
percentiles) are :mod:`harness.stats`'s. The rest are pure helpers for :mod:`harness.telemetry._run`: metrics
flattened to ``harness.metric.<key>`` numbers, a reward's summary as attributes, a per-sample
``gen_ai.evaluation.result`` event, a link from the ids a checkpoint saved, and the id generator every run's
tracer provider uses. Nothing here runs rewards, starts or ends a span.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanContext, TraceFlags

from harness.stats import score_summary, zero_variance_group_frac

__all__ = [
    "RewardStats",
    "num",
    "flat_metrics",
    "span_ids",
    "link_to",
    "reward_attributes",
    "eval_attributes",
    "sample_event",
    "UrandomIdGenerator",
]

logger = logging.getLogger("harness.telemetry._run")


@dataclass(frozen=True)
class RewardStats:
    """One reward's summary over one training batch.

    Attributes:
        mean: mean over scored samples; None when none is scored.
        std: sample std (n - 1) over scored samples; None below two.
        count: number of samples.
        scored: number of samples with a value.
        statuses: count per :data:`harness.types.Status`.
        zero_variance_group_frac: fraction of prompt groups with zero variance (see :mod:`harness.stats`).
        latency_p50_s: median scoring latency in seconds.
        latency_p99_s: 99th percentile scoring latency in seconds.
        weight: the reward's weight in the total (0 = logged only).
        nodes: calls per cluster node that scored them (the Ray scoring backend; empty on this machine's pool).
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
    nodes: dict[str, int] = field(default_factory=dict)

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
        if statuses is None:
            statuses = ["ok" if v is not None and not math.isnan(v) else "error" for v in values]
        summary = score_summary(values, statuses, latencies_s)
        return cls(
            mean=summary["mean"],
            std=summary["std"],
            count=summary["count"],
            scored=summary["scored"],
            statuses=summary["statuses"],
            zero_variance_group_frac=zero_variance_group_frac(values, group_size),
            latency_p50_s=summary["p50_s"],
            latency_p99_s=summary["p99_s"],
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
        if weight is None:  # the spec's weight when the result has its specs
            specs = getattr(result, "specs", None) or ()
            weight = next((float(s.weight) for s in specs if getattr(s, "name", None) == name), 1.0)
        latencies: Mapping[str, Sequence[float]] = getattr(result, "latency_s", None) or {}
        stats = cls.from_values(
            [s.value for s in scores[name]],
            [str(s.status) for s in scores[name]],
            latencies_s=list(latencies.get(name, ())),
            group_size=group_size,
            weight=weight,
        )
        nodes: Mapping[str, Sequence[str | None]] = getattr(result, "nodes", None) or {}
        return replace(stats, nodes=dict(sorted(Counter(n for n in nodes.get(name, ()) if n).items())))


def num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def flat_metrics(prefix: str, metrics: Mapping[str, Any]) -> dict[str, float]:
    """``prefix + key -> float`` for each value that is a number; None, text and the like are left out.

    The one flattener of metrics onto spans: the trainer's step metrics and the evaluator's headline numbers.

    >>> flat_metrics("m.", {"loss": 0.5, "pass@1": None, "n": 3, "note": "x"})
    {'m.loss': 0.5, 'm.n': 3.0}
    """
    out = {}
    for k, v in metrics.items():
        f = v if type(v) is float else num(v)
        if f is None:
            logger.debug("metric %s=%r is not a number; not recorded", k, v)
            continue
        out[prefix + k] = f
    return out


def span_ids(span: trace.Span) -> dict[str, str] | None:
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def link_to(ids: Mapping[str, Any] | None, attributes: dict[str, Any]) -> Link | None:
    if not ids or not ids.get("trace_id") or not ids.get("span_id"):
        return None
    try:
        ctx = SpanContext(
            trace_id=int(ids["trace_id"], 16),
            span_id=int(ids["span_id"], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except (TypeError, ValueError):
        logger.warning("checkpoint context has malformed span ids %r; span not linked", dict(ids))
        return None
    return Link(ctx, attributes) if ctx.is_valid else None


def reward_attributes(name: str, stats: RewardStats) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "harness.reward.name": name,
        "gen_ai.evaluation.name": name,
        "harness.reward.weight": stats.weight,
        "harness.reward.count": stats.count,
        "harness.reward.scored": stats.scored,
        "harness.reward.unscored": stats.count - stats.scored,
    }
    optional = {
        "harness.reward.mean": stats.mean,
        "gen_ai.evaluation.score.value": stats.mean,
        "harness.reward.std": stats.std,
        "harness.reward.zero_variance_group_frac": stats.zero_variance_group_frac,
        "harness.reward.latency_p50_s": stats.latency_p50_s,
        "harness.reward.latency_p99_s": stats.latency_p99_s,
    }
    attrs.update({k: float(v) for k, v in optional.items() if v is not None})
    for status, n in stats.statuses.items():
        attrs[f"harness.reward.status.{status}"] = int(n)
    if stats.nodes:  # the Ray backend: which nodes scored, and how many calls each (aligned lists)
        attrs["harness.reward.nodes"] = list(stats.nodes)
        attrs["harness.reward.node_calls"] = [int(n) for n in stats.nodes.values()]
    return attrs


#: keys of an evaluation's description and the attribute types they are written as (``harness.eval.<key>``)
_EVAL_KEYS: dict[str, type] = {
    "id": str,
    "own": bool,
    "data": str,
    "fingerprint": str,
    "prompts": int,
    "k": int,
    "temperature": float,
    "top_p": float,
    "max_new_tokens": int,
    "seed": int,
    "rewards": str,
}


def eval_attributes(evaluation: Mapping[str, Any] | None) -> dict[str, Any]:
    """``harness.eval.<key>`` attributes of an evaluation's description (unknown keys and None values are left out).

    >>> eval_attributes({"id": "ab12", "k": 8, "rewards": ["math", "format"], "other": 1})
    {'harness.eval.id': 'ab12', 'harness.eval.k': 8, 'harness.eval.rewards': 'math,format'}
    """
    out: dict[str, Any] = {}
    for key, value in (evaluation or {}).items():
        kind = _EVAL_KEYS.get(key)
        if kind is None or value is None:
            continue
        if key == "rewards" and not isinstance(value, str):
            value = ",".join(str(v) for v in value)
        out[f"harness.eval.{key}"] = kind(value)
    return out


def sample_event(name: str, sample_id: str, score: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.evaluation.name": name, "harness.sample.id": str(sample_id)}
    value = num(getattr(score, "value", score))
    if value is not None:
        attrs["gen_ai.evaluation.score.value"] = value
    status = getattr(score, "status", None)
    if status is not None:
        attrs["gen_ai.evaluation.score.label"] = str(status)
    answer = getattr(score, "answer", None)
    if answer is not None:
        attrs["harness.sample.answer"] = str(answer)[:256]
    attrs.update(_genai_info(getattr(score, "info", None)))
    return attrs


def _genai_info(info: Any) -> dict[str, Any]:
    """What an LLM-judge reward reports in ``Score.info`` (model, token usage, latency) under GenAI names."""
    if not isinstance(info, Mapping) or not isinstance(info.get("usage"), Mapping):
        return {}
    out: dict[str, Any] = {}
    if isinstance(info.get("model"), str):
        out["gen_ai.request.model"] = info["model"]
    for key in ("input_tokens", "output_tokens"):
        n = info["usage"].get(key)
        if isinstance(n, int) and not isinstance(n, bool):
            out[f"gen_ai.usage.{key}"] = n
    for src, dst in (("latency_s", "harness.judge.latency_s"), ("rubric", "harness.judge.rubric")):
        if isinstance(info.get(src), (str, int, float)) and not isinstance(info.get(src), bool):
            out[dst] = info[src]
    if isinstance(info.get("rationale"), str):
        out["gen_ai.evaluation.explanation"] = info["rationale"][:512]
    return out


_ID_RNG = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=lambda: _ID_RNG.seed(os.urandom(32)))


class UrandomIdGenerator(IdGenerator):
    """Trace and span ids from a generator seeded from the OS's random source, private to this module.

    The SDK's default draws from the global ``random`` module, which a training run seeds for reproducibility:
    two runs with the same seed would then reuse the same trace ids, and backends merge or drop the second
    run's spans. A private ``random.Random`` seeded from ``os.urandom`` (re-seeded in a forked child) is not
    touched by anyone's seeding and costs no system call per span.
    """

    def generate_span_id(self) -> int:
        while True:
            v = _ID_RNG.getrandbits(64)
            if v:
                return v

    def generate_trace_id(self) -> int:
        while True:
            v = _ID_RNG.getrandbits(128)
            if v:
                return v
