"""``harness traces push``: replay a run's OTLP-JSON file store into any OTLP backend.

Each stored line is one ``ExportTraceServiceRequest``; it is sent as is (same trace and span ids, so links made
in the original run still resolve), over http/protobuf (POST ``application/x-protobuf``) or grpc. Lines are sent
in order, one request each, after every line has been checked; the first failed request stops the replay with
an error naming the line.
This module does not deduplicate: pushing the same store twice stores the spans twice where the backend allows.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.telemetry._store import json_to_request, read_requests

__all__ = ["PushError", "PushResult", "push_file_store"]

logger = logging.getLogger(__name__)


class PushError(HarnessError):
    """A stored request could not be read or delivered; the message names the file and line."""


@dataclass(frozen=True)
class PushResult:
    """What a push delivered."""

    requests: int
    spans: int


def _send_http(endpoint: str, body: bytes, headers: Mapping[str, str], timeout: float) -> None:
    req = urllib.request.Request(
        endpoint, data=body, method="POST", headers={"Content-Type": "application/x-protobuf", **headers}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        r.read()


def _grpc_sender(endpoint: str, headers: Mapping[str, str], timeout: float):
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    target = endpoint.split("://", 1)[-1].rstrip("/")
    channel = (
        grpc.secure_channel(target, grpc.ssl_channel_credentials())
        if endpoint.startswith("https://")
        else grpc.insecure_channel(target)
    )
    stub = TraceServiceStub(channel)
    metadata = [(k.lower(), v) for k, v in headers.items()]

    def send(req) -> None:
        stub.Export(req, metadata=metadata, timeout=timeout)

    return send, channel


def push_file_store(
    path: str | Path,
    endpoint: str,
    *,
    protocol: str = "http/protobuf",
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> PushResult:
    """Send every request of a file store (a run directory or a ``traces.jsonl``) to ``endpoint``.

    Args:
        path: the run directory or the file.
        endpoint: full traces URL for http/protobuf (``http://host:4318/v1/traces``); ``http://host:4317`` for grpc.
        protocol: ``http/protobuf`` or ``grpc``.
        headers: request headers (e.g. ``x-mlflow-experiment-id``).
        timeout: seconds per request.

    Raises:
        PushError: for a missing file, a line that is not an OTLP request, or a request the backend refused.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "traces.jsonl"
    if not p.is_file():
        raise PushError(f"{p}: no trace file store to push")
    if protocol not in ("http/protobuf", "grpc"):
        raise PushError(f"--protocol: expected http/protobuf or grpc, got {protocol!r}")
    for line_no, doc in read_requests(p):  # validate every line before sending any, so nothing is half pushed
        try:
            json_to_request(doc)
        except ValueError as e:
            raise PushError(f"{p}:{line_no}: {e}") from None
    headers = dict(headers or {})
    channel = None
    if protocol == "grpc":
        send_grpc, channel = _grpc_sender(endpoint, headers, timeout)
    n_req = n_spans = 0
    try:
        for line_no, doc in read_requests(p):
            req = json_to_request(doc)
            try:
                if channel is not None:
                    send_grpc(req)
                else:
                    _send_http(endpoint, req.SerializeToString(), headers, timeout)
            except urllib.error.HTTPError as e:
                detail = e.read()[:200].decode(errors="replace")
                raise PushError(f"{p}:{line_no}: {endpoint} answered HTTP {e.code}: {detail}") from None
            except Exception as e:  # noqa: BLE001 - URLError, OSError, grpc.RpcError: all mean "not delivered"
                raise PushError(f"{p}:{line_no}: could not deliver to {endpoint}: {e}") from None
            n_req += 1
            n_spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    finally:
        if channel is not None:
            channel.close()
    logger.info("pushed %d spans in %d requests from %s to %s", n_spans, n_req, p, endpoint)
    return PushResult(n_req, n_spans)
