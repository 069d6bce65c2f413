"""harness traces push: error paths that need no backend (delivery itself is tested against MLflow and Phoenix)."""

from __future__ import annotations

import socket

import pytest

from harness.cfg.telemetry import TelemetrySection
from harness.cli import main as harness_main
from harness.telemetry import RewardStats, RunTelemetry
from harness.telemetry.push import PushError, push_file_store


def _store(tmp_path):
    tel = RunTelemetry.start(tmp_path, "p", TelemetrySection(), environ={})
    with tel.train_step(1) as st:
        st.record_reward("math", RewardStats.from_values([1.0]))
    tel.shutdown()
    return tmp_path / "traces.jsonl"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_missing_store(tmp_path):
    with pytest.raises(PushError, match="no trace file store"):
        push_file_store(tmp_path, "http://127.0.0.1:1/v1/traces")


def test_bad_line_is_named(tmp_path):
    path = _store(tmp_path)
    with open(path, "a") as f:
        f.write('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not-hex"}]}]}]}\n')
    with pytest.raises(PushError, match=r"traces.jsonl:2: not an OTLP/JSON"):
        push_file_store(path, "http://127.0.0.1:1/v1/traces", timeout=5)


def test_refused_endpoint_names_line_and_cli_exits_2(tmp_path, capsys):
    _store(tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}/v1/traces"
    with pytest.raises(PushError, match=r"traces.jsonl:1: could not deliver"):
        push_file_store(tmp_path, url, timeout=5)
    assert harness_main(["traces", "push", str(tmp_path), "--endpoint", url, "--header", "novalue"]) == 2
    assert "--header" in capsys.readouterr().err
