"""The file store ``traces.jsonl``: one OTLP/JSON ``ExportTraceServiceRequest`` per line, written and read back.

:class:`FileSpanExporter` is an SDK span exporter: each batch the SDK's ``BatchSpanProcessor`` hands it is encoded
by the OTLP exporters' own encoder (``opentelemetry.exporter.otlp.proto.common``), turned into protobuf's JSON
form and appended as one line with one ``write`` (so a trainer and an evaluator can share the file). The JSON form
follows the OTLP/JSON rules: lowerCamelCase names, trace and span ids as hex strings (protobuf's JSON form writes
bytes as base64; ids are rewritten), enums as integers, 64-bit integers as decimal strings.

Reading: :func:`read_requests` yields the stored requests, :func:`iter_spans` flattens them to plain dicts,
:func:`json_to_request` parses one back into the protobuf request (for ``harness traces push``), and
:func:`drop_steps_after` rewrites the store when a run resumes. This module sends nothing over the network.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = [
    "FileSpanExporter",
    "spans_to_json",
    "json_to_request",
    "read_requests",
    "iter_spans",
    "any_value",
    "drop_steps_after",
]

logger = logging.getLogger("harness.telemetry")


def _convert_ids(req: dict[str, Any], conv: Callable[[str], str]) -> None:
    for rs in req.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for sp in ss.get("spans", ()):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(k):
                        sp[k] = conv(sp[k])
                for link in sp.get("links", ()):
                    for k in ("traceId", "spanId"):
                        if link.get(k):
                            link[k] = conv(link[k])


def spans_to_json(spans: Sequence[ReadableSpan]) -> str:
    """One OTLP/JSON request line (no newline) for ``spans``: the SDK's protobuf encoding in JSON form."""
    doc = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    _convert_ids(doc, lambda s: base64.b64decode(s).hex())
    return json.dumps(doc, separators=(",", ":"))


def json_to_request(doc: dict[str, Any]) -> ExportTraceServiceRequest:
    """The protobuf request for one stored OTLP/JSON request.

    Raises:
        ValueError: when ``doc`` is not a valid OTLP/JSON trace request.
    """
    doc = json.loads(json.dumps(doc))  # deep copy; ids are rewritten in place
    try:
        _convert_ids(doc, lambda s: base64.b64encode(bytes.fromhex(s)).decode("ascii"))
        return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"not an OTLP/JSON ExportTraceServiceRequest: {e}") from None


class FileSpanExporter(SpanExporter):
    """Appends each exported batch to ``path`` as one OTLP/JSON line; a failing disk warns once, never raises.

    Attributes:
        lines_written: batches written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._failed = False
        self.lines_written = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            data = (spans_to_json(spans) + "\n").encode("utf-8")
            with self._lock:
                if self._fd < 0:
                    return SpanExportResult.FAILURE
                os.write(self._fd, data)
                self.lines_written += 1
            return SpanExportResult.SUCCESS
        except Exception as e:  # noqa: BLE001 - a full disk must not stop training; say so once
            if not self._failed:
                self._failed = True
                logger.warning("writing traces to %s failed (%s: %s); later traces may be missing", self.path,
                               type(e).__name__, e)  # fmt: skip
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_requests(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, request)`` for every line of a file store.

    A line that is not JSON (for example one cut short by a crash) is skipped with a warning naming the line.
    """
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except json.JSONDecodeError as e:
                logger.warning("%s:%d: skipped a line that is not JSON (%s)", path, n, e)
                continue
            if not isinstance(req, dict):
                logger.warning("%s:%d: skipped a line that is not a JSON object", path, n)
                continue
            yield n, req


def any_value(v: dict[str, Any]) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue``."""
    for key, conv in (("stringValue", str), ("boolValue", bool), ("intValue", int), ("doubleValue", float)):
        if key in v:
            return conv(v[key])
    if "arrayValue" in v:
        return [any_value(x) for x in v["arrayValue"].get("values", ())]
    if "kvlistValue" in v:
        return {kv["key"]: any_value(kv.get("value", {})) for kv in v["kvlistValue"].get("values", ())}
    return None


def _attrs(items: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: any_value(kv.get("value", {})) for kv in items or ()}


def iter_spans(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every span of a file store as a flat dict.

    Keys: ``name``, ``trace_id``, ``span_id``, ``parent_span_id`` (None for a root), ``start_ns``, ``end_ns``,
    ``attributes`` (resource attributes merged under the span's own), ``events`` (name, attributes) and
    ``links`` (trace_id, span_id, attributes).
    """
    for _, req in read_requests(path):
        for rs in req.get("resourceSpans", ()):
            res = _attrs(rs.get("resource", {}).get("attributes"))
            for ss in rs.get("scopeSpans", ()):
                for sp in ss.get("spans", ()):
                    yield {
                        "name": sp.get("name", ""),
                        "trace_id": sp.get("traceId", ""),
                        "span_id": sp.get("spanId", ""),
                        "parent_span_id": sp.get("parentSpanId") or None,
                        "start_ns": int(sp.get("startTimeUnixNano", 0)),
                        "end_ns": int(sp.get("endTimeUnixNano", 0)),
                        "attributes": {**res, **_attrs(sp.get("attributes"))},
                        "events": [
                            {"name": e.get("name", ""), "attributes": _attrs(e.get("attributes"))}
                            for e in sp.get("events", ())
                        ],
                        "links": [
                            {
                                "trace_id": ln.get("traceId", ""),
                                "span_id": ln.get("spanId", ""),
                                "attributes": _attrs(ln.get("attributes")),
                            }
                            for ln in sp.get("links", ())
                        ],
                    }


def _span_step(span: dict[str, Any]) -> int:
    for kv in span.get("attributes", ()):
        if kv.get("key") == "harness.train.step":
            try:
                return int(any_value(kv.get("value", {})))
            except (TypeError, ValueError):
                return 0
    return 0


def drop_steps_after(path: str | Path, step: int) -> int:
    """Remove from the file store at ``path`` every span of a step after ``step``; return how many were removed.

    A run resumed from the checkpoint of ``step`` traces the steps after it again; without this, the steps between
    that checkpoint and the interrupt would be stored twice. Lines that are not JSON (cut by a kill) are dropped
    too. The file is replaced atomically; a missing file is left alone.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    removed, lines = 0, []
    for _, req in read_requests(path):
        for rs in req.get("resourceSpans", ()):
            for ss in rs.get("scopeSpans", ()):
                spans = ss.get("spans", [])
                ss["spans"] = [sp for sp in spans if _span_step(sp) <= step]
                removed += len(spans) - len(ss["spans"])
            rs["scopeSpans"] = [ss for ss in rs.get("scopeSpans", ()) if ss.get("spans")]
        req["resourceSpans"] = [rs for rs in req.get("resourceSpans", ()) if rs.get("scopeSpans")]
        if req["resourceSpans"]:
            lines.append(json.dumps(req, separators=(",", ":")))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)
    return removed
