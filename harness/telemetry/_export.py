"""Where spans go: the per-run OTLP-JSON file store, and an optional OTLP backend that may be down.

* :class:`FileStoreProcessor` writes every ended span to ``traces.jsonl``, in full: one
  ``ExportTraceServiceRequest`` line per finished trace root (a training step with its reward spans, an
  evaluation with its reward spans), encoded by a writer thread and appended with a single ``write`` so a
  trainer and an evaluator can share the file. Flush or shut down to have everything on disk.
* :class:`GuardedExporter` wraps an OTLP exporter for a :class:`BatchSpanProcessor` (a bounded queue and a
  background thread, so training never waits for the network). When an export fails it logs one warning for
  the whole run, then drops batches for ``retry_after_s`` instead of retrying each one; the file store is the
  complete record and ``harness traces push`` can replay it later.
* :func:`resolve_otlp` reads the standard ``OTEL_*`` environment variables over the config section.

This module does not decide which spans exist; :mod:`harness.telemetry._run` does.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry._otlp_json import spans_to_otlp_json

__all__ = ["OtlpSettings", "resolve_otlp", "parse_headers", "FileStoreProcessor", "GuardedExporter", "make_exporter"]

logger = logging.getLogger(__name__)

_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)
_QUEUE_LOGGER = "opentelemetry.sdk._shared_internal"


@dataclass(frozen=True)
class OtlpSettings:
    """A resolved OTLP destination.

    Attributes:
        endpoint: the full traces URL for http/protobuf (``.../v1/traces``), ``host:port`` URL for grpc.
        protocol: ``http/protobuf`` or ``grpc``.
        headers: request headers (grpc metadata keys are lower-cased).
        timeout_s: per request.
    """

    endpoint: str
    protocol: str = "http/protobuf"
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0


def parse_headers(text: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` (URL-encoded values, as in ``OTEL_EXPORTER_OTLP_HEADERS``) to a dict.

    Raises:
        ValueError: for an entry without ``=``, naming it.
    """
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ValueError(f"OTLP header {part.strip()!r} is not key=value")
        k, v = part.split("=", 1)
        out[urllib.parse.unquote(k.strip())] = urllib.parse.unquote(v.strip())
    return out


def _traces_url(base: str) -> str:
    return base.rstrip("/") + "/v1/traces"


def resolve_otlp(section: TelemetrySection, environ: Mapping[str, str] | None = None) -> OtlpSettings | None:
    """The OTLP destination from ``OTEL_*`` variables over ``section``; None when there is none.

    Follows the OpenTelemetry specification: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as is,
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is a base URL to which http/protobuf appends ``/v1/traces``;
    ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true`` turn export off. The config's ``otlp_endpoint``
    is a full traces URL for http/protobuf.

    Raises:
        ValueError: for an unknown protocol or a malformed header variable, naming the variable.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or section.otlp_protocol
    ).strip()
    if protocol not in ("http/protobuf", "grpc"):
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or grpc, got {protocol!r}")
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        base = env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip()
        endpoint = _traces_url(base) if protocol == "http/protobuf" else base
    elif section.otlp_endpoint:
        endpoint = section.otlp_endpoint
    else:
        return None
    headers = dict(section.otlp_headers)
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        if env.get(var):
            try:
                headers.update(parse_headers(env[var]))
            except ValueError as e:
                raise ValueError(f"{var}: {e}") from None
    if protocol == "grpc":
        headers = {k.lower(): v for k, v in headers.items()}
    return OtlpSettings(endpoint=endpoint, protocol=protocol, headers=headers, timeout_s=section.export_timeout_s)


def make_exporter(settings: OtlpSettings) -> SpanExporter:
    """The SDK's OTLP span exporter for ``settings`` (http/protobuf or grpc)."""
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        insecure = not settings.endpoint.startswith("https://")
        return GrpcExporter(
            endpoint=settings.endpoint, insecure=insecure, headers=settings.headers or None, timeout=settings.timeout_s
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=settings.endpoint, headers=settings.headers or None, timeout=settings.timeout_s)


class _QuietWhileGuarded(logging.Filter):
    """Drops the OTLP exporter's per-batch error logs and the batch queue's per-span "Queue full" warnings.

    :class:`GuardedExporter` reports failures once instead, and counts the spans the full queue dropped.
    """

    def __init__(self) -> None:
        super().__init__()
        self.queue_full = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == _QUEUE_LOGGER:
            if str(record.msg).startswith("Queue full"):
                self.queue_full += 1
                return False
            return True
        return record.levelno < logging.WARNING


class GuardedExporter(SpanExporter):
    """An exporter wrapper that fails fast and quietly after the first failure.

    After a failed export (an error result or an exception) batches are dropped without a network call for
    ``retry_after_s``; then one export is tried again. One warning is logged per run, and a line with the number
    of spans not delivered is logged at shutdown (info). It also silences the SDK's one-warning-per-span
    "Queue full" message while it lives, counting those spans in :attr:`queue_full` instead.
    """

    def __init__(self, inner: SpanExporter, destination: str, *, retry_after_s: float = 30.0) -> None:
        self._inner = inner
        self._destination = destination
        self._retry_after_s = retry_after_s
        self._open_until = 0.0
        self._warned = False
        self._lock = threading.Lock()
        self.sent = 0
        self.dropped = 0
        self._filter = _QuietWhileGuarded()
        for name in (*_EXPORTER_LOGGERS, _QUEUE_LOGGER):
            logging.getLogger(name).addFilter(self._filter)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if time.monotonic() < self._open_until:
            self.dropped += len(spans)
            return SpanExportResult.FAILURE
        try:
            result = self._inner.export(spans)
            reason = "the backend refused or did not answer"
        except Exception as e:  # noqa: BLE001 - an exporter bug must not stop training either
            result, reason = SpanExportResult.FAILURE, f"{type(e).__name__}: {e}"
        if result is SpanExportResult.SUCCESS:
            self.sent += len(spans)
            return result
        self.dropped += len(spans)
        self._open_until = time.monotonic() + self._retry_after_s
        with self._lock:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "OTLP export to %s failed (%s); spans still go to the file store, export is retried every "
                    "%.0f s; replay later with `harness traces push RUN_DIR --endpoint URL`",
                    self._destination,
                    reason,
                    self._retry_after_s,
                )
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        try:
            self._inner.shutdown()
        finally:
            for name in (*_EXPORTER_LOGGERS, _QUEUE_LOGGER):
                logging.getLogger(name).removeFilter(self._filter)
            if self.dropped or self.queue_full:
                logger.info("OTLP export to %s: %d spans sent, %d not delivered, %d dropped by the full queue",
                            self._destination, self.sent, self.dropped, self.queue_full)

    @property
    def queue_full(self) -> int:
        """Spans the bounded queue dropped because the exporter could not keep up."""
        return self._filter.queue_full

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class FileStoreProcessor(SpanProcessor):
    """Appends ended spans to an OTLP-JSON file, one request line per finished root span.

    Child spans wait in memory until their root ends (a training step holds only a handful). The finished trace
    is then handed to a writer thread that encodes it and appends it with a single ``write``, so the training
    loop pays only for the hand-over. :meth:`force_flush` and :meth:`shutdown` return once everything handed
    over is in the file; a process killed outright loses at most the traces still being encoded.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[ReadableSpan] = []
        self._queue: list[list[ReadableSpan]] = []
        self._cv = threading.Condition()
        self._busy = False
        self._stopping = False
        self._failed = False
        self.lines_written = 0
        self._thread = threading.Thread(target=self._run, name="harness-trace-store", daemon=True)
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
            lines = [json.dumps(spans_to_otlp_json(spans), separators=(",", ":")) + "\n" for spans in traces]
            if self._fd >= 0:
                os.write(self._fd, "".join(lines).encode("utf-8"))
                self.lines_written += len(lines)
        except Exception as e:  # noqa: BLE001 - a full disk must not stop training; say so once
            if not self._failed:
                self._failed = True
                logger.warning("writing traces to %s failed (%s: %s); later traces may be missing", self.path,
                               type(e).__name__, e)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cv:
            if self._pending:  # children whose root has not ended: written as they are
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
