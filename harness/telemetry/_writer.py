"""The span processor behind every traced run: finished traces go to the file store and the OTLP export.

:class:`TraceWriter` keeps the spans of a trace in memory until its root ends (a training step with its reward
spans, an evaluation with its reward spans). Finished traces are then written in batches, in the thread that
ends them: each as one OTLP-JSON ``ExportTraceServiceRequest`` line, encoded directly from the SDK's spans
(:func:`~harness.telemetry._otlp_json.spans_to_otlp_json_line`), appended to ``traces.jsonl`` (one ``write``
per batch, so a trainer and an evaluator can share the file) and, when a backend is configured, handed to the
export process (:class:`~harness.telemetry._shipper.OtlpShipper`), or, when none could start, to an in-process
:class:`~harness.telemetry._sender.OtlpSender`. Both take the same lines.

A batch is written once ``max_traces`` traces wait, when a trace ends ``max_delay_s`` after the oldest waiting
one, when an evaluation ends, and at every flush (a checkpoint flushes) and shutdown. Batching matters on a
small machine: encoding one step's trace between two training steps runs with cold caches at twice the cost
of encoding a batch. A separate thread would not help: under the GIL its encoding stalls the training loop
just as long. A process killed outright loses the traces still waiting (at most ``max_delay_s`` of them).

:func:`drop_steps_after` rewrites the file store when a run resumes, so the steps it repeats are stored once.

This module does not decide which spans exist (:mod:`harness.telemetry._run`) and does not talk to backends.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from harness.telemetry._otlp_json import any_value, read_requests, spans_to_otlp_json_line
from harness.telemetry._sender import OtlpSender
from harness.telemetry._shipper import OtlpShipper

__all__ = ["TraceWriter", "drop_steps_after"]

logger = logging.getLogger("harness.telemetry._export")


class TraceWriter(SpanProcessor):
    """Writes each finished trace to an OTLP-JSON file and/or an OTLP sender.

    Args:
        path: the file store (appended); None for none.
        sender: where OTLP export goes (the export process, or an in-process sender; both are given the lines),
            or None for no backend.
    """

    def __init__(
        self,
        path: str | Path | None,
        sender: OtlpSender | OtlpShipper | None = None,
        *,
        max_traces: int = 32,
        max_delay_s: float = 1.0,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._fd = -1
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.sender = sender
        self._pending: list[ReadableSpan] = []
        self._ready: list[list[ReadableSpan]] = []
        self._oldest = 0.0
        self._max_traces = max(1, max_traces)
        self._max_delay = max_delay_s
        self._lock = threading.Lock()
        self._failed = False
        self.lines_written = 0
        self.busy_s = 0.0  # wall seconds spent encoding and writing batches (they land in single steps)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self._pending.append(span)
            if span.parent is not None:
                return
            now = time.monotonic()
            if not self._ready:
                self._oldest = now
            self._ready.append(self._pending)
            self._pending = []
            if (
                len(self._ready) >= self._max_traces
                or now - self._oldest >= self._max_delay
                or not span.name.startswith("train.")
            ):
                self._write_ready()

    def _write_ready(self) -> None:
        if self._pending:  # spans whose root has not ended (a flush in mid-trace): written as they are
            self._ready.append(self._pending)
            self._pending = []
        if not self._ready:
            return
        traces, self._ready = self._ready, []
        t0 = time.perf_counter()
        try:
            data = "".join([spans_to_otlp_json_line(spans) + "\n" for spans in traces]).encode("utf-8")
            if self._fd >= 0:
                os.write(self._fd, data)
                self.lines_written += len(traces)
            if self.sender is not None:
                self.sender.offer_lines(data, sum(len(spans) for spans in traces))
        except Exception as e:  # noqa: BLE001 - a full disk must not stop training; say so once
            if not self._failed:
                self._failed = True
                logger.warning(
                    "writing traces to %s failed (%s: %s); later traces may be missing",
                    self.path or "the OTLP outbox",
                    type(e).__name__,
                    e,
                )
        finally:
            self.busy_s += time.perf_counter() - t0

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write every waiting trace (and any spans whose root has not ended yet)."""
        with self._lock:
            self._write_ready()
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._write_ready()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if self.sender is not None:
            self.sender.shutdown()


def _span_step(span: dict) -> int | None:
    for kv in span.get("attributes", ()):
        if kv.get("key") == "harness.train.step":
            try:
                return int(any_value(kv.get("value", {})))
            except (TypeError, ValueError):
                return None
    return None


def drop_steps_after(path: str | Path, step: int) -> int:
    """Remove from the file store at ``path`` every span of a step after ``step``; return how many were removed.

    A run resumed from the checkpoint of ``step`` traces the steps after it again; without this, the steps between
    that checkpoint and the interrupt would be stored twice. Lines that are not JSON (cut by a kill) are dropped
    too. The file is replaced atomically; a missing file is left alone.
    """
    import json

    path = Path(path)
    if not path.is_file():
        return 0
    removed, lines = 0, []
    for _, req in read_requests(path):
        for rs in req.get("resourceSpans", ()):
            for ss in rs.get("scopeSpans", ()):
                spans = ss.get("spans", [])
                keep = [sp for sp in spans if (_span_step(sp) or 0) <= step]
                removed += len(spans) - len(keep)
                ss["spans"] = keep
            rs["scopeSpans"] = [ss for ss in rs.get("scopeSpans", ()) if ss.get("spans")]
        req["resourceSpans"] = [rs for rs in req.get("resourceSpans", ()) if rs.get("scopeSpans")]
        if req["resourceSpans"]:
            lines.append(json.dumps(req, separators=(",", ":")))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)
    return removed
