"""The file store ``traces.jsonl``: one OTLP/JSON ``ExportTraceServiceRequest`` per line, written and read back.

:class:`FileSpanExporter` is an SDK span exporter: each batch the SDK's ``BatchSpanProcessor`` hands it becomes
one line, written with one ``write`` (a trainer and an evaluator can share the file). :func:`spans_to_json` is the
only encoder: the SDK's own OTLP encoding (``encode_spans``) in protobuf's JSON form, ids in hex as OTLP/JSON has
them. :func:`spans_from_json` reads a line back into the SDK's spans (for ``harness traces push`` and the readers),
:func:`iter_spans` flattens them to dicts, :func:`drop_steps_after` rewrites the store when a run resumes.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

from harness.telemetry._attrs import hex_ids, num

__all__ = ["FileSpanExporter", "spans_to_json", "hex_span_ids", "spans_from_json", "read_requests"]
__all__ += ["iter_spans", "drop_steps_after", "flat_span", "span_from_json", "store_path"]

logger = logging.getLogger("harness.telemetry")


def spans_to_json(spans: Sequence[ReadableSpan]) -> str:
    """One OTLP/JSON request line (no newline) for ``spans``: protobuf's JSON form of the SDK's ``encode_spans``,
    with the trace and span ids in hex (protobuf's JSON form writes bytes in base64, OTLP/JSON asks for hex)."""
    doc = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", ()):
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                hex_span_ids(sp)
    return json.dumps(doc, separators=(",", ":"))


def hex_span_ids(span: dict[str, Any]) -> dict[str, Any]:
    """A span in protobuf's JSON form, its ids and its links' ids turned from base64 to hex (OTLP/JSON), in place."""
    for obj in (span, *span.get("links", ())):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in obj:
                obj[key] = base64.b64decode(obj[key]).hex()
    return span


def _any(v: Mapping[str, Any]) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue``."""
    for key, conv in (("stringValue", str), ("boolValue", bool), ("intValue", int), ("doubleValue", float)):
        if key in v:
            return conv(v[key])
    if "arrayValue" in v:
        return [_any(x) for x in v["arrayValue"].get("values", ())]
    if "kvlistValue" in v:
        return _attrs(v["kvlistValue"].get("values"))
    return None


def _attrs(items: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: _any(kv.get("value", {})) for kv in items or ()}


def _context(trace_id: str, span_id: str, flags: int = 0x100, state: str | None = None) -> SpanContext:
    ctx = SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        bool(flags & 0x200),
        TraceFlags(flags & 0xFF),
        TraceState.from_header([state]) if state else None,
    )
    if not ctx.is_valid:
        raise ValueError(f"invalid trace or span id {trace_id!r}/{span_id!r}")
    return ctx


def span_from_json(sp: Mapping[str, Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    """One OTLP/JSON span (hex ids) as the SDK's span."""
    flags, status = int(sp.get("flags", 0x100)), sp.get("status") or {}
    return ReadableSpan(
        name=sp.get("name", ""),
        context=_context(sp["traceId"], sp["spanId"], 0x100, sp.get("traceState")),
        parent=_context(sp["traceId"], sp["parentSpanId"], flags) if sp.get("parentSpanId") else None,
        resource=resource,
        attributes=_attrs(sp.get("attributes")),
        events=[
            Event(e.get("name", ""), _attrs(e.get("attributes")), int(e.get("timeUnixNano") or 0))
            for e in sp.get("events") or ()
        ],
        links=[
            Link(_context(ln["traceId"], ln["spanId"], int(ln.get("flags", 0x100))), _attrs(ln.get("attributes")))
            for ln in sp.get("links") or ()
        ],
        kind=SpanKind(int(sp.get("kind", 1)) - 1),
        status=Status(StatusCode(int(status.get("code", 0))), status.get("message")),
        start_time=int(sp.get("startTimeUnixNano") or 0),
        end_time=int(sp.get("endTimeUnixNano") or 0),
        instrumentation_scope=scope,
    )


def spans_from_json(doc: Mapping[str, Any]) -> list[ReadableSpan]:
    """The SDK spans of one stored request; the SDK's encoding of them equals the stored request.

    Raises:
        ValueError: when ``doc`` is not a valid OTLP/JSON trace request.
    """
    try:
        out = []
        for rs in doc["resourceSpans"]:
            resource = Resource(_attrs((rs.get("resource") or {}).get("attributes")), rs.get("schemaUrl"))
            for ss in rs["scopeSpans"]:
                sc = ss.get("scope") or {}
                scope = InstrumentationScope(
                    sc.get("name", ""), sc.get("version"), ss.get("schemaUrl"), _attrs(sc.get("attributes"))
                )
                out += [span_from_json(sp, resource, scope) for sp in ss["spans"]]
        return out
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"not an OTLP/JSON ExportTraceServiceRequest: {type(e).__name__}: {e}") from None


class FileSpanExporter(SpanExporter):
    """Appends each exported batch to ``path`` as one OTLP/JSON line, with one ``write``; a failing disk warns once,
    never raises.

    Attributes:
        lines_written: batches written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lines_written = 0
        self._failed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        open(self.path, "ab").close()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with open(self.path, "ab", buffering=0) as f:  # unbuffered: the line is one write(2)
                f.write((spans_to_json(spans) + "\n").encode("utf-8"))
        except Exception as e:  # noqa: BLE001 - a full disk must not stop training; say so once
            if not self._failed:
                self._failed = True
                logger.warning(
                    "writing traces to %s failed (%s: %s); later traces may be missing", self.path, type(e).__name__, e
                )
            return SpanExportResult.FAILURE
        self.lines_written += 1
        return SpanExportResult.SUCCESS


def store_path(path: str | Path) -> Path:
    """A run directory's ``traces.jsonl``, or ``path`` itself when it is not a directory."""
    p = Path(path)
    return p / "traces.jsonl" if p.is_dir() else p


def read_requests(path: str | Path, *, spans: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line_number, request)`` per line of a file store, or with ``spans`` its SDK spans.

    A line that is not JSON (for example one cut short by a crash), or with ``spans`` not an OTLP request, is
    skipped with a warning naming the line.
    """
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("not a JSON object")
                yield n, spans_from_json(req) if spans else req
            except ValueError as e:
                logger.warning("%s:%d: skipped a line that is not an OTLP/JSON request (%s)", path, n, e)


def flat_span(sp: ReadableSpan) -> dict[str, Any]:
    """One span as a flat dict, its resource's attributes merged under its own (see :func:`iter_spans`)."""
    return {
        "name": sp.name,
        **hex_ids(sp.context),
        "parent_span_id": f"{sp.parent.span_id:016x}" if sp.parent else None,
        "start_ns": sp.start_time or 0,
        "end_ns": sp.end_time or 0,
        "attributes": {**sp.resource.attributes, **(sp.attributes or {})},
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in sp.events],
        "links": [{**hex_ids(ln.context), "attributes": dict(ln.attributes or {})} for ln in sp.links],
    }


def iter_spans(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every span of a file store as a flat dict: ``name``, ``trace_id``, ``span_id``, ``parent_span_id`` (None for
    a root), ``start_ns``, ``end_ns``, ``attributes`` (resource attributes merged under the span's own),
    ``events`` (name, attributes) and ``links`` (trace_id, span_id, attributes)."""
    for _, spans in read_requests(path, spans=True):
        yield from map(flat_span, spans)


def drop_steps_after(path: str | Path, step: int) -> int:
    """Remove from the file store every span of a step after ``step``; return how many were removed.

    A run resumed from the checkpoint of ``step`` traces the later steps again; without this they would be stored
    twice. Lines that are not OTLP/JSON (cut by a kill) are dropped too. The file is replaced atomically; a
    missing file is left alone.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    removed, lines = 0, []
    for _, spans in read_requests(path, spans=True):
        kept = [sp for sp in spans if (num((sp.attributes or {}).get("harness.train.step")) or 0) <= step]
        removed += len(spans) - len(kept)
        if kept:
            lines.append(spans_to_json(kept) + "\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)
    return removed
