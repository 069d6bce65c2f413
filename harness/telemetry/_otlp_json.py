"""The OTLP JSON encoding of spans, as stored one ``ExportTraceServiceRequest`` per line in ``traces.jsonl``.

Encoding follows the OTLP/JSON rules of the specification (lowerCamelCase field names, trace and span ids as
hex strings, enums as integers, 64-bit integers as decimal strings, non-finite doubles as "NaN"/"Infinity"),
written straight from the SDK's spans: :func:`spans_to_otlp_json` builds the request as dicts and
:func:`spans_to_otlp_json_line` writes the same request as text without them (what the file store appends
once per training step). Decoding turns a stored line back into a protobuf request so it can be replayed into
any OTLP backend. :func:`iter_spans` flattens stored lines into plain dicts for reading. This module does not
write files or send anything.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from json.encoder import encode_basestring_ascii as _jstr
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

__all__ = [
    "spans_to_otlp_json",
    "spans_to_otlp_json_line",
    "group_spans",
    "attribute_items",
    "span_attribute_items",
    "otlp_json_to_request",
    "iter_spans",
    "read_requests",
    "any_value",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

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
        return {"doubleValue": v if v - v == 0.0 else _jfloat(v)}  # proto3 JSON: "NaN", "Infinity" as strings
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
        return _value(float(v))
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


def _context(sp: ReadableSpan) -> SpanContext:
    ctx = sp.get_span_context()
    assert ctx is not None, f"span {sp.name!r} has no span context"  # every span the SDK finishes has one
    return ctx


def _span_json(sp: ReadableSpan) -> dict[str, Any]:
    ctx = _context(sp)
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
        "name": sp.name,
        "kind": sp.kind.value + 1,  # the SDK's INTERNAL is 0, OTLP's SPAN_KIND_INTERNAL is 1
        "startTimeUnixNano": str(sp.start_time or 0),
        "endTimeUnixNano": str(sp.end_time or 0),
        "attributes": _kvs(sp.attributes),
        "status": {
            "code": sp.status.status_code.value,
            **({"message": sp.status.description} if sp.status.description else {}),
        },
        "flags": _flags(sp.parent),
    }
    if sp.parent is not None:
        out["parentSpanId"] = format(sp.parent.span_id, "016x")
    if sp.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _kvs(e.attributes)} for e in sp.events
        ]
    if sp.links:
        out["links"] = [
            {
                "traceId": format(ln.context.trace_id, "032x"),
                "spanId": format(ln.context.span_id, "016x"),
                "attributes": _kvs(ln.attributes),
                "flags": _flags(ln.context),
            }
            for ln in sp.links
        ]
    return out


def group_spans(
    spans: Sequence[ReadableSpan], encode: Callable[[ReadableSpan], T]
) -> list[tuple[Any, dict[tuple[str, str | None], list[T]]]]:
    """``encode`` applied to each span, grouped as a request nests them: by resource, then by scope
    (name, version), in order of first appearance."""
    groups: dict[int, tuple[Any, dict[tuple[str, str | None], list[T]]]] = {}
    for sp in spans:
        _, scopes = groups.setdefault(id(sp.resource), (sp.resource, {}))
        scope = sp.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scopes.setdefault(key, []).append(encode(sp))
    return list(groups.values())


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` in OTLP/JSON form for ``spans``, grouped by resource and scope.

    Written directly from the SDK spans (the protobuf route through ``json_format`` costs milliseconds per step).
    """
    resource_spans = []
    for resource, scopes in group_spans(spans, _span_json):
        resource_spans.append(
            {
                "resource": {"attributes": _kvs(resource.attributes if resource is not None else {})},
                "scopeSpans": [
                    {"scope": {"name": n, **({"version": v} if v else {})}, "spans": sps}
                    for (n, v), sps in scopes.items()
                ],
            }
        )
    return {"resourceSpans": resource_spans}


# ---------------------------------------------------------------- the same request as JSON text, directly
_KEY_TEXT: dict[str, str] = {}
_RESOURCE_TEXT: dict[int, tuple[Any, str]] = {}


_float_repr = float.__repr__


def _jfloat(v: float) -> str:
    """A non-finite double as proto3 JSON spells it (the finite ones are written with ``repr``)."""
    return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")


def _jvalue(v: Any) -> str:
    t = type(v)
    if t is float:
        if v - v == 0.0:
            return '{"doubleValue":' + _float_repr(v) + "}"
        return '{"doubleValue":"' + _jfloat(v) + '"}'
    if t is str:
        return '{"stringValue":' + _jstr(v) + "}"
    if t is bool:
        return '{"boolValue":true}' if v else '{"boolValue":false}'
    if t is int:
        return '{"intValue":"' + str(v) + '"}'
    return json.dumps(_value(v), separators=(",", ":"))


def _jkey(k: str) -> str:
    text = _KEY_TEXT.get(k)
    if text is None:
        text = '{"key":' + _jstr(k) + ',"value":'
        if len(_KEY_TEXT) < 4096:
            _KEY_TEXT[k] = text
    return text


def attribute_items(attrs: Any) -> Any:
    """The items of an attribute mapping, read through the plain dict inside the SDK's ``BoundedAttributes`` when
    there is one: its ``Mapping`` mixin's iteration costs more than encoding the values. Any other mapping is
    iterated as it is."""
    if not attrs:
        return ()
    inner = getattr(attrs, "_dict", None)
    return inner.items() if isinstance(inner, dict) else attrs.items()


def span_attribute_items(sp: ReadableSpan) -> Any:
    """:func:`attribute_items` of a finished span's own attributes: the SDK's ``_attributes`` behind the read-only
    proxy ``ReadableSpan.attributes`` returns, when it has one."""
    own = getattr(sp, "_attributes", None)
    return attribute_items(own if own is not None else sp.attributes)


def _jkvs_items(items: Any) -> str:
    out = []
    for k, v in items:
        if type(v) is float and v - v == 0.0:
            out.append(_jkey(k) + '{"doubleValue":' + _float_repr(v) + "}}")
        else:
            out.append(_jkey(k) + _jvalue(v) + "}")
    return "[" + ",".join(out) + "]"


def _jkvs(attrs: Any) -> str:
    return _jkvs_items(attribute_items(attrs))


def _span_text(sp: ReadableSpan) -> str:
    ctx = _context(sp)
    status = sp.status
    out = [
        '{"traceId":"',
        format(ctx.trace_id, "032x"),
        '","spanId":"',
        format(ctx.span_id, "016x"),
        '","name":',
        _jstr(sp.name),
        ',"kind":',
        str(sp.kind.value + 1),
        ',"startTimeUnixNano":"',
        str(sp.start_time or 0),
        '","endTimeUnixNano":"',
        str(sp.end_time or 0),
        '","attributes":',
        _jkvs_items(span_attribute_items(sp)),
        ',"status":{"code":',
        str(status.status_code.value),
    ]
    if status.description:
        out += [',"message":', _jstr(status.description)]
    out += ['},"flags":', str(_flags(sp.parent))]
    if sp.parent is not None:
        out += [',"parentSpanId":"', format(sp.parent.span_id, "016x"), '"']
    if sp.events:
        out += [
            ',"events":[',
            ",".join(
                '{"timeUnixNano":"'
                + str(e.timestamp)
                + '","name":'
                + _jstr(e.name)
                + ',"attributes":'
                + _jkvs(e.attributes)
                + "}"
                for e in sp.events
            ),
            "]",
        ]
    if sp.links:
        out += [
            ',"links":[',
            ",".join(
                '{"traceId":"'
                + format(ln.context.trace_id, "032x")
                + '","spanId":"'
                + format(ln.context.span_id, "016x")
                + '","attributes":'
                + _jkvs(ln.attributes)
                + ',"flags":'
                + str(_flags(ln.context))
                + "}"
                for ln in sp.links
            ),
            "]",
        ]
    out.append("}")
    return "".join(out)


def _resource_text(resource: Any) -> str:
    hit = _RESOURCE_TEXT.get(id(resource))
    if hit is not None and hit[0] is resource:
        return hit[1]
    text = '{"attributes":' + _jkvs(resource.attributes if resource is not None else {}) + "}"
    if len(_RESOURCE_TEXT) > 64:
        _RESOURCE_TEXT.clear()
    _RESOURCE_TEXT[id(resource)] = (resource, text)
    return text


def spans_to_otlp_json_line(spans: Sequence[ReadableSpan]) -> str:
    """:func:`spans_to_otlp_json` as compact JSON text, written directly (no dicts, no ``json.dumps``).

    This is what the file store appends for every trace, so it runs once per training step; a test checks
    that it parses to exactly what :func:`spans_to_otlp_json` builds.
    """
    parts = []
    for resource, scopes in group_spans(spans, _span_text):
        scope_texts = [
            '{"scope":{"name":'
            + _jstr(n)
            + (',"version":' + _jstr(v) if v else "")
            + '},"spans":['
            + ",".join(sps)
            + "]}"
            for (n, v), sps in scopes.items()
        ]
        parts.append('{"resource":' + _resource_text(resource) + ',"scopeSpans":[' + ",".join(scope_texts) + "]}")
    return '{"resourceSpans":[' + ",".join(parts) + "]}"


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
