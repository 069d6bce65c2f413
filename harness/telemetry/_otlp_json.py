"""The OTLP JSON encoding of spans, as stored one ``ExportTraceServiceRequest`` per line in ``traces.jsonl``.

Encoding follows the OTLP/JSON rules of the specification (lowerCamelCase field names, trace and span ids as
hex strings, enums as integers, 64-bit integers as decimal strings), written straight from the SDK's spans. Decoding turns a stored line back into a protobuf request so it can be replayed into any
OTLP backend. :func:`iter_spans` flattens stored lines into plain dicts for reading. This module does not write
files or send anything.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["spans_to_otlp_json", "otlp_json_to_request", "iter_spans", "read_requests", "any_value"]

logger = logging.getLogger(__name__)

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _b64_to_hex(s: str) -> str:
    return base64.b64decode(s).hex()


def _hex_to_b64(s: str) -> str:
    return base64.b64encode(bytes.fromhex(s)).decode("ascii")


def _convert_ids(req: dict[str, Any], conv) -> None:
    for rs in req.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for sp in ss.get("spans", ()):
                for k in _ID_KEYS:
                    if sp.get(k):
                        sp[k] = conv(sp[k])
                for link in sp.get("links", ()):
                    for k in ("traceId", "spanId"):
                        if link.get(k):
                            link[k] = conv(link[k])


def _value(v: Any) -> dict[str, Any]:
    t = type(v)  # exact types first: this runs for every attribute of every span
    if t is float:
        return {"doubleValue": v}
    if t is str:
        return {"stringValue": v}
    if t is bool:
        return {"boolValue": v}
    if t is int:
        return {"intValue": str(v)}
    if isinstance(v, bool):
        return {"boolValue": bool(v)}
    if isinstance(v, int):
        return {"intValue": str(int(v))}
    if isinstance(v, float):
        return {"doubleValue": float(v)}
    if isinstance(v, str):
        return {"stringValue": str(v)}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _kvs(attrs: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attrs or {}).items()]


def _flags(ctx: Any) -> int:
    # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE (0x100), plus CONTEXT_IS_REMOTE (0x200) for a remote parent or link
    return 0x100 | (0x200 if ctx is not None and ctx.is_remote else 0)


def _span_json(sp: ReadableSpan) -> dict[str, Any]:
    ctx = sp.get_span_context()
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
        "name": sp.name,
        "kind": sp.kind.value + 1,  # the SDK's INTERNAL is 0, OTLP's SPAN_KIND_INTERNAL is 1
        "startTimeUnixNano": str(sp.start_time or 0),
        "endTimeUnixNano": str(sp.end_time or 0),
        "attributes": _kvs(sp.attributes),
        "status": {"code": sp.status.status_code.value, **({"message": sp.status.description}
                                                          if sp.status.description else {})},
        "flags": _flags(sp.parent),
    }
    if sp.parent is not None:
        out["parentSpanId"] = format(sp.parent.span_id, "016x")
    if sp.events:
        out["events"] = [{"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _kvs(e.attributes)}
                         for e in sp.events]
    if sp.links:
        out["links"] = [{"traceId": format(ln.context.trace_id, "032x"), "spanId": format(ln.context.span_id, "016x"),
                         "attributes": _kvs(ln.attributes), "flags": _flags(ln.context)} for ln in sp.links]
    return out


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` in OTLP/JSON form for ``spans``, grouped by resource and scope.

    Written directly from the SDK spans (the protobuf route through ``json_format`` costs milliseconds per step).
    """
    groups: dict[int, tuple[Any, dict[Any, list[dict[str, Any]]]]] = {}
    for sp in spans:
        _, scopes = groups.setdefault(id(sp.resource), (sp.resource, {}))
        scope = sp.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scopes.setdefault(key, []).append(_span_json(sp))
    resource_spans = []
    for resource, scopes in groups.values():
        resource_spans.append({
            "resource": {"attributes": _kvs(resource.attributes if resource is not None else {})},
            "scopeSpans": [{"scope": {"name": n, **({"version": v} if v else {})}, "spans": sps}
                           for (n, v), sps in scopes.items()],
        })
    return {"resourceSpans": resource_spans}


def otlp_json_to_request(req: dict[str, Any]) -> ExportTraceServiceRequest:
    """The protobuf request for one OTLP/JSON request dict (the inverse of :func:`spans_to_otlp_json`).

    Raises:
        ValueError: when ``req`` is not a valid OTLP/JSON trace request.
    """
    req = json.loads(json.dumps(req))  # deep copy; ids are rewritten in place
    try:
        _convert_ids(req, _hex_to_b64)
        return json_format.ParseDict(req, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"not an OTLP/JSON ExportTraceServiceRequest: {e}") from None


def any_value(v: dict[str, Any]) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue``."""
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [any_value(x) for x in v["arrayValue"].get("values", ())]
    if "kvlistValue" in v:
        return {kv["key"]: any_value(kv.get("value", {})) for kv in v["kvlistValue"].get("values", ())}
    return None


def _attrs(items: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: any_value(kv.get("value", {})) for kv in items or ()}


def read_requests(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, request)`` for every line of an OTLP/JSON file store.

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
