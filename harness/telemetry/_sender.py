"""Sending encoded traces to an OTLP backend: a bounded outbox and one thread that sends them in batches.

:class:`OtlpSender` is handed each finished trace as an OTLP/JSON request, which it encodes to the protobuf wire
form (:mod:`harness.telemetry._otlp_pb`), or as serialized bytes. It runs in the export process (see
:mod:`harness.telemetry._shipper`), and in the training process only when no export process could start. It queues
it (at most ``max_queue_spans`` spans; beyond that traces are dropped and counted) and its thread sends a batch
every ``schedule_delay_s``, or as soon as ``max_batch_spans`` spans wait. A batch is the queued bodies joined:
concatenated requests are one request. When a send fails, one warning is logged for the whole run and batches are
dropped without a network call for ``retry_after_s``; then one send is tried again. Nothing here ever blocks the
caller of :meth:`OtlpSender.offer` or raises into it.

:class:`Transport` is the wire: http/protobuf over one kept-alive connection, or grpc with the request passed as
bytes. This module does not decide what is traced.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.parse
from typing import Any

from harness.telemetry._export import OtlpSettings
from harness.telemetry._otlp_pb import count_spans, encode_request

__all__ = ["OtlpSender", "Transport", "ExportError", "check_endpoint"]

logger = logging.getLogger("harness.telemetry._export")

_GRPC_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class ExportError(RuntimeError):
    """A request was not accepted: refused, timed out or answered with an error status."""


def check_endpoint(settings: OtlpSettings) -> urllib.parse.SplitResult:
    """The parsed endpoint URL.

    Raises:
        ValueError: for an http/protobuf endpoint that is not an http:// or https:// URL with a host.
    """
    url = urllib.parse.urlsplit(settings.endpoint)
    if settings.protocol != "grpc" and (url.scheme not in ("http", "https") or not url.hostname):
        raise ValueError(f"OTLP endpoint {settings.endpoint!r}: expected an http:// or https:// URL")
    return url


class Transport:
    """Sends serialized ``ExportTraceServiceRequest`` bodies to one OTLP endpoint."""

    def __init__(self, settings: OtlpSettings) -> None:
        self.settings = settings
        self._conn: http.client.HTTPConnection | None = None
        self._used = False
        self._grpc: Any = None
        self._channel: Any = None
        if settings.protocol == "grpc":
            import grpc

            target = settings.endpoint.split("://", 1)[-1].rstrip("/")
            self._channel = (
                grpc.secure_channel(target, grpc.ssl_channel_credentials())
                if settings.endpoint.startswith("https://")
                else grpc.insecure_channel(target)
            )
            self._grpc = self._channel.unary_unary(_GRPC_METHOD)  # no serializers: bytes in, bytes out
            self._metadata = [(k.lower(), v) for k, v in settings.headers.items()]
        else:
            url = check_endpoint(settings)
            self._https = url.scheme == "https"
            self._host, self._port = url.hostname or "", url.port  # check_endpoint refused a URL without a host
            self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            self._headers = {"Content-Type": "application/x-protobuf", **settings.headers}

    def send(self, body: bytes) -> None:
        """Deliver one request.

        Raises:
            ExportError: when it was not accepted (the reason in the message).
        """
        if self._grpc is not None:
            try:
                self._grpc(body, metadata=self._metadata or None, timeout=self.settings.timeout_s)
            except Exception as e:  # noqa: BLE001 - grpc.RpcError and friends: all mean "not delivered"
                code = getattr(e, "code", None)
                raise ExportError(f"grpc {code().name if callable(code) else type(e).__name__}") from None
            return
        for attempt in (0, 1):
            reused = self._conn is not None and self._used
            try:
                status, data = self._post(body)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self._close_http()
                if reused and attempt == 0:  # the server closed an idle kept-alive connection: once more, fresh
                    continue
                raise ExportError(f"{type(e).__name__}: {e}") from None
            except (OSError, http.client.HTTPException) as e:
                self._close_http()
                raise ExportError(f"{type(e).__name__}: {e}") from None
            if not 200 <= status < 300:
                raise ExportError(f"HTTP {status}: {data[:200].decode(errors='replace')}")
            return

    def _post(self, body: bytes) -> tuple[int, bytes]:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self.settings.timeout_s)
            self._used = False
        self._conn.request("POST", self._path, body=body, headers=self._headers)
        resp = self._conn.getresponse()
        data = resp.read()
        self._used = True
        if resp.will_close:
            self._close_http()
        return resp.status, data

    def _close_http(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._close_http()
        if self._channel is not None:
            self._channel.close()


class OtlpSender:
    """Batches encoded traces to an OTLP backend on its own thread; see the module docstring.

    Attributes:
        sent: spans the backend accepted.
        dropped: spans not delivered (failed sends and batches dropped while backing off).
        queue_full: spans dropped because the outbox was full.
    """

    def __init__(
        self,
        settings: OtlpSettings,
        *,
        max_queue_spans: int = 2048,
        max_batch_spans: int = 512,
        schedule_delay_s: float = 1.0,
        retry_after_s: float = 30.0,
    ) -> None:
        self.settings = settings
        self.destination = f"{settings.endpoint} ({settings.protocol})"
        self._transport = Transport(settings)
        self._max_queue = max_queue_spans
        self._max_batch = max(1, min(max_batch_spans, max_queue_spans))
        self._delay = schedule_delay_s
        self._retry_after = retry_after_s
        self._queue: list[tuple[bytes, int]] = []
        self._queued = 0
        self._inflight = False
        self._flushing = 0
        self._stopping = False
        self._open_until = 0.0
        self._warned = False
        self._cv = threading.Condition()
        self.sent = self.dropped = self.queue_full = 0
        self._thread = threading.Thread(target=self._run, name="harness-otlp-sender", daemon=True)
        self._thread.start()

    def offer(self, body: bytes, spans: int) -> None:
        """Queue one encoded request of ``spans`` spans (dropped and counted when the outbox is full)."""
        with self._cv:
            if self._stopping or self._queued + spans > self._max_queue:
                self.queue_full += spans
                return
            self._queue.append((body, spans))
            self._queued += spans
            if self._queued >= self._max_batch:
                self._cv.notify_all()

    def offer_request(self, doc: dict[str, Any]) -> None:
        """Queue one OTLP/JSON request dict (encoded here); one that is not a trace request is skipped."""
        try:
            body, spans = encode_request(doc), count_spans(doc)
        except (KeyError, ValueError, TypeError, AttributeError):
            return
        self.offer(body, spans)

    def offer_lines(self, data: bytes, spans: int) -> None:  # noqa: ARG002 - each line counts its own spans
        """Queue OTLP-JSON lines, as the file store writes them (the interface of the export process's pipe)."""
        for line in data.splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                self.offer_request(doc)

    def _take(self) -> list[tuple[bytes, int]]:
        batch: list[tuple[bytes, int]] = []
        n = 0
        while self._queue and (not batch or n + self._queue[0][1] <= self._max_batch):
            item = self._queue.pop(0)
            batch.append(item)
            n += item[1]
        self._queued -= n
        return batch

    def _run(self) -> None:
        while True:
            with self._cv:
                deadline = time.monotonic() + self._delay
                while not (self._stopping or (self._flushing and self._queue) or self._queued >= self._max_batch):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                if not self._queue:
                    if self._stopping:
                        return
                    self._cv.notify_all()
                    continue
                batch = self._take()
                self._inflight = True
            try:
                self._deliver(batch)
            finally:
                with self._cv:
                    self._inflight = False
                    self._cv.notify_all()

    def _deliver(self, batch: list[tuple[bytes, int]]) -> None:
        n = sum(k for _, k in batch)
        if time.monotonic() < self._open_until:
            self.dropped += n
            return
        try:
            self._transport.send(b"".join(body for body, _ in batch))
        except Exception as e:  # noqa: BLE001 - whatever the reason, training goes on
            self.dropped += n
            self._open_until = time.monotonic() + self._retry_after
            if not self._warned:
                self._warned = True
                logger.warning(
                    "OTLP export to %s failed (%s); spans still go to the file store, export is retried every "
                    "%.0f s; replay later with `harness traces push RUN_DIR --endpoint URL`",
                    self.destination,
                    e,
                    self._retry_after,
                )
            return
        self.sent += n

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Send everything queued now; True when the outbox is empty within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            self._flushing += 1
            self._cv.notify_all()
            try:
                while self._queue or self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._thread.is_alive():
                        return False
                    self._cv.wait(left)
            finally:
                self._flushing -= 1
        return True

    def shutdown(self) -> None:
        """Send what is queued (a hung backend costs at most about one request timeout), then stop."""
        self.flush(timeout_s=2 * self.settings.timeout_s + 1)
        with self._cv:
            self._stopping = True
            self.dropped += self._queued  # whatever a hung backend left behind
            self._queue.clear()
            self._queued = 0
            self._cv.notify_all()
        self._thread.join(timeout=self.settings.timeout_s + 5)
        self._transport.close()
        if self.dropped or self.queue_full:
            logger.info(
                "OTLP export to %s: %d spans sent, %d not delivered, %d dropped by the full queue",
                self.destination,
                self.sent,
                self.dropped,
                self.queue_full,
            )
