"""Integration: a run traced into a real MLflow server; its eval spans are queried back and their links followed.

MLflow keeps span links, so every ``eval.reward/<name>`` span must link to the ``reward/<name>`` span of the same
step, both through our REST reader and through MLflow's own client (``mlflow.search_traces`` in ``.venv-mlflow``).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest
from tel_backends import backend_python
from tel_runs import expected_span_count, synthetic_run

from harness.cfg.telemetry import TelemetrySection
from harness.cli import main as harness_main
from harness.report.build import build_report
from harness.report.sources import load_file_store, load_mlflow
from harness.telemetry import RunTelemetry

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_CLIENT = r"""
import json, sys
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
out = []
for t in mlflow.search_traces(locations=[sys.argv[2]], return_type="list"):
    for s in t.data.spans:
        out.append({"name": s.name, "span_id": s.span_id, "step": s.attributes.get("harness.train.step"),
                    "run": s.attributes.get("harness.run.id"), "links": [l.span_id for l in s.links]})
print(json.dumps(out))
"""


def _experiment(url: str, name: str) -> str:
    req = urllib.request.Request(
        url + "/api/2.0/mlflow/experiments/create",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["experiment_id"]


def _wait_spans(url: str, exp: str, n: int, run_id: str) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:
        spans = load_mlflow(url, experiment_id=exp, run_id=run_id)
        if len(spans) >= n or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _check_links(spans: list[dict]) -> None:
    by_id = {s["span_id"]: s for s in spans}
    evals = [s for s in spans if s["name"].startswith("eval.reward/")]
    assert len(evals) == 8
    for ev in evals:
        (link,) = ev["links"]
        target = by_id[link["span_id"]]
        assert target["name"] == "reward/" + ev["attributes"]["harness.reward.name"]
        assert target["attributes"]["harness.train.step"] == ev["attributes"]["harness.train.step"]
        assert link["attributes"]["harness.link.kind"] == "train_reward"
        assert ev["attributes"]["harness.reward.train_mean"] == pytest.approx(
            ev["attributes"]["harness.reward.heldout"] + ev["attributes"]["harness.reward.gap"]
        )
    for ck in (s for s in spans if s["name"] == "eval.checkpoint"):
        assert by_id[ck["links"][0]["span_id"]]["name"] == "train.step"


def test_mlflow_keeps_links_from_eval_to_training_spans(mlflow_server, tmp_path):
    url = mlflow_server.url
    exp = _experiment(url, "links")
    cfg = TelemetrySection(
        otlp_endpoint=url + "/v1/traces",
        otlp_headers={"x-mlflow-experiment-id": exp},
        export_timeout_s=60,
        retry_after_s=0,
        schedule_delay_s=0.2,
    )
    tel = RunTelemetry.start(tmp_path, "mlflow-run", cfg, environ={})
    synthetic_run(tel)
    tel.shutdown()
    assert tel.exporter.sent == expected_span_count() and tel.exporter.dropped == 0

    spans = _wait_spans(url, exp, expected_span_count(), "mlflow-run")
    assert len(spans) == expected_span_count(), mlflow_server.log_tail()
    _check_links(spans)

    # the same rows as the file store's report
    from_backend = build_report(spans, run_id="mlflow-run")
    from_file = build_report(load_file_store(tmp_path))
    assert [(r.step, r.reward, r.link) for r in from_backend.rows] == [
        (r.step, r.reward, "resolved") for r in from_file.rows
    ]
    assert [r.train_mean for r in from_backend.rows] == pytest.approx([r.train_mean for r in from_file.rows])
    assert [e.to_dict() for e in from_backend.evaluations] == [e.to_dict() for e in from_file.evaluations]
    assert from_backend.evaluations[0].own and from_backend.evaluations[0].label == "heldout.jsonl, k=8"
    assert [(r.step, r.reward) for r in from_backend.alarms] == [(12, "math")]

    # MLflow's own client follows the links too
    proc = subprocess.run(
        [str(backend_python("mlflow")), "-c", _CLIENT, url, exp], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {s["span_id"]: s for s in json.loads(proc.stdout.strip().splitlines()[-1])}
    evals = [s for s in got.values() if s["name"].startswith("eval.reward/")]
    assert len(evals) == 8
    for ev in evals:
        target = got[ev["links"][0]]
        assert target["name"] == "reward/" + ev["name"].split("/", 1)[1] and target["step"] == ev["step"]


def test_push_file_store_into_mlflow_and_report_from_it(mlflow_server, tmp_path, capsys):
    url = mlflow_server.url
    exp = _experiment(url, "pushed")
    tel = RunTelemetry.start(tmp_path, "pushed-run", TelemetrySection(), environ={})  # file store only
    synthetic_run(tel)
    tel.shutdown()
    rc = harness_main(
        ["traces", "push", str(tmp_path), "--endpoint", url + "/v1/traces", "--header", f"x-mlflow-experiment-id={exp}"]
    )
    assert rc == 0
    assert f"pushed {expected_span_count()} spans" in capsys.readouterr().out
    spans = _wait_spans(url, exp, expected_span_count(), "pushed-run")
    assert {s["span_id"] for s in spans} == {s["span_id"] for s in load_file_store(tmp_path)}
    _check_links(spans)
    out = tmp_path / "from-mlflow"
    assert harness_main(["report", "--from", "mlflow", url, "--experiment-id", exp, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pushed-run" in text and "ALARM math @ step 12" in text
    assert (out / "report.png").stat().st_size > 5000


def test_real_trainer_run_traced_into_mlflow_from_otel_env(mlflow_server, tmp_path, monkeypatch):
    """The real trainer on the toy task (random-init ~77k-parameter model), exporting via OTEL_* variables.

    Each checkpoint is then evaluated the way the evaluator records it: a fresh RunTelemetry (another process in
    real use) reads ``<checkpoint>/telemetry.json`` and opens ``eval.checkpoint`` with it. Held-out scores are
    fixed numbers here; the evaluator's own tests cover real held-out scoring.
    """
    from tel_backends import ROOT

    from harness.config import load_config
    from trainer.loop import train

    url = mlflow_server.url
    exp = _experiment(url, "trainer")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)  # a base URL: /v1/traces is appended
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-mlflow-experiment-id={exp}")
    cfg = load_config(
        ROOT / "examples" / "train_cpu.yaml",
        overrides={
            "run.output_dir": str(tmp_path),
            "run.id": "trainer-run",
            "trainer.max_steps": 6,
            "trainer.save_steps": 3,
            # a loaded 2-core machine can make the server slow: wait for it rather than drop spans
            "telemetry.export_timeout_s": 60,
            "telemetry.retry_after_s": 0,
        },
    )
    train(cfg, progress=False)
    run_dir = tmp_path / "trainer-run"
    for ck in sorted((run_dir / "checkpoints").glob("step-*")):
        ctx = json.loads((ck / "telemetry.json").read_text())
        tel = RunTelemetry.start(run_dir, "trainer-run", cfg.telemetry)
        with tel.eval_checkpoint(ctx["step"], ctx) as ev:
            ev.record_reward("char_count", 0.25)
        tel.shutdown()

    n = 6 * 2 + 2 * 2  # train.step + reward/char_count per step; eval.checkpoint + eval.reward per checkpoint
    spans = _wait_spans(url, exp, n, "trainer-run")
    assert {s["span_id"] for s in spans} == {s["span_id"] for s in load_file_store(run_dir)}
    by_id = {s["span_id"]: s for s in spans}
    evals = sorted(
        (s for s in spans if s["name"] == "eval.reward/char_count"), key=lambda s: s["attributes"]["harness.train.step"]
    )
    assert [s["attributes"]["harness.train.step"] for s in evals] == [3, 6]
    for ev in evals:
        target = by_id[ev["links"][0]["span_id"]]
        assert target["name"] == "reward/char_count"
        assert target["attributes"]["harness.train.step"] == ev["attributes"]["harness.train.step"]
        assert "harness.reward.mean" in target["attributes"]
    rows = build_report(spans).rows
    assert [(r.step, r.link, r.train_steps) for r in rows] == [(3, "resolved", 3), (6, "resolved", 3)]
