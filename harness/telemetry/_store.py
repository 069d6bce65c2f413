"""The file store ``traces.jsonl``: one OTLP/JSON ``ExportTraceServiceRequest`` per line, written and read back.

:class:`FileSpanExporter` is an SDK span exporter: each batch the SDK's ``BatchSpanProcessor`` hands it is
written as one line with one ``write`` (so a trainer and an evaluator can share the file). The line is protobuf's
JSON form of the OTLP exporters' own encoding (``opentelemetry.exporter.otlp.proto.common``) with hex ids, as the
OTLP/JSON rules want it (lowerCamelCase names, enums as integers, 64-bit integers as decimal strings), built
directly from the spans by :func:`spans_to_json`: a third of the CPU of encoding to protobuf and then to JSON,
and the tests compare the two for equality.

Reading: :func:`read_requests` yields the stored requests, :func:`iter_spans` flattens them to plain dicts,
:func:`spans_from_json` turns one back into the SDK's spans (``harness traces push`` hands them to the SDK's
exporters), and
:func:`drop_steps_after` rewrites the store when a run resumes. This module sends nothing over the network.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import INVALID_SPAN_CONTEXT, Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

__all__ = [
    "FileSpanExporter",
    "spans_to_json",
    "spans_from_json",
    "span_from_json",
    "read_requests",
    "store_path",
    "iter_spans",
    "flat_span",
    "any_value",
    "drop_steps_after",
]

logger = logging.getLogger("harness.telemetry")


_I64 = range(-(2**63), 2**63)


def _value(v: Any) -> dict[str, Any]:
    """The OTLP/JSON ``AnyValue`` of an attribute value, as protobuf's JSON form writes the SDK's encoding."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, int):
        if v not in _I64:
            raise ValueError(f"{v} does not fit in an int64")
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v if math.isfinite(v) else _NONFINITE[str(v)]}
    if v is None:
        return {}
    if isinstance(v, bytes):
        return {"bytesValue": base64.b64encode(v).decode("ascii")}
    if isinstance(v, Mapping):
        return {"kvlistValue": {"values": [{"key": str(k), "value": _value(x)} for k, x in v.items()]} if v else {}}
    if isinstance(v, Sequence):
        return {"arrayValue": {"values": [_value(x) for x in v]} if v else {}}
    raise TypeError(f"an attribute value of type {type(v).__name__}")


_NONFINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _kv(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    out = []
    for k, v in (attrs or {}).items():
        try:
            out.append({"key": k, "value": _value(v)})
        except (TypeError, ValueError) as e:  # the SDK's encoder leaves such a key out too (and logs it)
            logger.debug("attribute %s not stored: %s", k, e)
    return {"values": out} if out else {}


def _attrs_field(doc: dict[str, Any], attrs: Mapping[str, Any] | None, dropped: int = 0) -> dict[str, Any]:
    values = _kv(attrs).get("values")
    if values:
        doc["attributes"] = values
    if dropped:
        doc["droppedAttributesCount"] = dropped
    return doc


def _span(sp: ReadableSpan) -> dict[str, Any]:
    ctx, parent = sp.get_span_context() or INVALID_SPAN_CONTEXT, sp.parent
    doc: dict[str, Any] = {"traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}"}
    if ctx.trace_state:
        doc["traceState"] = ",".join(f"{k}={v}" for k, v in ctx.trace_state.items())
    if parent:
        doc["parentSpanId"] = f"{parent.span_id:016x}"
    doc["flags"] = 0x300 if parent is not None and parent.is_remote else 0x100
    if sp.name:
        doc["name"] = sp.name
    doc["kind"] = sp.kind.value + 1  # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on
    for key, t in (("startTimeUnixNano", sp.start_time), ("endTimeUnixNano", sp.end_time)):
        if t:
            doc[key] = str(t)
    _attrs_field(doc, sp.attributes, sp.dropped_attributes)
    if sp.events:
        doc["events"] = [_event(e) for e in sp.events]
    if sp.dropped_events:
        doc["droppedEventsCount"] = sp.dropped_events
    if sp.links:
        doc["links"] = [_link(ln) for ln in sp.links]
    if sp.dropped_links:
        doc["droppedLinksCount"] = sp.dropped_links
    status: dict[str, Any] = {}
    if sp.status.description:
        status["message"] = sp.status.description
    if sp.status.status_code.value:
        status["code"] = sp.status.status_code.value
    doc["status"] = status
    return doc


def _event(e: Event) -> dict[str, Any]:
    doc: dict[str, Any] = {"timeUnixNano": str(e.timestamp)} if e.timestamp else {}
    if e.name:
        doc["name"] = e.name
    return _attrs_field(doc, e.attributes, e.dropped_attributes)


def _link(ln: Link) -> dict[str, Any]:
    doc = {"traceId": f"{ln.context.trace_id:032x}", "spanId": f"{ln.context.span_id:016x}"}
    _attrs_field(doc, ln.attributes, ln.dropped_attributes)
    return {**doc, "flags": 0x300 if ln.context.is_remote else 0x100}


def spans_to_json(spans: Sequence[ReadableSpan]) -> str:
    """One OTLP/JSON request line (no newline) for ``spans``.

    Equal, once parsed, to protobuf's JSON form of the SDK's own OTLP encoding (``encode_spans``) with the ids
    written as hex (the test suite checks this on spans with every attribute type, events, links and statuses);
    built directly from the spans because going through protobuf cost about three times as much CPU.
    """
    groups: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    for sp in spans:
        groups.setdefault(sp.resource, {}).setdefault(sp.instrumentation_scope, []).append(_span(sp))
    out = []
    for resource, scopes in groups.items():
        scope_spans = []
        for scope, docs in scopes.items():
            sdoc: dict[str, Any] = {}
            if scope is not None:
                if scope.name:
                    sdoc["name"] = scope.name
                if scope.version:
                    sdoc["version"] = scope.version
                _attrs_field(sdoc, scope.attributes)
            entry: dict[str, Any] = {"scope": sdoc, "spans": docs}
            if scope is not None and scope.schema_url:
                entry["schemaUrl"] = scope.schema_url
            scope_spans.append(entry)
        rs: dict[str, Any] = {"resource": _attrs_field({}, resource.attributes), "scopeSpans": scope_spans}
        if resource.schema_url:
            rs["schemaUrl"] = resource.schema_url
        out.append(rs)
    return json.dumps({"resourceSpans": out}, separators=(",", ":"))


def spans_from_json(doc: Mapping[str, Any]) -> list[ReadableSpan]:
    """The SDK spans of one stored OTLP/JSON request, for the SDK's exporters (``harness traces push``).

    The SDK's own encoding of them equals the request that was stored (the test suite checks it).

    Raises:
        ValueError: when ``doc`` is not a valid OTLP/JSON trace request.
    """
    try:
        return [
            span_from_json(
                sp, Resource(_attrs((rs.get("resource") or {}).get("attributes")), rs.get("schemaUrl")), _scope(ss)
            )
            for rs in doc["resourceSpans"]
            for ss in rs["scopeSpans"]
            for sp in ss["spans"]
        ]
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"not an OTLP/JSON ExportTraceServiceRequest: {type(e).__name__}: {e}") from None


def _scope(ss: Mapping[str, Any]) -> InstrumentationScope:
    sc = ss.get("scope") or {}
    return InstrumentationScope(
        sc.get("name", ""), sc.get("version"), ss.get("schemaUrl"), _attrs(sc.get("attributes"))
    )


def _context(trace_id: str, span_id: str, flags: int = 0, state: str | None = None) -> SpanContext:
    ctx = SpanContext(int(trace_id, 16), int(span_id, 16), bool(flags & 0x200), TraceFlags(flags & 0xFF),
                      TraceState.from_header([state]) if state else None)  # fmt: skip
    if not ctx.is_valid:
        raise ValueError(f"invalid trace or span id {trace_id!r}/{span_id!r}")
    return ctx


def span_from_json(sp: Mapping[str, Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    flags, status = int(sp.get("flags", 0x100)), sp.get("status") or {}
    parent = _context(sp["traceId"], sp["parentSpanId"], flags) if sp.get("parentSpanId") else None
    return ReadableSpan(
        name=sp.get("name", ""),
        context=_context(sp["traceId"], sp["spanId"], 0x100, sp.get("traceState")),
        parent=parent,
        resource=resource,
        attributes=_attrs(sp.get("attributes")),
        events=[
            Event(e.get("name", ""), _attrs(e.get("attributes")), int(e.get("timeUnixNano") or 0))
            for e in sp.get("events") or ()
        ],  # fmt: skip
        links=[
            Link(_context(ln["traceId"], ln["spanId"], int(ln.get("flags", 0x100))), _attrs(ln.get("attributes")))
            for ln in sp.get("links") or ()
        ],  # fmt: skip
        kind=SpanKind(int(sp.get("kind", 1)) - 1),
        status=Status(StatusCode(int(status.get("code", 0))), status.get("message")),
        start_time=int(sp.get("startTimeUnixNano") or 0),
        end_time=int(sp.get("endTimeUnixNano") or 0),
        instrumentation_scope=scope,
    )


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


def store_path(path: str | Path) -> Path:
    """A run directory's ``traces.jsonl``, or ``path`` itself when it is not a directory."""
    p = Path(path)
    return p / "traces.jsonl" if p.is_dir() else p


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


def flat_span(sp: ReadableSpan) -> dict[str, Any]:
    """One span as a flat dict, its resource's attributes merged under its own (see :func:`iter_spans`)."""
    ctx = sp.get_span_context() or INVALID_SPAN_CONTEXT
    links = [{"trace_id": f"{ln.context.trace_id:032x}", "span_id": f"{ln.context.span_id:016x}",
              "attributes": dict(ln.attributes or {})} for ln in sp.links]  # fmt: skip
    return {
        "name": sp.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{sp.parent.span_id:016x}" if sp.parent else None,
        "start_ns": sp.start_time or 0,
        "end_ns": sp.end_time or 0,
        "attributes": {**sp.resource.attributes, **(sp.attributes or {})},
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in sp.events],
        "links": links,
    }


def _stored_spans(path: Path) -> Iterator[list[ReadableSpan]]:
    """The spans of each line of a file store; a line that is not an OTLP request is skipped with a warning."""
    for n, req in read_requests(path):
        try:
            yield spans_from_json(req)
        except ValueError as e:
            logger.warning("%s:%d: skipped: %s", path, n, e)


def iter_spans(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every span of a file store as a flat dict.

    Keys: ``name``, ``trace_id``, ``span_id``, ``parent_span_id`` (None for a root), ``start_ns``, ``end_ns``,
    ``attributes`` (resource attributes merged under the span's own), ``events`` (name, attributes) and
    ``links`` (trace_id, span_id, attributes).
    """
    for spans in _stored_spans(Path(path)):
        yield from (flat_span(sp) for sp in spans)


def _step_of(span: ReadableSpan) -> int:
    try:
        return int((span.attributes or {}).get("harness.train.step") or 0)  # type: ignore[arg-type]  # a list: caught
    except (TypeError, ValueError):
        return 0


def drop_steps_after(path: str | Path, step: int) -> int:
    """Remove from the file store at ``path`` every span of a step after ``step``; return how many were removed.

    A run resumed from the checkpoint of ``step`` traces the steps after it again; without this, the steps between
    that checkpoint and the interrupt would be stored twice. Lines that are not OTLP/JSON (cut by a kill) are
    dropped too. The file is replaced atomically; a missing file is left alone.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    removed, lines = 0, []
    for spans in _stored_spans(path):
        kept = [sp for sp in spans if _step_of(sp) <= step]
        removed += len(spans) - len(kept)
        if kept:
            lines.append(spans_to_json(kept))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)
    return removed
