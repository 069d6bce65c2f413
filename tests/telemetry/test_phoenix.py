"""Integration: a run traced into a real Phoenix server over OTLP gRPC and over OTLP/HTTP.

Phoenix drops span links, so the training and eval spans of one run are found by attribute
(``harness.run.id``, ``harness.train.step``, ``harness.reward.name``) and must share one session (``session.id``).
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from tel_runs import expected_span_count, synthetic_run

from harness.cfg.telemetry import TelemetrySection
from harness.cli import main as harness_main
from harness.report.build import build_report
from harness.report.sources import SourceError, load_file_store, load_phoenix
from harness.telemetry import RunTelemetry

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _wait(url: str, project: str, n: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:  # Phoenix ingests asynchronously: the project appears with its first spans
        try:
            spans = load_phoenix(url, project=project)
        except SourceError:
            if time.monotonic() > deadline:
                raise
            spans = []
        if len(spans) >= n or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _sessions(url: str, project: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/v1/projects/{project}/sessions", timeout=30) as r:
        return json.load(r)["data"]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_phoenix_finds_training_and_eval_spans_by_attribute_and_session(phoenix_server, tmp_path, protocol):
    url = phoenix_server.url
    project = "grpc-run" if protocol == "grpc" else "http-run"
    endpoint = f"http://127.0.0.1:{phoenix_server.grpc_port}" if protocol == "grpc" else url + "/v1/traces"
    cfg = TelemetrySection(
        otlp_endpoint=endpoint,
        otlp_protocol=protocol,
        project_name=project,
        schedule_delay_s=0.2,
        export_timeout_s=60,
        retry_after_s=0,
    )  # slow under load: wait, do not drop
    run_id = f"phx-{project}"
    tel = RunTelemetry.start(tmp_path, run_id, cfg, environ={})
    synthetic_run(tel)
    tel.shutdown()
    assert tel.exporter.sent == expected_span_count() and tel.exporter.dropped == 0

    spans = _wait(url, project, expected_span_count())
    assert len(spans) == expected_span_count(), phoenix_server.log_tail()
    assert all(s["attributes"]["harness.run.id"] == run_id and s["attributes"]["session.id"] == run_id for s in spans)
    assert not any(s["links"] for s in spans)  # Phoenix stores no links
    kinds = {s["name"].split("/")[0]: s["attributes"]["openinference.span.kind"] for s in spans}
    assert kinds == {
        "train.step": "CHAIN",
        "reward": "EVALUATOR",
        "eval.checkpoint": "CHAIN",
        "eval.reward": "EVALUATOR",
    }

    # join an eval reward span to its training reward span by attribute alone
    train = {
        (s["attributes"]["harness.train.step"], s["attributes"]["harness.reward.name"]): s
        for s in spans
        if s["name"].startswith("reward/")
    }
    for ev in (s for s in spans if s["name"].startswith("eval.reward/")):
        a = ev["attributes"]
        t = train[(a["harness.train.step"], a["harness.reward.name"])]
        assert t["name"] == "reward/" + a["harness.reward.name"]
        assert a["harness.reward.train_mean"] >= 0 and "harness.reward.mean" in t["attributes"]

    # one session holds every trace of the run: 12 steps and 4 evaluations
    (session,) = [s for s in _sessions(url, project) if s["session_id"] == run_id]
    assert {t["trace_id"] for t in session["traces"]} == {s["trace_id"] for s in spans}
    assert len(session["traces"]) == 16

    rep = build_report(spans)
    ref = build_report(load_file_store(tmp_path))
    assert [(r.step, r.reward) for r in rep.rows] == [(r.step, r.reward) for r in ref.rows]
    assert [r.heldout for r in rep.rows] == pytest.approx([r.heldout for r in ref.rows])
    assert [r.train_mean for r in rep.rows] == pytest.approx([r.train_mean for r in ref.rows])
    assert {r.link for r in rep.rows} == {"none"} and [(r.step, r.reward) for r in rep.alarms] == [(12, "math")]
    # the evaluation's harness.eval.* attributes come back intact: the same evaluation, described the same way
    assert [e.to_dict() for e in rep.evaluations] == [e.to_dict() for e in ref.evaluations]
    assert rep.evaluations[0].own and rep.evaluations[0].label == "heldout.jsonl, k=8"


def test_report_from_phoenix_cli(phoenix_server, tmp_path, capsys):
    cfg = TelemetrySection(
        otlp_endpoint=phoenix_server.url + "/v1/traces", project_name="cli-run", export_timeout_s=60, retry_after_s=0
    )
    tel = RunTelemetry.start(tmp_path, "phx-cli", cfg, environ={})
    synthetic_run(tel)
    tel.shutdown()
    _wait(phoenix_server.url, "cli-run", expected_span_count())
    out = tmp_path / "rep"
    assert (
        harness_main(
            [
                "report",
                "--from",
                "phoenix",
                phoenix_server.url,
                "--project",
                "cli-run",
                "--out",
                str(out),
                "--fail-on-alarm",
            ]
        )
        == 1
    )
    text = capsys.readouterr().out
    assert "phx-cli" in text and "ALARM math @ step 12" in text
    assert "| 12 | math |" in (out / "report.md").read_text()


def test_push_file_store_into_phoenix_over_grpc(phoenix_server, tmp_path, capsys):
    tel = RunTelemetry.start(tmp_path, "phx-pushed", TelemetrySection(project_name="pushed"), environ={})
    synthetic_run(tel)
    tel.shutdown()
    assert (
        harness_main(
            [
                "traces",
                "push",
                str(tmp_path),
                "--protocol",
                "grpc",
                "--endpoint",
                f"http://127.0.0.1:{phoenix_server.grpc_port}",
            ]
        )
        == 0
    )
    spans = _wait(phoenix_server.url, "pushed", expected_span_count())
    assert {s["span_id"] for s in spans} == {s["span_id"] for s in load_file_store(tmp_path)}
