"""The backend readers against a local HTTP server that answers with canned Phoenix and MLflow JSON (the shapes
their REST APIs return; the integration tests run the real servers): a span each reader cannot read is a
SourceError naming the endpoint, and MLflow's proto-named spans read back with hex ids, kind and status."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.report.sources import SourceError, load_mlflow, load_phoenix

TRACE, SPAN, PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7"


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A server answering every GET/POST with ``answers[path without query]`` as JSON (404 when absent)."""
    answers: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = answers.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body or {}).encode())

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}", answers
    srv.shutdown()
    srv.server_close()


def _mlflow(answers: dict[str, Any], span: dict[str, Any]) -> None:
    answers["/api/3.0/mlflow/traces/search"] = {"traces": [{"trace_id": "tr-1", "tags": {"harness.run.id": "r"}}]}
    info = {"trace_id": "tr-1", "tags": {"harness.run.id": "r"}}
    answers["/api/3.0/mlflow/traces/batchGet"] = {"traces": [{"trace_info": info, "spans": [span]}]}


def test_mlflow_spans_read_back_with_hex_ids_kind_and_status(server) -> None:
    url, answers = server
    span = {
        "trace_id": _b64(TRACE),
        "span_id": _b64(SPAN),
        "parent_span_id": _b64(PARENT),
        "name": "reward/math",
        "kind": "SPAN_KIND_INTERNAL",
        "status": {"code": "STATUS_CODE_OK"},
        "start_time_unix_nano": "1700000000000000000",
        "end_time_unix_nano": "1700000001000000000",
        "attributes": [{"key": "harness.train.step", "value": {"int_value": "3"}}],
        "mlflow_extra": 1,  # a field of MLflow's own is left out
    }
    _mlflow(answers, span)
    (got,) = load_mlflow(url)
    assert (got["trace_id"], got["span_id"], got["parent_span_id"]) == (TRACE, SPAN, PARENT)
    assert got["name"] == "reward/math" and got["end_ns"] - got["start_ns"] == 10**9
    assert got["attributes"]["harness.train.step"] == 3 and got["attributes"]["harness.run.id"] == "r"


@pytest.mark.parametrize(
    "span",
    [
        {"span_id": _b64(SPAN), "name": "no trace id"},
        {"trace_id": _b64(TRACE), "span_id": _b64(SPAN), "attributes": "not a list"},
        {"trace_id": _b64(TRACE), "span_id": _b64(SPAN), "start_time_unix_nano": "yesterday"},
    ],
)
def test_an_mlflow_span_that_is_not_otlp_is_a_source_error_naming_the_trace(server, span) -> None:
    url, answers = server
    _mlflow(answers, span)
    with pytest.raises(SourceError, match=r"batchGet: trace tr-1: a span that is not OTLP"):
        load_mlflow(url)


def test_phoenix_spans_without_hex_ids_are_a_source_error_naming_the_endpoint(server) -> None:
    url, answers = server
    good = {"name": "train.step", "context": {"trace_id": TRACE, "span_id": SPAN}, "start_time": "2026-01-01T00:00:00Z"}
    answers["/v1/projects/p/spans"] = {"data": [good]}
    (got,) = load_phoenix(url, project="p")
    assert (got["trace_id"], got["span_id"], got["links"]) == (TRACE, SPAN, [])
    answers["/v1/projects/p/spans"] = {"data": [good, {"name": "x", "context": {"trace_id": "not hex"}}]}
    with pytest.raises(SourceError, match=r"/v1/projects/p/spans: a span without hex trace and span ids"):
        load_phoenix(url, project="p")
    with pytest.raises(SourceError, match="HTTP 404"):
        load_phoenix(url, project="missing")
