"""The tracing API the trainer and the evaluator call: :class:`RunTelemetry` and its step and evaluation spans.

Span tree (names and attributes are listed in ``docs/TRACING.md``)::

    train.step                 CHAIN      one trace per training step
      reward/<name>            EVALUATOR  mean, std, counts per status, zero-variance groups, latency
    eval.checkpoint            CHAIN      one trace per evaluated checkpoint, linked to that step's train.step
      eval.reward/<name>       EVALUATOR  held-out score beside the training mean, linked to reward/<name>

Every span repeats ``harness.run.id``, ``harness.train.step`` and ``session.id`` (= run id), so backends that
drop links can join by attribute. A run has its own :class:`TracerProvider` (never the global one); the file
store and the OTLP exporter sit behind the SDK's batch processors, so ending a span never writes or sends. This
module knows nothing of trainers or checkpoint files: the caller saves :meth:`RunTelemetry.checkpoint_context`.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, Status, StatusCode

from harness.cfg.telemetry import TelemetrySection
from harness.errors import ConfigError
from harness.stats import window_mean
from harness.telemetry._attrs import (
    RewardStats,
    UrandomIdGenerator,
    eval_attributes,
    flat_metrics,
    hex_ids,
    link_to,
    node_attributes,
    num,
    reward_attributes,
    sample_event,
)
from harness.telemetry._export import ExportProcessor, OtlpDelivery, resolve_otlp
from harness.telemetry._store import FileSpanExporter

__all__ = ["RunTelemetry", "StepSpan", "EvalSpan", "TRACES_FILE", "CONTEXT_VERSION"]

logger = logging.getLogger(__name__)

TRACES_FILE = "traces.jsonl"
CONTEXT_VERSION = 1
_STORE_QUEUE = 1 << 16  # spans waiting for the file store's thread: complete unless that many pile up in a second


@dataclass
class _Span:
    _tel: RunTelemetry
    step: int
    span: trace.Span

    def set_metrics(self, metrics: Mapping[str, float | None]) -> None:
        """Record flat metrics (loss, kl, pass@k, ...) as ``harness.metric.<key>`` numbers; None is left out."""
        self.span.set_attributes(flat_metrics("harness.metric.", metrics))

    def _child(self, name: str, attrs: dict[str, Any], links: Sequence[Link] = ()) -> trace.Span:
        """A child span of this one (started, not made current), with the run's common attributes."""
        parent = trace.set_span_in_context(self.span, Context())
        attrs = {**self._tel._common(self.step, "EVALUATOR"), **attrs}
        return self._tel._tracer.start_span(name, parent, attributes=attrs, links=links or None)


@dataclass
class StepSpan(_Span):
    """The ``train.step`` span of one training step; returned by :meth:`RunTelemetry.train_step`."""

    rewards: dict[str, dict[str, Any]] = field(default_factory=dict)

    def record_reward(self, name: str, stats: RewardStats, samples: Sequence[tuple[str, Any]] | None = None) -> None:
        """Add a ``reward/<name>`` child span with ``stats``; of ``samples`` (``(sample_id, Score)`` pairs), up to
        ``sample_records`` (config, default 0 = off), drawn with a per-step seed, become ``gen_ai.evaluation.result``
        events."""
        span = self._child(f"reward/{name}", reward_attributes(name, stats))
        k, samples = self._tel.config.sample_records, samples or ()
        if 0 < k < len(samples):
            rng = random.Random(f"{self._tel.run_id}/{self.step}/{name}")
            samples = [samples[i] for i in sorted(rng.sample(range(len(samples)), k))]
        for sid, score in samples if k > 0 else ():
            span.add_event("gen_ai.evaluation.result", sample_event(name, sid, score))
        span.end()
        self.rewards[name] = {**hex_ids(span.get_span_context()), "mean": stats.mean}


@dataclass
class EvalSpan(_Span):
    """The ``eval.checkpoint`` span of one evaluated checkpoint; returned by :meth:`RunTelemetry.eval_checkpoint`."""

    _ctx: Mapping[str, Any]
    _evaluation: dict[str, Any]

    def record_reward(
        self,
        name: str,
        heldout: float | None,
        metrics: Mapping[str, float] | None = None,
        *,
        nodes: Mapping[str, int] | None = None,
    ) -> None:
        """Add an ``eval.reward/<name>`` child span: the held-out score (None: nothing could be scored) beside the
        training mean of the checkpoint context, further flat metrics (``harness.metric.<key>``) and the Ray
        backend's ``nodes`` (calls per node); linked to the ``reward/<name>`` span of the checkpoint's step when
        the context has it."""
        train = (self._ctx.get("rewards") or {}).get(name) or {}
        train_mean, held = num(train.get("train_mean")), None if heldout is None else float(heldout)
        attrs = {"harness.reward.name": name, **self._evaluation, "gen_ai.evaluation.name": name}
        scores = {"heldout": held, "train_mean": train_mean}
        scores["gap"] = train_mean - held if train_mean is not None and held is not None else None
        attrs |= {f"harness.reward.{k}": v for k, v in scores.items() if v is not None}
        attrs |= {"gen_ai.evaluation.score.value": held} if held is not None else {}
        attrs |= flat_metrics("harness.metric.", metrics or {}) | node_attributes(nodes)
        kind = {"harness.link.kind": "train_reward", "harness.reward.name": name, "harness.train.step": self.step}
        link = link_to(train, kind)
        attrs["harness.link.linked"] = link is not None
        self._child(f"eval.reward/{name}", attrs, [link] if link else ()).end()


class RunTelemetry:
    """Tracing of one run: training steps, checkpoints and their held-out evaluations.

    Create with :meth:`start`; call :meth:`shutdown` at the end (or use it as a context manager).
    """

    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        section: TelemetrySection,
        provider: TracerProvider | None = None,
        file_store: BatchSpanProcessor | None = None,
        exporter: OtlpDelivery | None = None,
    ) -> None:
        self.run_dir, self.run_id, self.config = run_dir, run_id, section
        self._provider, self._file_store, self.exporter = provider, file_store, exporter
        self._tracer = provider.get_tracer("harness.telemetry") if provider is not None else trace.NoOpTracer()
        self._steps: dict[int, dict[str, Any]] = {}
        self._checkpoints: dict[int, dict[str, Any]] = {}

    @classmethod
    def start(
        cls,
        run_dir: str | Path,
        run_id: str,
        config: TelemetrySection | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        extra_processors: Sequence[SpanProcessor] = (),
    ) -> RunTelemetry:
        """Set up tracing for a run: ``run_dir/traces.jsonl`` is appended to, and spans go to the OTLP backend that
        ``environ`` (default ``os.environ``) or ``config`` names. ``extra_processors``: further span processors
        (tests use the SDK's in-memory exporter). Never raises for an unreachable backend.

        Raises:
            ConfigError: for a malformed ``OTEL_*`` variable or endpoint, naming it.
        """
        section, run_dir = config or TelemetrySection(), Path(run_dir)
        if not section.enabled:
            return cls(run_dir, run_id, section)
        env = os.environ if environ is None else environ
        try:
            otlp = resolve_otlp(section, env)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        try:
            delivery = OtlpDelivery(otlp, section.retry_after_s) if otlp is not None else None
        except ValueError as e:
            raise ConfigError(f"telemetry.otlp_endpoint: {e}") from None
        service = env.get("OTEL_SERVICE_NAME") or section.service_name
        attrs = {"service.name": service, "harness.run.id": run_id}
        resource = Resource.create({**attrs, "openinference.project.name": section.project_name or service})
        provider = TracerProvider(resource=resource, id_generator=UrandomIdGenerator())
        store = None
        if section.file_store:  # the SDK's batch processor: encoding and writing run in its thread
            exporter = FileSpanExporter(run_dir / TRACES_FILE)
            store = BatchSpanProcessor(exporter, max_queue_size=_STORE_QUEUE, schedule_delay_millis=1000)
        export = ExportProcessor(delivery, section) if delivery is not None else None
        for p in (store, export, *extra_processors):
            if p is not None:
                provider.add_span_processor(p)
        if otlp is not None:
            logger.info("tracing run %s to %s and %s", run_id, otlp.endpoint, run_dir / TRACES_FILE)
        return cls(run_dir, run_id, section, provider, store, delivery)

    @property
    def traces_path(self) -> Path:
        """The run's OTLP-JSON file store."""
        return self.run_dir / TRACES_FILE

    def _common(self, step: int, kind: str) -> dict[str, Any]:
        return {
            "harness.run.id": self.run_id,
            "session.id": self.run_id,
            "harness.train.step": int(step),
            "openinference.span.kind": kind,
        }

    @contextmanager
    def train_step(self, step: int) -> Iterator[StepSpan]:
        """A ``train.step`` span for the duration of the ``with`` block; yields a :class:`StepSpan`."""
        # started, not made current: nothing inside a step needs it as the ambient span, and attaching and
        # detaching the context is a good part of what a span costs
        span = self._tracer.start_span("train.step", context=Context(), attributes=self._common(step, "CHAIN"))
        st = StepSpan(self, step, span)
        try:
            yield st
        except BaseException as e:  # as start_as_current_span would: the exception on the span, status ERROR
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"))
            raise
        finally:
            self._steps[int(step)] = {**hex_ids(span.get_span_context()), "rewards": dict(st.rewards)}
            span.end()

    def checkpoint_context(self, step: int) -> dict[str, Any]:
        """What a checkpoint saved at ``step`` must carry so its evaluation can link back (JSON-able).

        The ids of the ``train.step`` span of ``step`` (or of the latest traced step before it) and of its reward
        spans, and per reward the mean training reward over the steps since the previous checkpoint. Call it in
        step order (a repeated call returns the same context): the steps it averaged are then forgotten, so memory
        holds only the steps since the last checkpoint. After a resume, the first window starts at the first step
        this process traced (``since_step`` is None). Flushes the file store first, so the spans are on disk.
        """
        step = int(step)
        if self._file_store is not None:
            self._file_store.force_flush()
        if step not in self._checkpoints:
            prev = max((c for c in self._checkpoints if c < step), default=None)
            span_step = max((s for s in self._steps if s <= step), default=None)
            window = {s: rec["rewards"] for s, rec in self._steps.items() if s <= step and (prev is None or s > prev)}
            linked = self._steps.get(span_step, {}) if span_step is not None else {}
            rewards: dict[str, dict[str, Any]] = {}
            for name in sorted({n for rs in window.values() for n in rs}):
                train_mean, n = window_mean(
                    [(s, rs[name]["mean"]) for s, rs in window.items() if name in rs], prev, step
                )
                ids = linked.get("rewards", {}).get(name, {})
                rewards[name] = {k: ids.get(k) for k in ("trace_id", "span_id", "mean")}
                rewards[name] |= {"train_mean": train_mean, "steps": n}
            for s in window:  # later checkpoints average only later steps; keep the linked step for eval_checkpoint
                if s != span_step:
                    del self._steps[s]
            self._checkpoints[step] = {
                "version": CONTEXT_VERSION,
                "run_id": self.run_id,
                "step": step,
                "span_step": span_step,
                "since_step": prev,
                "trace_id": linked.get("trace_id"),
                "span_id": linked.get("span_id"),
                "rewards": rewards,
            }
        return json.loads(json.dumps(self._checkpoints[step]))

    @contextmanager
    def eval_checkpoint(
        self, step: int, checkpoint_ctx: Mapping[str, Any] | None = None, evaluation: Mapping[str, Any] | None = None
    ) -> Iterator[EvalSpan]:
        """An ``eval.checkpoint`` span linked to the checkpoint's ``train.step`` span; yields an :class:`EvalSpan`.

        Args:
            step: the checkpoint's training step.
            checkpoint_ctx: what :meth:`checkpoint_context` returned for it (read from the checkpoint directory);
                None: looked up in this process when the step was trained here, else the span is not linked.
            evaluation: which evaluation this is (``id``, ``own``, ``data``, ``fingerprint``, ``prompts``, ``k``,
                sampling, ``rewards``), written as ``harness.eval.*`` on this span and its reward spans so that
                ``harness report`` keeps the scores of different evaluations apart.
        """
        ctx = checkpoint_ctx
        if ctx is None and (int(step) in self._steps or int(step) in self._checkpoints):
            ctx = self.checkpoint_context(step)
        if ctx and ctx.get("run_id") not in (None, self.run_id):
            logger.warning("checkpoint context is from run %s, not %s; evaluating anyway", ctx["run_id"], self.run_id)
        attrs = {**self._common(step, "CHAIN"), "harness.checkpoint.step": int(step), **eval_attributes(evaluation)}
        link = link_to(ctx, {"harness.link.kind": "train_step", "harness.train.step": int(step)})
        attrs["harness.link.linked"] = link is not None
        with self._tracer.start_as_current_span(
            "eval.checkpoint", Context(), attributes=attrs, links=[link] if link else None
        ) as span:
            yield EvalSpan(self, step, span, ctx or {}, eval_attributes(evaluation))

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Write pending spans to the file store and send what waits for the OTLP backend (up to ``timeout_s``)."""
        return self._provider is None or self._provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Flush and close every destination; safe to call twice."""
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None

    def __enter__(self) -> RunTelemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
