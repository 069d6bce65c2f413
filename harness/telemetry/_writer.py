"""The span processor behind every traced run: finished traces go to the file store and the OTLP outbox.

:class:`TraceWriter` keeps the spans of a trace in memory until its root ends (a training step with its reward
spans, an evaluation with its reward spans), then hands the whole trace to its writer thread, so the training
loop pays only for the hand-over. The thread encodes the trace once as an OTLP-JSON ``ExportTraceServiceRequest``
and appends it to ``traces.jsonl`` as one line with a single ``write`` (a trainer and an evaluator can share the
file), and, when a backend is configured, gives the same request in protobuf form to the
:class:`~harness.telemetry._sender.OtlpSender`. :meth:`TraceWriter.force_flush` and :meth:`TraceWriter.shutdown`
return once everything handed over is in the file; a process killed outright loses what was still in hand.

This module does not decide which spans exist (:mod:`harness.telemetry._run`) and does not talk to backends.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from harness.telemetry._otlp_json import spans_to_otlp_json
from harness.telemetry._otlp_pb import encode_request
from harness.telemetry._sender import OtlpSender

__all__ = ["TraceWriter"]

logger = logging.getLogger("harness.telemetry._export")


class TraceWriter(SpanProcessor):
    """Writes finished traces to an OTLP-JSON file and/or an OTLP sender, from a thread of its own.

    Args:
        path: the file store (appended); None for none.
        sender: the OTLP outbox; None for no backend.
    """

    def __init__(self, path: str | Path | None, sender: OtlpSender | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._fd = -1
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.sender = sender
        self._pending: list[ReadableSpan] = []
        self._queue: list[list[ReadableSpan]] = []
        self._cv = threading.Condition()
        self._busy = False
        self._stopping = False
        self._failed = False
        self.lines_written = 0
        self._thread = threading.Thread(target=self._run, name="harness-trace-writer", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._cv:
            self._pending.append(span)
            if span.parent is None:
                self._queue.append(self._pending)
                self._pending = []
                self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if not self._queue:
                    return
                traces, self._queue = self._queue, []
                self._busy = True
            try:
                self._write(traces)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _write(self, traces: list[list[ReadableSpan]]) -> None:
        try:
            docs = [spans_to_otlp_json(spans) for spans in traces]
            if self.sender is not None:
                for doc, spans in zip(docs, traces):
                    self.sender.offer(encode_request(doc), len(spans))
            if self._fd >= 0:
                lines = [json.dumps(doc, separators=(",", ":")) + "\n" for doc in docs]
                os.write(self._fd, "".join(lines).encode("utf-8"))
                self.lines_written += len(lines)
        except Exception as e:  # noqa: BLE001 - a full disk must not stop training; say so once
            if not self._failed:
                self._failed = True
                logger.warning("writing traces to %s failed (%s: %s); later traces may be missing",
                               self.path or "the OTLP outbox", type(e).__name__, e)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write everything handed over (and any spans whose root has not ended); True when done in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cv:
            if self._pending:
                self._queue.append(self._pending)
                self._pending = []
                self._cv.notify_all()
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cv.wait(left)
        return True

    def shutdown(self) -> None:
        self.force_flush()
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout=30)
        with self._cv:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if self.sender is not None:
            self.sender.shutdown()
