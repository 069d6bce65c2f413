"""OTLP export on the SDK's exporters, against a real HTTP server: what a flush delivers, a refusing backend, a
stalled one, and the file store's encoding against the SDK's own protobuf encoder."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import threading
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, RunTelemetry, iter_spans
from harness.telemetry._export import OtlpDelivery, OtlpSettings
from harness.telemetry._store import spans_from_json, spans_to_json


class _Collector(http.server.ThreadingHTTPServer):
    """A real OTLP/HTTP endpoint that records every request body and answers ``status``; while ``hold`` is
    clear, requests wait (a stalled backend)."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[bytes] = []
        self.status = status
        self.hold = threading.Event()
        self.hold.set()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(h):  # noqa: N805
                body = h.rfile.read(int(h.headers["Content-Length"]))
                assert h.headers["Content-Type"] == "application/x-protobuf"
                self.hold.wait(60)
                self.bodies.append(body)
                h.send_response(self.status)
                h.send_header("Content-Length", "0")
                h.end_headers()

            def log_message(h, *a):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def names(self) -> list[str]:
        out = []
        for body in self.bodies:
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            out += [sp.name for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]
        return out


def _steps(tel: RunTelemetry, first: int, n: int) -> None:
    for step in range(first, first + n):
        with tel.train_step(step) as st:
            st.set_metrics({"loss": 1.0 / step})
            st.record_reward("r", RewardStats.from_values([0.0, 1.0], group_size=2))


def test_flush_means_the_backend_has_every_span(tmp_path: Path) -> None:
    srv = _Collector()
    try:
        cfg = TelemetrySection(otlp_endpoint=srv.url, schedule_delay_s=30, max_export_batch_size=50)
        tel = RunTelemetry.start(tmp_path, "ship", cfg, environ={})
        _steps(tel, 1, 40)
        assert tel.flush(60)
        assert sorted(srv.names()) == ["reward/r"] * 40 + ["train.step"] * 40
        assert len(srv.bodies) >= 2  # batches of at most 50 spans
        tel.shutdown()
    finally:
        srv.shutdown()
    ex = tel.exporter
    assert ex is not None and ex.sent == 80 and ex.dropped == 0 and ex.queue_full == 0


def test_a_refusing_backend_is_one_warning_then_no_requests_for_a_while(tmp_path: Path, caplog) -> None:
    srv = _Collector(status=400)
    try:
        cfg = TelemetrySection(otlp_endpoint=srv.url, schedule_delay_s=0.05, max_export_batch_size=4, retry_after_s=600)
        with caplog.at_level(logging.INFO):
            tel = RunTelemetry.start(tmp_path, "refused", cfg, environ={})
            _steps(tel, 1, 20)
            tel.flush(30)
            tel.shutdown()
    finally:
        srv.shutdown()
    assert len(srv.bodies) == 1  # the first failure pauses export: no further requests for retry_after_s
    assert tel.exporter is not None and tel.exporter.sent == 0 and tel.exporter.dropped == 40
    warns = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warns) == 1 and "400" in warns[0] and srv.url in warns[0] and "file store" in warns[0]
    assert sum(s["name"] == "train.step" for s in iter_spans(tmp_path / "traces.jsonl")) == 20


def test_a_stalled_backend_fills_the_queue_and_training_goes_on(tmp_path: Path) -> None:
    srv = _Collector()
    srv.hold.clear()  # every request waits: the exporter's thread is stuck in its first request
    try:
        cfg = TelemetrySection(
            otlp_endpoint=srv.url,
            schedule_delay_s=0.05,
            max_queue_size=16,
            max_export_batch_size=4,
            export_timeout_s=60,
        )
        tel = RunTelemetry.start(tmp_path, "stall", cfg, environ={})
        _steps(tel, 1, 200)  # would hang here if ending a span waited for the backend
        srv.hold.set()
        tel.shutdown()
    finally:
        srv.hold.set()
        srv.shutdown()
    ex = tel.exporter
    assert ex is not None and ex.ended == 400 and ex.queue_full > 0 and ex.sent + ex.dropped < 400
    assert len(srv.names()) == ex.sent
    assert sum(1 for _ in iter_spans(tmp_path / "traces.jsonl")) == 400  # the file store has every span


def test_bad_endpoint_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="expected an http:// or https:// URL"):
        OtlpDelivery(OtlpSettings("localhost:4318/v1/traces"))


def _spans():
    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("t", "1.2")
    attrs = {
        "f": 0.5,
        "nan": float("nan"),
        "inf": float("inf"),
        "neg": -7,
        "big": 2**62,
        "s": "x\u00e9\u4e2d",
        "b": False,
        "fl": [1.0, 2.5],
        "il": [1, -2],
        "sl": ["a", ""],
    }
    with tracer.start_as_current_span("a", attributes=attrs) as a:
        a.add_event("ev", {"k": 1})
        with tracer.start_as_current_span("child") as c:
            c.set_status(Status(StatusCode.ERROR, "went wrong"))
    with tracer.start_as_current_span("b", links=[Link(a.get_span_context(), {"why": "test"})]):
        pass
    return mem.get_finished_spans()


def test_stored_lines_are_otlp_json_of_the_sdk_encoding() -> None:
    spans = _spans()
    doc = json.loads(spans_to_json(spans))
    a_sdk = next(x for x in spans if x.name == "a")
    sp = {x["name"]: x for x in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]}
    assert sp["a"]["traceId"] == format(a_sdk.context.trace_id, "032x")  # OTLP/JSON: hex ids, not base64
    assert sp["child"]["parentSpanId"] == format(a_sdk.context.span_id, "016x")
    assert sp["b"]["links"][0]["spanId"] == format(a_sdk.context.span_id, "016x")
    assert sp["a"]["kind"] == 1 and sp["a"]["startTimeUnixNano"] == str(a_sdk.start_time)
    assert sp["child"]["status"] == {"code": 2, "message": "went wrong"}
    assert encode_spans(spans_from_json(doc)) == encode_spans(spans)  # read back: exactly the SDK's own request
    with pytest.raises(ValueError, match="OTLP/JSON"):
        spans_from_json({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]})


def _as_sdk_request(line: str) -> ExportTraceServiceRequest:
    """A stored line parsed by protobuf's own JSON parser, its hex ids turned back into protobuf's base64: the
    SDK's request message when the line is protobuf's JSON form of the SDK's encoding with hex ids."""
    doc = json.loads(line)
    for sp in (sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]):
        for obj in (sp, *sp.get("links", ())):
            for k in set(obj) & {"traceId", "spanId", "parentSpanId"}:
                obj[k] = base64.b64encode(bytes.fromhex(obj[k])).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest())


def test_stored_encoding_equals_the_sdk_encoding_in_json_form() -> None:
    spans = _spans()
    assert _as_sdk_request(spans_to_json(spans)) == encode_spans(spans)
    # a second resource and scope, a remote parent with trace state, other kinds, an empty array
    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "x", "n": 3}, schema_url="https://r"))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("other", None, schema_url="https://s", attributes={"sa": True})
    remote = SpanContext(2**100 + 5, 7, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")]))
    ctx = set_span_in_context(NonRecordingSpan(remote))
    with tracer.start_as_current_span("r", context=ctx, kind=SpanKind.CLIENT, attributes={"e": [], "m": "-inf"}) as r:
        r.set_attribute("ninf", float("-inf"))
        r.add_event("bare")
        r.set_status(Status(StatusCode.OK))
    with tracer.start_as_current_span("", kind=SpanKind.CONSUMER, links=[Link(remote)]):
        pass
    both = [*spans, *mem.get_finished_spans()]
    assert _as_sdk_request(spans_to_json(both)) == encode_spans(both)
    assert encode_spans(spans_from_json(json.loads(spans_to_json(both)))) == encode_spans(both)


def test_stored_values_read_back_as_written(tmp_path: Path) -> None:
    (tmp_path / "traces.jsonl").write_text(spans_to_json(_spans()) + "\n")
    got = {s["name"]: s for s in iter_spans(tmp_path / "traces.jsonl")}
    attrs = got["a"]["attributes"]
    assert attrs["f"] == 0.5 and attrs["nan"] != attrs["nan"] and attrs["inf"] == float("inf")
    assert attrs["neg"] == -7 and attrs["big"] == 2**62 and attrs["s"] == "x\u00e9\u4e2d" and attrs["b"] is False
    assert attrs["fl"] == [1.0, 2.5] and attrs["il"] == [1, -2] and attrs["sl"] == ["a", ""]
    assert got["a"]["events"] == [{"name": "ev", "attributes": {"k": 1}}]
    assert got["b"]["links"][0]["attributes"] == {"why": "test"}
    assert got["child"]["parent_span_id"] == got["a"]["span_id"]
