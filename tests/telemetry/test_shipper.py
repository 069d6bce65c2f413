"""The export process: everything offered reaches the backend, a full pipe or a dead shipper never stops training."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, RunTelemetry, iter_spans
from harness.telemetry._shipper import OtlpShipper

from .test_otlp_wire import _Collector


def _steps(tel: RunTelemetry, first: int, n: int) -> None:
    for step in range(first, first + n):
        with tel.train_step(step) as st:
            st.set_metrics({"loss": 1.0 / step})
            st.record_reward("r", RewardStats.from_values([0.0, 1.0], group_size=2))


def _received(srv: _Collector) -> list[str]:
    names = []
    for body in srv.bodies:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        names += [sp.name for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    return names


def test_flush_means_the_backend_has_every_span(tmp_path: Path) -> None:
    srv = _Collector()
    try:
        tel = RunTelemetry.start(
            tmp_path, "ship", TelemetrySection(otlp_endpoint=srv.url, schedule_delay_s=30), environ={}
        )
        assert isinstance(tel.exporter, OtlpShipper)
        _steps(tel, 1, 40)
        assert tel.flush(60)
        assert sorted(_received(srv)) == ["reward/r"] * 40 + ["train.step"] * 40
        tel.shutdown()
    finally:
        srv.shutdown()
    assert tel.exporter.sent == 80 and tel.exporter.dropped == 0 and tel.exporter.queue_full == 0


def test_a_stalled_shipper_fills_the_buffer_and_training_goes_on(tmp_path: Path) -> None:
    srv = _Collector()
    try:
        cfg = TelemetrySection(otlp_endpoint=srv.url, schedule_delay_s=0.05)
        tel = RunTelemetry.start(tmp_path, "stall", cfg, environ={})
        tel.exporter._max_buffer = 64 << 10  # a small buffer here, so the stall shows within a few hundred steps
        os.kill(tel.exporter._proc.pid, signal.SIGSTOP)  # reads nothing: the pipe and then the buffer fill up
        try:
            _steps(tel, 1, 600)
            tel.flush(0.5)
        finally:
            os.kill(tel.exporter._proc.pid, signal.SIGCONT)
        tel.shutdown()
    finally:
        srv.shutdown()
    ex = tel.exporter
    assert ex.queue_full > 0
    assert ex.sent + ex.queue_full + ex.dropped == 1200
    assert len(_received(srv)) == ex.sent
    assert sum(1 for s in iter_spans(tmp_path / "traces.jsonl")) == 1200  # the file store has every span


def test_a_dead_shipper_is_one_warning_and_the_file_store_stays_complete(tmp_path: Path, caplog) -> None:
    srv = _Collector()
    try:
        tel = RunTelemetry.start(tmp_path, "dead", TelemetrySection(otlp_endpoint=srv.url), environ={})
        _steps(tel, 1, 50)
        tel.exporter._proc.kill()
        tel.exporter._proc.wait()
        with caplog.at_level(logging.WARNING, logger="harness.telemetry._export"):
            _steps(tel, 51, 100)
            tel.shutdown()
    finally:
        srv.shutdown()
    warns = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warns) == 1 and "stopped" in warns[0] and srv.url in warns[0]
    assert tel.exporter.dropped > 0
    assert sum(1 for s in iter_spans(tmp_path / "traces.jsonl") if s["name"] == "train.step") == 150


def test_the_in_process_fallback_delivers_the_same_spans(tmp_path: Path) -> None:
    """Where no export process can start, the writer encodes protobuf itself for an in-process sender."""
    from opentelemetry.sdk.trace import TracerProvider

    from harness.telemetry._export import OtlpSettings
    from harness.telemetry._sender import OtlpSender
    from harness.telemetry._writer import TraceWriter

    srv = _Collector()
    try:
        sender = OtlpSender(OtlpSettings(srv.url), schedule_delay_s=30)
        writer = TraceWriter(tmp_path / "traces.jsonl", sender)
        provider = TracerProvider()
        provider.add_span_processor(writer)
        tracer = provider.get_tracer("t")
        for i in range(10):
            with tracer.start_as_current_span("train.step", attributes={"i": i}):
                with tracer.start_as_current_span("reward/r"):
                    pass
        writer.force_flush()
        assert sender.flush(30)
        provider.shutdown()
    finally:
        srv.shutdown()
    assert sorted(_received(srv)) == ["reward/r"] * 10 + ["train.step"] * 10
    assert sender.sent == 20 and writer.lines_written == 10


def test_a_forked_child_does_not_keep_the_shipper_alive(tmp_path: Path) -> None:
    """A child forked during the run (a data loader worker, say) closes its copy of the pipe, so shutdown is
    not held up waiting for the shipper to see the end of its input."""
    import time

    srv = _Collector()
    try:
        tel = RunTelemetry.start(
            tmp_path, "fork", TelemetrySection(otlp_endpoint=srv.url, export_timeout_s=5), environ={}
        )
        _steps(tel, 1, 5)
        pid = os.fork()
        if pid == 0:  # a child that outlives the shipper's shutdown limit and never touches telemetry
            time.sleep(600)
            os._exit(0)
        try:
            tel.shutdown()
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        srv.shutdown()
    assert tel.exporter._proc.returncode == 0  # it ended on its own, not killed at the shutdown limit
    assert tel.exporter.sent == 10
