"""What goes on a span: :class:`RewardStats` (a reward's batch summary; the statistics are :mod:`harness.stats`'s),
the attributes of reward, evaluation and per-sample records, links from saved ids, and the id generator.

Pure helpers for :mod:`harness.telemetry._run`: nothing here runs rewards, starts or ends a span.
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

from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanContext, TraceFlags

from harness.stats import score_summary, zero_variance_group_frac

__all__ = ["RewardStats", "flat_metrics", "reward_attributes", "eval_attributes", "sample_event", "UrandomIdGenerator"]

logger = logging.getLogger("harness.telemetry")


@dataclass(frozen=True)
class RewardStats:
    """One reward's summary over one training batch: mean and sample std (n - 1) over scored samples (None when
    too few), ``count`` samples of which ``scored`` have a value, counts per status, the fraction of zero-variance
    prompt groups, scoring latency percentiles, the spec's weight (0 = logged only) and the calls per cluster node
    that scored them (the Ray backend)."""

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
        s, zv = score_summary(values, statuses, latencies_s), zero_variance_group_frac(values, group_size)
        return cls(
            s["mean"], s["std"], s["count"], s["scored"], s["statuses"], zv, s["p50_s"], s["p99_s"], float(weight)
        )

    @classmethod
    def from_batch(
        cls, result: Any, name: str, group_size: int | None = None, *, weight: float | None = None
    ) -> RewardStats:
        """Summarise reward ``name`` of a :class:`harness.scoring.BatchResult` (its ``scores`` and, when present,
        ``latency_s``, ``nodes`` and ``specs``, whose weight is the default ``weight``, else 1.0).

        Raises:
            KeyError: when ``result`` has no scores for ``name`` (the message lists the names it has).
        """
        if name not in result.scores:
            raise KeyError(f"batch result has no reward {name!r}; it has {sorted(result.scores)}")
        if weight is None:
            specs = getattr(result, "specs", None) or ()
            weight = next((float(s.weight) for s in specs if getattr(s, "name", None) == name), 1.0)
        scores = result.scores[name]
        latencies = (getattr(result, "latency_s", None) or {}).get(name, ())
        values, statuses = [s.value for s in scores], [str(s.status) for s in scores]
        stats = cls.from_values(values, statuses, latencies_s=list(latencies), group_size=group_size, weight=weight)
        nodes = (getattr(result, "nodes", None) or {}).get(name, ())
        return replace(stats, nodes=dict(sorted(Counter(n for n in nodes if n).items())))


def num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def flat_metrics(prefix: str, metrics: Mapping[str, Any]) -> dict[str, float]:
    """``prefix + key -> float`` for each value that is a number; None, text and the like are left out.

    >>> flat_metrics("m.", {"loss": 0.5, "pass@1": None, "n": 3, "note": "x"})
    {'m.loss': 0.5, 'm.n': 3.0}
    """
    values = ((k, v if type(v) is float else num(v)) for k, v in metrics.items())
    return {prefix + k: f for k, f in values if f is not None}


def hex_ids(ctx: SpanContext) -> dict[str, str]:
    """``trace_id`` and ``span_id`` of a span context in hex, as OTLP/JSON and the checkpoint context write them
    (none for the invalid context of a span that is not recorded)."""
    return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"} if ctx.is_valid else {}


def link_to(ids: Mapping[str, Any] | None, attributes: dict[str, Any]) -> Link | None:
    """A link to the span whose hex ids ``ids`` holds (None when it holds none; malformed ones are logged)."""
    if not ids or not ids.get("trace_id") or not ids.get("span_id"):
        return None
    try:
        ctx = SpanContext(int(ids["trace_id"], 16), int(ids["span_id"], 16), True, TraceFlags(TraceFlags.SAMPLED))
    except (TypeError, ValueError):
        logger.warning("checkpoint context has malformed span ids %r; span not linked", dict(ids))
        return None
    return Link(ctx, attributes) if ctx.is_valid else None


def node_attributes(nodes: Mapping[str, int] | None) -> dict[str, Any]:
    """The Ray backend's nodes that scored and their calls, as aligned lists (none without nodes)."""
    if not nodes:
        return {}
    return {"harness.reward.nodes": list(nodes), "harness.reward.node_calls": [int(n) for n in nodes.values()]}


def reward_attributes(name: str, stats: RewardStats) -> dict[str, Any]:
    """The attributes of a ``reward/<name>`` span: the summary under ``harness.reward.*`` and, its mean, under
    GenAI's ``gen_ai.evaluation.*`` names; statistics that are None are left out."""
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
    attrs |= {k: float(v) for k, v in optional.items() if v is not None}
    attrs |= {f"harness.reward.status.{status}": int(n) for status, n in stats.statuses.items()}
    return attrs | node_attributes(stats.nodes)


#: keys of an evaluation's description and the types they are written as (``harness.eval.<key>``)
EVAL_KEYS: dict[str, type] = {"own": bool, "temperature": float, "top_p": float}
EVAL_KEYS |= dict.fromkeys(("id", "data", "fingerprint", "rewards"), str)
EVAL_KEYS |= dict.fromkeys(("prompts", "k", "max_new_tokens", "seed"), int)


def eval_attributes(evaluation: Mapping[str, Any] | None) -> dict[str, Any]:
    """``harness.eval.<key>`` attributes of an evaluation's description (unknown keys and None values are left out).

    >>> eval_attributes({"id": "ab12", "k": 8, "rewards": ["math", "format"], "other": 1})
    {'harness.eval.id': 'ab12', 'harness.eval.k': 8, 'harness.eval.rewards': 'math,format'}
    """
    out: dict[str, Any] = {}
    for key, value in (evaluation or {}).items():
        if key in EVAL_KEYS and value is not None:
            if key == "rewards" and not isinstance(value, str):
                value = ",".join(map(str, value))
            out[f"harness.eval.{key}"] = EVAL_KEYS[key](value)
    return out


def sample_event(name: str, sample_id: str, score: Any) -> dict[str, Any]:
    """A ``gen_ai.evaluation.result`` event's attributes; an LLM judge's ``Score.info`` adds model, token usage,
    rationale, latency and rubric under GenAI names."""
    attrs: dict[str, Any] = {"gen_ai.evaluation.name": name, "harness.sample.id": str(sample_id)}
    if (value := num(getattr(score, "value", score))) is not None:
        attrs["gen_ai.evaluation.score.value"] = value
    if (status := getattr(score, "status", None)) is not None:
        attrs["gen_ai.evaluation.score.label"] = str(status)
    if (answer := getattr(score, "answer", None)) is not None:
        attrs["harness.sample.answer"] = str(answer)[:256]
    info = getattr(score, "info", None)
    if not isinstance(info, Mapping) or not isinstance(info.get("usage"), Mapping):
        return attrs
    if isinstance(info.get("model"), str):
        attrs["gen_ai.request.model"] = info["model"]
    for key in ("input_tokens", "output_tokens"):
        if isinstance(n := info["usage"].get(key), int) and not isinstance(n, bool):
            attrs[f"gen_ai.usage.{key}"] = n
    for src, dst in (("latency_s", "harness.judge.latency_s"), ("rubric", "harness.judge.rubric")):
        if isinstance(v := info.get(src), (str, int, float)) and not isinstance(v, bool):
            attrs[dst] = v
    if isinstance(info.get("rationale"), str):
        attrs["gen_ai.evaluation.explanation"] = info["rationale"][:512]
    return attrs


_ID_RNG = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=lambda: _ID_RNG.seed(os.urandom(32)))


class UrandomIdGenerator(IdGenerator):
    """Ids from a private generator seeded from ``os.urandom`` (re-seeded in a forked child).

    The SDK's default draws from the global ``random``, which a training run seeds: two runs with one seed would
    reuse trace ids, and backends merge or drop the second run's spans. No system call per span.
    """

    def generate_span_id(self) -> int:
        return _ID_RNG.getrandbits(64) or self.generate_span_id()

    def generate_trace_id(self) -> int:
        return _ID_RNG.getrandbits(128) or self.generate_trace_id()
