"""The direct protobuf encoder and the live sender, against the generated OTLP classes and a real HTTP server."""

from __future__ import annotations

import http.server
import json
import logging
import threading

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from harness.telemetry._export import OtlpSettings
from harness.telemetry._otlp_json import otlp_json_to_request, spans_to_otlp_json, spans_to_otlp_json_line
from harness.telemetry._otlp_pb import count_spans, encode_request
from harness.telemetry._sender import OtlpSender


def _spans():
    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("t", "1.2")
    attrs = {
        "f": 0.5,
        "inf": float("inf"),
        "ninf": float("-inf"),
        "tiny": 1.5e-7,
        "neg": -7,
        "big": 2**62,
        "s": "x\u00e9\u4e2d",
        "b": False,
        "t": True,
        "fl": [1.0, 2.5],
        "il": [1, -2],
        "sl": ["a", ""],
        "empty": "",
    }
    with tracer.start_as_current_span("a", attributes=attrs) as a:
        a.add_event("ev", {"k": 1, "name": "v"})
        a.add_event("bare")
        with tracer.start_as_current_span("child") as c:
            c.set_status(Status(StatusCode.ERROR, "went wrong"))
    with tracer.start_as_current_span(
        "b", links=[Link(a.get_span_context(), {"why": "test"}), Link(a.get_span_context())]
    ) as b:
        b.set_status(Status(StatusCode.OK))
    return mem.get_finished_spans()


def test_encoder_matches_the_generated_classes_field_for_field():
    spans = _spans()
    doc = spans_to_otlp_json(spans)
    req = ExportTraceServiceRequest()
    req.ParseFromString(encode_request(doc))
    assert req == otlp_json_to_request(doc)
    assert req == encode_spans(spans)  # the SDK's own encoder
    assert count_spans(doc) == len(spans) == 3


def test_direct_encoders_match_the_dict_route():
    spans = _spans()
    doc = spans_to_otlp_json(spans)
    line = spans_to_otlp_json_line(spans)
    assert json.loads(line) == doc
    assert encode_request(json.loads(line)) == encode_request(doc)  # the export process's route: line -> wire
    req = ExportTraceServiceRequest()
    req.ParseFromString(encode_request(json.loads(line)))
    assert req == encode_spans(spans)


def test_concatenated_requests_are_one_request_with_all_spans():
    spans = _spans()
    bodies = [encode_request(spans_to_otlp_json([s])) for s in spans]
    req = ExportTraceServiceRequest()
    req.ParseFromString(b"".join(bodies))
    names = [sp.name for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    assert sorted(names) == sorted(s.name for s in spans)


class _Collector(http.server.ThreadingHTTPServer):
    """A real OTLP/HTTP endpoint that records every request body, or answers an error status."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[bytes] = []
        self.status = status

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(h):  # noqa: N805
                body = h.rfile.read(int(h.headers["Content-Length"]))
                assert h.headers["Content-Type"] == "application/x-protobuf"
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


def _offer_all(sender: OtlpSender, n: int) -> int:
    spans = _spans()
    for _ in range(n):
        doc = spans_to_otlp_json(spans)
        sender.offer(encode_request(doc), count_spans(doc))
    return n * len(spans)


def test_sender_batches_traces_into_few_requests():
    srv = _Collector()
    try:
        sender = OtlpSender(OtlpSettings(srv.url), schedule_delay_s=30.0, max_batch_spans=40, max_queue_spans=1000)
        total = _offer_all(sender, 30)  # 90 spans: batches of at most 40 go out without waiting for the delay
        assert sender.flush(30)
        sender.shutdown()
    finally:
        srv.shutdown()
    assert sender.sent == total and sender.dropped == 0 and sender.queue_full == 0
    assert 3 <= len(srv.bodies) <= 4  # 39 + 39 + 12 (a trace of 3 spans is never split)
    got = 0
    for body in srv.bodies:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        assert n <= 40
        got += n
    assert got == total


def test_sender_counts_a_full_outbox_instead_of_growing():
    srv = _Collector()
    try:
        sender = OtlpSender(OtlpSettings(srv.url), schedule_delay_s=30.0, max_batch_spans=1000, max_queue_spans=10)
        _offer_all(sender, 5)  # 5 traces of 3 spans into room for 10
        sender.shutdown()
    finally:
        srv.shutdown()
    assert sender.sent == 9 and sender.queue_full == 6


def test_an_error_status_warns_once_and_backs_off(caplog):
    srv = _Collector(status=503)
    try:
        sender = OtlpSender(OtlpSettings(srv.url), schedule_delay_s=0.01, max_batch_spans=4, retry_after_s=60)
        with caplog.at_level(logging.WARNING):
            total = _offer_all(sender, 6)
            sender.flush(30)
            sender.shutdown()
    finally:
        srv.shutdown()
    assert len(srv.bodies) == 1  # the first failure opens the breaker: no further requests for retry_after_s
    assert sender.sent == 0 and sender.dropped == total
    warns = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warns) == 1 and "HTTP 503" in warns[0] and srv.url in warns[0]


def test_bad_endpoint_is_a_clear_error():
    with pytest.raises(ValueError, match="expected an http:// or https:// URL"):
        OtlpSender(OtlpSettings("localhost:4318/v1/traces"))
