"""The protobuf wire encoding of an OTLP/JSON trace request, written directly (no message objects).

:func:`encode_request` turns one ``ExportTraceServiceRequest`` in the OTLP/JSON form this package stores (see
:mod:`harness.telemetry._otlp_json`) into the bytes an OTLP backend expects over http/protobuf or grpc. The export
process encodes each line the training process wrote for the file store this way; going through the generated
message classes costs about three times as much per span. Two
encoded requests concatenated are one valid request holding both (repeated fields append), so batching is
joining bytes.

Field numbers follow ``opentelemetry/proto`` (trace v1, common v1, resource v1); a test parses the output with
the generated classes and compares it to the ``json_format`` route. This module does not validate its input
(use :func:`harness.telemetry._otlp_json.otlp_json_to_request` for untrusted files) and sends nothing.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["encode_request", "count_spans"]

_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_double = struct.Struct("<d").pack
_KEY_CACHE: dict[str, bytes] = {}
_KEY_CACHE_MAX = 4096


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte(s), the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


def _key(k: str) -> bytes:
    """``KeyValue.key`` (field 1), cached: the same attribute names come back every step."""
    b = _KEY_CACHE.get(k)
    if b is None:
        b = _field(b"\x0a", k.encode("utf-8", "surrogatepass"))
        if len(_KEY_CACHE) < _KEY_CACHE_MAX:
            _KEY_CACHE[k] = b
    return b


def _any(v: dict[str, Any]) -> bytes:
    """An ``AnyValue`` (string 1, bool 2, int 3, double 4, array 5, kvlist 6, bytes 7)."""
    if "doubleValue" in v:
        return b"\x21" + _double(float(v["doubleValue"]))
    if "stringValue" in v:
        return _field(b"\x0a", str(v["stringValue"]).encode("utf-8", "surrogatepass"))
    if "intValue" in v:
        return b"\x18" + _varint(int(v["intValue"]) & 0xFFFFFFFFFFFFFFFF)  # int64: two's complement varint
    if "boolValue" in v:
        return b"\x10\x01" if v["boolValue"] else b"\x10\x00"
    if "arrayValue" in v:
        return _field(b"\x2a", b"".join(_field(b"\x0a", _any(x)) for x in v["arrayValue"].get("values", ())))
    if "kvlistValue" in v:
        return _field(b"\x32", b"".join(_field(b"\x0a", _kv(x)) for x in v["kvlistValue"].get("values", ())))
    if "bytesValue" in v:
        return _field(b"\x3a", base64.b64decode(v["bytesValue"]))
    return b""


def _kv(kv: dict[str, Any]) -> bytes:
    return _key(kv["key"]) + _field(b"\x12", _any(kv.get("value") or {}))


def _attributes(tag: bytes, items: Sequence[dict[str, Any]] | None) -> bytes:
    return b"".join(_field(tag, _kv(kv)) for kv in items or ())


def _id(hex_id: str) -> bytes:
    return bytes.fromhex(hex_id)


def _span(sp: dict[str, Any]) -> bytes:
    parts = [_field(b"\x0a", _id(sp["traceId"])), _field(b"\x12", _id(sp["spanId"]))]
    if sp.get("traceState"):
        parts.append(_field(b"\x1a", sp["traceState"].encode()))
    if sp.get("parentSpanId"):
        parts.append(_field(b"\x22", _id(sp["parentSpanId"])))
    parts.append(_field(b"\x2a", str(sp.get("name", "")).encode("utf-8", "surrogatepass")))
    if sp.get("kind"):
        parts.append(b"\x30" + _varint(int(sp["kind"])))
    parts.append(b"\x39" + _fixed64(int(sp.get("startTimeUnixNano", 0))))
    parts.append(b"\x41" + _fixed64(int(sp.get("endTimeUnixNano", 0))))
    parts.append(_attributes(b"\x4a", sp.get("attributes")))
    for e in sp.get("events", ()):
        body = (
            b"\x09"
            + _fixed64(int(e.get("timeUnixNano", 0)))
            + _field(b"\x12", str(e.get("name", "")).encode("utf-8", "surrogatepass"))
            + _attributes(b"\x1a", e.get("attributes"))
        )
        parts.append(_field(b"\x5a", body))
    for ln in sp.get("links", ()):
        body = _field(b"\x0a", _id(ln["traceId"])) + _field(b"\x12", _id(ln["spanId"]))
        if ln.get("traceState"):
            body += _field(b"\x1a", ln["traceState"].encode())
        body += _attributes(b"\x22", ln.get("attributes"))
        if ln.get("flags"):
            body += b"\x35" + _fixed32(int(ln["flags"]))
        parts.append(_field(b"\x6a", body))
    status = sp.get("status")
    if status is not None:
        body = _field(b"\x12", status["message"].encode("utf-8", "surrogatepass")) if status.get("message") else b""
        if status.get("code"):
            body += b"\x18" + _varint(int(status["code"]))
        parts.append(_field(b"\x7a", body))
    if sp.get("flags"):
        parts.append(b"\x85\x01" + _fixed32(int(sp["flags"])))  # field 16, fixed32
    return b"".join(parts)


def _scope(sc: dict[str, Any]) -> bytes:
    body = _field(b"\x0a", sc["name"].encode()) if sc.get("name") else b""
    if sc.get("version"):
        body += _field(b"\x12", sc["version"].encode())
    return body + _attributes(b"\x1a", sc.get("attributes"))


def encode_request(req: dict[str, Any]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` for one OTLP/JSON request dict.

    Raises:
        KeyError, ValueError, TypeError: for a dict that is not a well-formed OTLP/JSON trace request.
    """
    out = []
    for rs in req.get("resourceSpans", ()):
        body = []
        if rs.get("resource") is not None:
            body.append(_field(b"\x0a", _attributes(b"\x0a", rs["resource"].get("attributes"))))
        for ss in rs.get("scopeSpans", ()):
            inner = [_field(b"\x0a", _scope(ss.get("scope") or {}))]
            inner += [_field(b"\x12", _span(sp)) for sp in ss.get("spans", ())]
            if ss.get("schemaUrl"):
                inner.append(_field(b"\x1a", ss["schemaUrl"].encode()))
            body.append(_field(b"\x12", b"".join(inner)))
        if rs.get("schemaUrl"):
            body.append(_field(b"\x1a", rs["schemaUrl"].encode()))
        out.append(_field(b"\x0a", b"".join(body)))
    return b"".join(out)


def count_spans(req: dict[str, Any]) -> int:
    """How many spans an OTLP/JSON request dict holds."""
    return sum(len(ss.get("spans", ())) for rs in req.get("resourceSpans", ()) for ss in rs.get("scopeSpans", ()))
