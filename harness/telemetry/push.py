"""``harness traces push``: replay a run's OTLP-JSON file store into any OTLP backend.

Each stored line is read back as the SDK's spans (same trace and span ids, so links still resolve) and handed to
the SDK's own OTLP exporter (http/protobuf or grpc), one export per line, once every line has been checked. The
first failed export stops the replay with an error naming the line. Nothing is deduplicated: pushing a store twice
stores its spans twice where the backend allows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace.export import SpanExportResult

from harness.errors import HarnessError
from harness.telemetry._export import HOLD, OtlpSettings, sdk_exporter
from harness.telemetry._store import read_requests, spans_from_json, store_path

__all__ = ["PushError", "PushResult", "push_file_store"]

logger = logging.getLogger(__name__)


class PushError(HarnessError):
    """A stored request could not be read or delivered; the message names the file and line."""


@dataclass(frozen=True)
class PushResult:
    """What a push delivered."""

    requests: int
    spans: int


def push_file_store(
    path: str | Path,
    endpoint: str,
    *,
    protocol: str = "http/protobuf",
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> PushResult:
    """Send every request of a file store (a run directory or a ``traces.jsonl``) to ``endpoint`` (the full traces
    URL for http/protobuf, ``http://host:4317`` for grpc) with ``headers``, ``timeout`` seconds per request.

    Raises:
        PushError: for a missing file, a line that is not an OTLP request, or a request the backend refused.
    """
    p = store_path(path)
    if not p.is_file():
        raise PushError(f"{p}: no trace file store to push")
    if protocol not in ("http/protobuf", "grpc"):
        raise PushError(f"--protocol: expected http/protobuf or grpc, got {protocol!r}")
    for line_no, doc in read_requests(p):  # every line is checked before any is sent: nothing is half pushed
        try:
            spans_from_json(doc)
        except ValueError as e:
            raise PushError(f"{p}:{line_no}: {e}") from None
    try:
        exporter = sdk_exporter(OtlpSettings(endpoint, protocol, dict(headers or {}), timeout))
    except ValueError as e:
        raise PushError(f"--endpoint: {e}") from None
    n_req = n_spans = 0
    try:
        for line_no, spans in read_requests(p, spans=True):
            result, held = HOLD.run(exporter.export, spans)
            if result is not SpanExportResult.SUCCESS:
                why = held[-1] if held else "no reason given"
                raise PushError(f"{p}:{line_no}: could not deliver to {endpoint}: {why}")
            n_req, n_spans = n_req + 1, n_spans + len(spans)
    finally:
        HOLD.run(exporter.shutdown)
    logger.info("pushed %d spans in %d requests from %s to %s", n_spans, n_req, p, endpoint)
    return PushResult(n_req, n_spans)
