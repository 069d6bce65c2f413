"""OTLP export on the OpenTelemetry SDK's own exporters, and where it goes.

:func:`resolve_otlp` reads the destination from the standard ``OTEL_*`` variables over the config.
:class:`OtlpDelivery` wraps the SDK's ``OTLPSpanExporter`` (http/protobuf or grpc; it retries within
``export_timeout_s``) behind the SDK's ``BatchSpanProcessor`` (:class:`ExportProcessor`), adding what a training
run needs: counts of what was sent, not delivered and dropped by the full queue, one warning per run instead of a
log record per failed batch, and no network call for ``retry_after_s`` after a failure. Ending a span never waits
for the backend. The file store is :mod:`harness.telemetry._store`.
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
    """An OTLP destination: the full traces URL for http/protobuf (``.../v1/traces``) or ``http://host:port`` for
    grpc, the protocol, request headers (grpc metadata keys lower-cased) and the timeout per request."""

    endpoint: str
    protocol: str = "http/protobuf"
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 5.0


def parse_headers(text: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` (URL-encoded, as in ``OTEL_EXPORTER_OTLP_HEADERS``) to a dict.

    Raises:
        ValueError: for an entry without ``=``, naming it.
    """
    out: dict[str, str] = {}
    for part in filter(str.strip, text.split(",")):
        if "=" not in part:
            raise ValueError(f"OTLP header {part.strip()!r} is not key=value")
        k, v = part.split("=", 1)
        out[urllib.parse.unquote(k.strip())] = urllib.parse.unquote(v.strip())
    return out


def resolve_otlp(section: TelemetrySection, environ: Mapping[str, str] | None = None) -> OtlpSettings | None:
    """The OTLP destination from ``OTEL_*`` variables over ``section``; None when there is none.

    As the OpenTelemetry specification has it: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as is,
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is a base URL to which http/protobuf appends ``/v1/traces``;
    ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true`` turn export off; headers of the variables go over
    the config's.

    Raises:
        ValueError: for an unknown protocol or a malformed header variable, naming the variable.
    """
    env = {k: v.strip() for k, v in (os.environ if environ is None else environ).items() if k.startswith("OTEL_")}
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true" or env.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = protocol or section.otlp_protocol.strip()
    if protocol not in ("http/protobuf", "grpc"):
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or grpc, got {protocol!r}")
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint and (base := env.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        endpoint = base.rstrip("/") + "/v1/traces" if protocol == "http/protobuf" else base
    if not (endpoint := endpoint or section.otlp_endpoint):
        return None
    headers = dict(section.otlp_headers)
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        try:
            headers.update(parse_headers(env.get(var, "")))
        except ValueError as e:
            raise ValueError(f"{var}: {e}") from None
    if protocol == "grpc":
        headers = {k.lower(): v for k, v in headers.items()}
    return OtlpSettings(endpoint, protocol, headers, section.export_timeout_s)


class _HoldBack(logging.Filter):
    """Keeps the SDK exporters' log records out of the log while a thread is inside :meth:`run`, which returns
    their messages, so that the caller says once, in its own words, what failed."""

    local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if (held := getattr(self.local, "held", None)) is not None:
            held.append(record.getMessage())
        return held is None

    def run(self, fn: Callable[..., T], *args: Any) -> tuple[T, list[str]]:
        """``(fn(*args), messages held back meanwhile)``."""
        held: list[str] = []
        self.local.held = held
        try:
            return fn(*args), held
        finally:
            self.local.held = None


HOLD = _HoldBack()
for _name in ("exporter.otlp.proto.http.trace_exporter", "exporter.otlp.proto.grpc.exporter", "sdk._shared_internal"):
    logging.getLogger("opentelemetry." + _name).addFilter(HOLD)


def sdk_exporter(settings: OtlpSettings) -> SpanExporter:
    """The SDK's OTLP span exporter for ``settings`` (its log records are held back inside ``HOLD.run``).

    Raises:
        ValueError: for an http/protobuf endpoint that is not an http:// or https:// URL with a host.
    """
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=settings.endpoint, headers=settings.headers, timeout=settings.timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url = urllib.parse.urlsplit(settings.endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"OTLP endpoint {settings.endpoint!r}: expected an http:// or https:// URL")
    return OTLPSpanExporter(endpoint=settings.endpoint, headers=settings.headers, timeout=settings.timeout_s)


class OtlpDelivery(SpanExporter):
    """The SDK's OTLP exporter for ``settings``, counted, quiet, and paused for ``retry_after_s`` after a failure.

    Attributes:
        sent: spans the backend accepted.
        dropped: spans not delivered (failed exports, and batches dropped while paused).
        ended: spans that ended (counted by :class:`ExportProcessor`).
        queue_full: spans the full queue dropped (known at shutdown: ``ended - sent - dropped``).

    Raises:
        ValueError: for an http/protobuf endpoint that is not an http:// or https:// URL with a host.
    """

    def __init__(self, settings: OtlpSettings, retry_after_s: float = 30.0) -> None:
        self.destination = f"{settings.endpoint} ({settings.protocol})"
        self._inner = sdk_exporter(settings)
        self._retry_after = retry_after_s
        self._paused_until = 0.0
        self.sent = self.dropped = self.queue_full = self.ended = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if time.monotonic() >= self._paused_until:
            try:
                result, held = HOLD.run(self._inner.export, spans)
            except Exception as e:  # noqa: BLE001 - whatever the reason, training goes on
                result, held = SpanExportResult.FAILURE, [f"{type(e).__name__}: {e}"]
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
                return result
            if not self._paused_until:  # the first failure
                logger.warning(
                    "OTLP export to %s failed (%s); spans still go to the file store, export is retried every %.0f "
                    "s; replay later with `harness traces push RUN_DIR --endpoint URL`",
                    self.destination,
                    held[-1] if held else "no reason given",
                    self._retry_after,
                )
            self._paused_until = time.monotonic() + self._retry_after
        self.dropped += len(spans)
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
    """The SDK's batch processor in front of an :class:`OtlpDelivery`: counts the spans that end, and holds back
    the SDK's "queue full" record (the delivery's summary counts those spans)."""

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
