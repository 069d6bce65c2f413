"""The tracing API the trainer and the evaluator call: :class:`RunTelemetry` and its step and evaluation spans.

Span tree (names and attributes are listed in ``docs/TRACING.md``)::

    train.step                 CHAIN      one trace per training step
      reward/<name>            EVALUATOR  mean, std, counts per status, zero-variance groups, latency
    eval.checkpoint            CHAIN      one trace per evaluated checkpoint, linked to that step's train.step
      eval.reward/<name>       EVALUATOR  held-out score beside the training mean, linked to reward/<name>

Every span repeats ``harness.run.id``, ``harness.train.step`` and ``session.id`` (= run id), so backends that
drop links can join by attribute. This module keeps its own :class:`TracerProvider` (it never installs a global
one) and does not know about trainers, models or checkpoint files: the caller writes
:meth:`RunTelemetry.checkpoint_context` wherever it keeps a checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from harness.cfg.telemetry import TelemetrySection
from harness.errors import ConfigError
from harness.stats import window_mean
from harness.telemetry._attrs import (
    RewardStats,
    UrandomIdGenerator,
    eval_attributes,
    flat_metrics,
    link_to,
    num,
    reward_attributes,
    sample_event,
    span_ids,
)
from harness.telemetry._export import ExportProcessor, OtlpDelivery, resolve_otlp
from harness.telemetry._store import FileSpanExporter

__all__ = ["RunTelemetry", "StepSpan", "EvalSpan", "TRACES_FILE", "CONTEXT_VERSION"]

logger = logging.getLogger(__name__)

TRACES_FILE = "traces.jsonl"
CONTEXT_VERSION = 1
_SCOPE = "harness.telemetry"
_STORE_QUEUE = 1 << 16  # spans waiting for the file store's thread: complete unless that many pile up in a second


class StepSpan:
    """The ``train.step`` span of one training step; returned by :meth:`RunTelemetry.train_step`."""

    def __init__(self, tel: RunTelemetry, step: int, span: trace.Span) -> None:
        self._tel = tel
        self.step = step
        self.span = span
        self.rewards: dict[str, dict[str, Any]] = {}
        self._context = trace.set_span_in_context(span, Context())  # the parent of the reward spans

    def set_metrics(self, metrics: Mapping[str, float]) -> None:
        """Record flat training metrics (loss, kl, ...) as ``harness.metric.<key>`` attributes."""
        self.span.set_attributes(flat_metrics("harness.metric.", metrics))

    def record_reward(self, name: str, stats: RewardStats, samples: Sequence[tuple[str, Any]] | None = None) -> None:
        """Add a ``reward/<name>`` child span with ``stats``.

        Args:
            name: the reward spec name.
            stats: the batch summary of that reward.
            samples: optional ``(sample_id, Score)`` pairs; up to ``sample_records`` of them (config, default 0 =
                off) are recorded as ``gen_ai.evaluation.result`` events, drawn with a per-step seed.
        """
        attrs = self._tel._common(self.step, "EVALUATOR")
        attrs.update(reward_attributes(name, stats))
        span = self._tel._tracer.start_span(f"reward/{name}", context=self._context, attributes=attrs)
        for sid, score in self._tel._sample_records(self.step, name, samples):
            span.add_event("gen_ai.evaluation.result", sample_event(name, sid, score))
        span.end()
        ids = span_ids(span) or {}
        self.rewards[name] = {**ids, "mean": stats.mean}


class EvalSpan:
    """The ``eval.checkpoint`` span of one evaluated checkpoint; returned by :meth:`RunTelemetry.eval_checkpoint`."""

    def __init__(
        self,
        tel: RunTelemetry,
        step: int,
        span: trace.Span,
        ctx: Mapping[str, Any] | None,
        evaluation: Mapping[str, Any] | None = None,
    ) -> None:
        self._tel = tel
        self.step = step
        self.span = span
        self._ctx = ctx or {}
        self._evaluation = eval_attributes(evaluation)

    def set_metrics(self, metrics: Mapping[str, float | None]) -> None:
        """Record flat evaluation metrics (pass@k, maj@k, ...) as ``harness.metric.<key>`` numbers; None: left out."""
        self.span.set_attributes(flat_metrics("harness.metric.", metrics))

    def record_reward(
        self,
        name: str,
        heldout: float | None,
        metrics: Mapping[str, float] | None = None,
        *,
        nodes: Mapping[str, int] | None = None,
    ) -> None:
        """Add an ``eval.reward/<name>`` child span with the held-out score beside the training mean.

        The span links to the ``reward/<name>`` span of the checkpoint's step when the checkpoint context has it.

        Args:
            name: the reward spec name (the same name as in training).
            heldout: the held-out score (None when nothing could be scored).
            metrics: further flat metrics of this reward (``harness.metric.<key>``).
            nodes: calls per cluster node that scored them (the Ray backend), as ``harness.reward.nodes`` and
                ``harness.reward.node_calls`` like the training reward spans.
        """
        train = (self._ctx.get("rewards") or {}).get(name) or {}
        train_mean = num(train.get("train_mean"))
        attrs = self._tel._common(self.step, "EVALUATOR")
        attrs.update({"harness.reward.name": name, "gen_ai.evaluation.name": name})
        attrs.update(self._evaluation)
        if heldout is not None:
            attrs["harness.reward.heldout"] = float(heldout)
            attrs["gen_ai.evaluation.score.value"] = float(heldout)
        if train_mean is not None:
            attrs["harness.reward.train_mean"] = train_mean
            if heldout is not None:
                attrs["harness.reward.gap"] = train_mean - float(heldout)
        attrs.update(flat_metrics("harness.metric.", metrics or {}))
        if nodes:
            attrs["harness.reward.nodes"] = list(nodes)
            attrs["harness.reward.node_calls"] = [int(n) for n in nodes.values()]
        link = link_to(
            train, {"harness.link.kind": "train_reward", "harness.reward.name": name, "harness.train.step": self.step}
        )
        attrs["harness.link.linked"] = link is not None
        with self._tel._tracer.start_as_current_span(
            f"eval.reward/{name}", attributes=attrs, links=[link] if link else None
        ):
            pass


class RunTelemetry:
    """Tracing of one run: training steps, checkpoints and their held-out evaluations.

    Create with :meth:`start`; call :meth:`shutdown` at the end (or use it as a context manager).
    """

    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        section: TelemetrySection,
        provider: TracerProvider | None,
        file_store: BatchSpanProcessor | None,
        exporter: OtlpDelivery | None,
    ) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.config = section
        self._provider = provider
        self._file_store = file_store
        self.exporter = exporter
        self._tracer = provider.get_tracer(_SCOPE) if provider is not None else trace.NoOpTracer()
        self._steps: dict[int, dict[str, Any]] = {}
        self._checkpoints: dict[int, dict[str, Any]] = {}
        self._closed = False

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
        """Set up tracing for a run.

        Args:
            run_dir: the run directory; ``traces.jsonl`` is appended there.
            run_id: the run id (``harness.run.id`` and ``session.id`` on every span).
            config: the ``telemetry`` config section; default: all defaults.
            environ: the environment to read ``OTEL_*`` from; default: ``os.environ``.
            extra_processors: further span processors (tests use the SDK's in-memory exporter).

        Never raises for an unreachable backend; the first failed export logs one warning.

        Raises:
            ConfigError: for a malformed ``OTEL_*`` variable (unknown protocol, header without ``=``), naming it.
        """
        section = config or TelemetrySection()
        run_dir = Path(run_dir)
        if not section.enabled:
            return cls(run_dir, run_id, section, None, None, None)
        env = os.environ if environ is None else environ
        try:
            otlp = resolve_otlp(section, env)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        service = env.get("OTEL_SERVICE_NAME") or section.service_name
        resource = Resource.create(
            {
                "service.name": service,
                "harness.run.id": run_id,
                "openinference.project.name": section.project_name or service,
            }
        )
        provider = TracerProvider(resource=resource, id_generator=UrandomIdGenerator())
        store = None
        if section.file_store:  # the SDK's batch processor: encoding and writing run in its thread
            exporter = FileSpanExporter(run_dir / TRACES_FILE)
            store = BatchSpanProcessor(exporter, max_queue_size=_STORE_QUEUE, schedule_delay_millis=1000)
            provider.add_span_processor(store)
        delivery = None
        if otlp is not None:
            try:
                delivery = OtlpDelivery(otlp, section.retry_after_s)
            except ValueError as e:
                raise ConfigError(f"telemetry.otlp_endpoint: {e}") from None
            provider.add_span_processor(ExportProcessor(delivery, section))
            logger.info("tracing run %s to %s and %s", run_id, otlp.endpoint, run_dir / TRACES_FILE)
        for p in extra_processors:
            provider.add_span_processor(p)
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

    def _sample_records(self, step: int, name: str, samples: Sequence[tuple[str, Any]] | None):
        k = self.config.sample_records
        if not samples or k <= 0:
            return []
        if len(samples) <= k:
            return list(samples)
        rng = random.Random(f"{self.run_id}/{step}/{name}")
        return [samples[i] for i in sorted(rng.sample(range(len(samples)), k))]

    @contextmanager
    def train_step(self, step: int) -> Iterator[StepSpan]:
        """A ``train.step`` span for the duration of the ``with`` block; yields a :class:`StepSpan`."""
        attrs = self._common(step, "CHAIN")
        # started, not made current: nothing inside a step needs it as the ambient span, and attaching and
        # detaching the context is a good part of what a span costs
        span = self._tracer.start_span("train.step", context=Context(), attributes=attrs)
        st = StepSpan(self, step, span)
        try:
            yield st
        except BaseException as e:  # as start_as_current_span would: the exception on the span, status ERROR
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, f"{type(e).__name__}: {e}"))
            raise
        finally:
            self._steps[int(step)] = {**(span_ids(span) or {}), "rewards": dict(st.rewards)}
            span.end()

    def checkpoint_context(self, step: int) -> dict[str, Any]:
        """What a checkpoint saved at ``step`` must carry so its evaluation can link back (JSON-able).

        Holds the ids of the ``train.step`` span of ``step`` (or of the latest traced step before it) and of its
        reward spans, and per reward the mean training reward over the steps since the previous checkpoint.
        Call it for checkpoints in step order (a repeated call returns the same context): the per-step records it
        has averaged are then dropped, so a long run keeps only the steps since its last checkpoint in memory. After
        a resume, the first window starts at the first step traced by this process (``since_step`` is None).
        """
        step = int(step)
        if self._file_store is not None:  # the spans a checkpoint points to are on disk before it is saved
            self._file_store.force_flush()
        if step in self._checkpoints:
            return json.loads(json.dumps(self._checkpoints[step]))
        prev = max((c for c in self._checkpoints if c < step), default=None)
        traced = [s for s in self._steps if s <= step]
        span_step = max(traced, default=None)
        window = [s for s in traced if prev is None or s > prev]
        rec = self._steps.get(span_step, {}) if span_step is not None else {}
        names = sorted({n for s in window for n in self._steps[s]["rewards"]})
        rewards: dict[str, dict[str, Any]] = {}
        for name in names:
            points = [
                (s, self._steps[s]["rewards"][name].get("mean")) for s in window if name in self._steps[s]["rewards"]
            ]
            train_mean, n = window_mean(points, prev, step)
            ids = rec.get("rewards", {}).get(name, {})
            rewards[name] = {
                "trace_id": ids.get("trace_id"),
                "span_id": ids.get("span_id"),
                "mean": ids.get("mean"),
                "train_mean": train_mean,
                "steps": n,
            }
        for s in window:  # later checkpoints average only later steps; keep the linked step for eval_checkpoint
            if s != span_step:
                del self._steps[s]
        ctx = {
            "version": CONTEXT_VERSION,
            "run_id": self.run_id,
            "step": step,
            "span_step": span_step,
            "since_step": prev,
            "trace_id": rec.get("trace_id"),
            "span_id": rec.get("span_id"),
            "rewards": rewards,
        }
        self._checkpoints[step] = ctx
        return json.loads(json.dumps(ctx))

    @contextmanager
    def eval_checkpoint(
        self,
        step: int,
        checkpoint_ctx: Mapping[str, Any] | None = None,
        evaluation: Mapping[str, Any] | None = None,
    ) -> Iterator[EvalSpan]:
        """An ``eval.checkpoint`` span linked to the checkpoint's ``train.step`` span; yields an :class:`EvalSpan`.

        Args:
            step: the checkpoint's training step.
            checkpoint_ctx: what :meth:`checkpoint_context` returned for it (read from the checkpoint directory);
                None: looked up in this process when the step was trained here, else the span is not linked.
            evaluation: which evaluation this is (``id``, ``own``, ``data``, ``fingerprint``, ``prompts``, ``k``,
                the sampling settings, ``rewards``); written as ``harness.eval.*`` attributes on this span and its
                reward spans, so that ``harness report`` keeps the scores of different evaluations apart.
        """
        ctx = (
            checkpoint_ctx
            if checkpoint_ctx is not None
            else (self.checkpoint_context(step) if int(step) in self._steps or int(step) in self._checkpoints else None)
        )
        if ctx and ctx.get("run_id") not in (None, self.run_id):
            logger.warning(
                "checkpoint context is from run %s, not %s; evaluating anyway", ctx.get("run_id"), self.run_id
            )
        attrs = self._common(step, "CHAIN")
        attrs["harness.checkpoint.step"] = int(step)
        attrs.update(eval_attributes(evaluation))
        link = link_to(ctx, {"harness.link.kind": "train_step", "harness.train.step": int(step)})
        attrs["harness.link.linked"] = link is not None
        with self._tracer.start_as_current_span(
            "eval.checkpoint", context=Context(), attributes=attrs, links=[link] if link else None
        ) as span:
            yield EvalSpan(self, step, span, ctx, evaluation)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Write pending spans to the file store and send what waits for the OTLP backend (up to ``timeout_s``)."""
        if self._provider is None:
            return True
        return self._provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Flush and close every destination; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._provider is not None:
            self._provider.shutdown()

    def __enter__(self) -> RunTelemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
