"""A backend that is down or never answers: training finishes, the file store is complete, one warning."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, RunTelemetry, iter_spans


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now: connections are refused
    return port


class _BlackHole:
    """A TCP server that accepts connections and never answers (a hung backend)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def _run(tmp_path, endpoint: str, protocol: str, steps: int = 30) -> RunTelemetry:
    cfg = TelemetrySection(
        otlp_endpoint=endpoint,
        otlp_protocol=protocol,
        export_timeout_s=1.0,
        schedule_delay_s=0.05,
        max_queue_size=64,
        max_export_batch_size=8,
    )
    tel = RunTelemetry.start(tmp_path, "down", cfg, environ={})
    for step in range(1, steps + 1):
        with tel.train_step(step) as st:
            st.set_metrics({"loss": 1.0})
            st.record_reward("math", RewardStats.from_values([0.0, 1.0]))
        if step % 10 == 0:
            ctx = tel.checkpoint_context(step)
            with tel.eval_checkpoint(step, ctx) as ev:
                ev.record_reward("math", 0.5)
    tel.shutdown()
    return tel


def _check_store(tmp_path, steps: int = 30) -> None:
    spans = list(iter_spans(tmp_path / "traces.jsonl"))
    assert sorted(s["attributes"]["harness.train.step"] for s in spans if s["name"] == "train.step") == list(
        range(1, steps + 1)
    )
    assert sum(s["name"] == "reward/math" for s in spans) == steps
    assert sum(s["name"] == "eval.reward/math" for s in spans) == steps // 10


def _warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_refused_backend(tmp_path, caplog, protocol):
    caplog.set_level(logging.INFO)
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1/traces" if protocol == "http/protobuf" else f"http://127.0.0.1:{port}"
    tel = _run(tmp_path, url, protocol)
    _check_store(tmp_path)
    warns = _warnings(caplog)
    assert len(warns) == 1, [r.getMessage() for r in warns]
    assert "file store" in warns[0].getMessage() and str(port) in warns[0].getMessage()
    assert tel.exporter.sent == 0 and tel.exporter.dropped > 0


def test_backend_that_never_answers(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    hole = _BlackHole()
    try:
        tel = _run(tmp_path, f"http://127.0.0.1:{hole.port}/v1/traces", "http/protobuf")
    finally:
        hole.close()
    _check_store(tmp_path)
    assert hole.conns, "the exporter never tried the backend"
    assert len(_warnings(caplog)) == 1
    assert tel.exporter.sent == 0
