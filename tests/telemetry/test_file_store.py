"""The file store (written by the SDK's batch processor's thread): what a flush guarantees, and a failing disk that
must not stop training."""

from __future__ import annotations

import logging
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness.telemetry import RewardStats, RunTelemetry, iter_spans
from harness.telemetry._store import FileSpanExporter


def test_flush_puts_every_finished_step_in_the_file_before_shutdown(tmp_path: Path) -> None:
    tel = RunTelemetry.start(tmp_path, "run-f", environ={})
    for step in range(1, 6):
        with tel.train_step(step) as st:
            st.record_reward("r", RewardStats.from_values([0.5, 1.0], group_size=2))
    assert tel.flush()
    names = sorted(s["name"] for s in iter_spans(tmp_path / "traces.jsonl"))
    assert names == ["reward/r"] * 5 + ["train.step"] * 5
    tel.shutdown()


def test_checkpoint_context_flushes_the_spans_it_points_to(tmp_path: Path) -> None:
    tel = RunTelemetry.start(tmp_path, "run-c", environ={})
    with tel.train_step(1) as st:
        st.record_reward("r", RewardStats.from_values([0.5], group_size=1))
    ctx = tel.checkpoint_context(1)
    stored = {s["span_id"] for s in iter_spans(tmp_path / "traces.jsonl")}
    assert ctx["span_id"] in stored and ctx["rewards"]["r"]["span_id"] in stored
    tel.shutdown()


def test_a_full_disk_warns_once_and_spans_keep_ending(caplog) -> None:
    store = FileSpanExporter("/dev/full")  # every write fails with ENOSPC
    provider = TracerProvider()
    processor = BatchSpanProcessor(store)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="harness.telemetry"):
        for i in range(20):
            with tracer.start_as_current_span(f"root{i}"):
                with tracer.start_as_current_span("child"):
                    pass
            assert processor.force_flush(10_000)
        provider.shutdown()
    warnings = [r for r in caplog.records if "writing traces" in r.getMessage()]
    assert len(warnings) == 1
    assert "/dev/full" in warnings[0].getMessage()
    assert store.lines_written == 0
