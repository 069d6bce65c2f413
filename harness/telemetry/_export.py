"""OTLP export on the OpenTelemetry SDK's own exporters, and where it goes.

:func:`resolve_otlp` gives the :class:`OtlpSettings` (endpoint, protocol, headers, timeout) from the standard
``OTEL_*`` environment variables over the config, or None when no backend is configured; :func:`parse_headers`
reads the ``k=v,k2=v2`` header syntax. :class:`OtlpDelivery` wraps the SDK's ``OTLPSpanExporter``
(http/protobuf or grpc) behind the SDK's ``BatchSpanProcessor`` (:class:`ExportProcessor`), adding what a
training run needs on top: counts of what was sent, not delivered and dropped by the full queue, one warning per
run instead of one log record per failed batch, and after a failure no network call for ``retry_after_s`` (a
dead backend then costs nothing but dropped spans). The SDK's exporters retry within ``export_timeout_s``.

Why the SDK's path and nothing of the former export process (a second process fed OTLP-JSON lines through a
pipe, with a hand-written protobuf encoder and sender): a dead or hung backend never blocks training (the
processor's queue drops, counted), and what it costs is measured in ``docs/TRACING.md`` ("What tracing costs").
Which spans exist is
decided in :mod:`harness.telemetry._run`; the file store is :mod:`harness.telemetry._store`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from harness.cfg.telemetry import TelemetrySection

__all__ = ["OtlpSettings", "resolve_otlp", "parse_headers", "sdk_exporter", "OtlpDelivery", "ExportProcessor", "HOLD"]

logger = logging.getLogger("harness.telemetry")
T = TypeVar("T")


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
        endpoint = base.rstrip("/") + "/v1/traces" if protocol == "http/protobuf" else base
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


class _HoldBack(logging.Filter):
    """Holds back the SDK's own log records in a thread that is inside :class:`OtlpDelivery` or
    :class:`ExportProcessor`, keeping their messages: the delivery says once, in its own words, what failed."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        held = getattr(self.local, "held", None)
        if held is None:
            return True
        held.append(record.getMessage())
        return False

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, list[str]]:
        """``(fn(*args), messages held back meanwhile)``."""
        held: list[str] = []
        self.local.held = held
        try:
            return fn(*args), held
        finally:
            self.local.held = None


HOLD = _HoldBack()
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk._shared_internal",
)


def sdk_exporter(settings: OtlpSettings) -> SpanExporter:
    """The SDK's OTLP span exporter for ``settings``; its log records are held back inside :data:`HOLD`'s ``run``.

    Raises:
        ValueError: for an http/protobuf endpoint that is not an http:// or https:// URL with a host.
    """
    for name in _SDK_LOGGERS:
        logging.getLogger(name).addFilter(HOLD)  # (added once: addFilter skips a filter it has)
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=settings.endpoint, headers=settings.headers, timeout=settings.timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    url = urllib.parse.urlsplit(settings.endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"OTLP endpoint {settings.endpoint!r}: expected an http:// or https:// URL")
    return HttpExporter(endpoint=settings.endpoint, headers=settings.headers, timeout=settings.timeout_s)


class OtlpDelivery(SpanExporter):
    """The SDK's OTLP exporter for ``settings``, counted, quiet, and paused for ``retry_after_s`` after a failure.

    Attributes:
        sent: spans the backend accepted.
        dropped: spans not delivered (failed exports, and batches dropped while paused).
        queue_full: spans the batch processor's full queue dropped (known at shutdown: the spans that ended,
            counted by :class:`ExportProcessor`, less those this exporter was handed).

    Raises:
        ValueError: for an http/protobuf endpoint that is not an http:// or https:// URL with a host.
    """

    def __init__(self, settings: OtlpSettings, retry_after_s: float = 30.0) -> None:
        self.settings = settings
        self.destination = f"{settings.endpoint} ({settings.protocol})"
        self._inner = sdk_exporter(settings)
        self._retry_after = retry_after_s
        self._paused_until = 0.0
        self._warned = False
        self.sent = self.dropped = self.queue_full = self.ended = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        n = len(spans)
        if time.monotonic() < self._paused_until:
            self.dropped += n
            return SpanExportResult.FAILURE
        try:
            result, held = HOLD.run(self._inner.export, spans)
        except Exception as e:  # noqa: BLE001 - whatever the reason, training goes on
            result, held = SpanExportResult.FAILURE, [f"{type(e).__name__}: {e}"]
        if result is SpanExportResult.SUCCESS:
            self.sent += n
            return result
        self.dropped += n
        self._paused_until = time.monotonic() + self._retry_after
        if not self._warned:
            self._warned = True
            logger.warning(
                "OTLP export to %s failed (%s); spans still go to the file store, export is retried every %.0f s; "
                "replay later with `harness traces push RUN_DIR --endpoint URL`",
                self.destination,
                held[-1] if held else "no reason given",
                self._retry_after,
            )
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        HOLD.run(self._inner.shutdown)
        self.queue_full = max(0, self.ended - self.sent - self.dropped)
        if self.dropped or self.queue_full:
            logger.info(
                "OTLP export to %s: %d spans sent, %d not delivered, %d dropped by the full queue",
                self.destination,
                self.sent,
                self.dropped,
                self.queue_full,
            )


class ExportProcessor(BatchSpanProcessor):
    """The SDK's batch processor in front of an :class:`OtlpDelivery`; counts the spans that end, and keeps the
    SDK's "queue full" log record from adding a warning per run of its own (the delivery's summary counts them)."""

    def __init__(self, delivery: OtlpDelivery, section: TelemetrySection) -> None:
        super().__init__(
            delivery,
            max_queue_size=section.max_queue_size,
            max_export_batch_size=min(section.max_export_batch_size, section.max_queue_size),
            schedule_delay_millis=section.schedule_delay_s * 1000,
            export_timeout_millis=section.export_timeout_s * 1000,
        )
        self.delivery = delivery

    def on_end(self, span: ReadableSpan) -> None:
        self.delivery.ended += 1
        HOLD.run(super().on_end, span)
