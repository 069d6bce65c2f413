"""The file store (written by the SDK's batch processor's thread): what a flush guarantees, and a failing disk that
must not stop training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from harness.telemetry import RewardStats, RunTelemetry, iter_spans
from harness.telemetry._store import FileSpanExporter, spans_from_json, spans_to_json

# a line written by the store's earlier, hand-written encoder (every value type, an event, a status, a link)
OLD_LINE = (
    '{"resourceSpans":[{"resource":{"attributes":[{"key":"harness.run.id","value":{"stringValue":"r0"}}]},"sc'
    'opeSpans":[{"scope":{"name":"harness.telemetry"},"spans":[{"traceId":"1addad67f2fe56a2aac0b0011713bb2b",'
    '"spanId":"411f1fc0c0c82f01","parentSpanId":"a9c37aaf93d8ae39","flags":256,"name":"reward/math","kind":1,'
    '"startTimeUnixNano":"1796277963882017996","endTimeUnixNano":"1796277963882045587","attributes":[{"key":"'
    'harness.reward.mean","value":{"doubleValue":0.5}}],"status":{"message":"boom","code":2}},{"traceId":"1ad'
    'dad67f2fe56a2aac0b0011713bb2b","spanId":"a9c37aaf93d8ae39","flags":256,"name":"train.step","kind":1,"sta'
    'rtTimeUnixNano":"1796277963881926000","endTimeUnixNano":"1796277963882087760","attributes":[{"key":"harn'
    'ess.train.step","value":{"intValue":"3"}},{"key":"x.nan","value":{"doubleValue":"NaN"}},{"key":"x.flag",'
    '"value":{"boolValue":true}},{"key":"x.list","value":{"arrayValue":{"values":[{"intValue":"1"},{"intValue'
    '":"2"}]}}},{"key":"x.s","value":{"arrayValue":{"values":[{"stringValue":"a"}]}}}],"events":[{"timeUnixNa'
    'no":"1796277963881962694","name":"ev","attributes":[{"key":"k","value":{"intValue":"1"}}]}],"status":{}}'
    ',{"traceId":"25279d684714f4b9e7f640bbe9333513","spanId":"7ac8595c44f6173f","flags":256,"name":"eval.chec'
    'kpoint","kind":1,"startTimeUnixNano":"1796277963882154759","endTimeUnixNano":"1796277963882162591","link'
    's":[{"traceId":"1addad67f2fe56a2aac0b0011713bb2b","spanId":"a9c37aaf93d8ae39","attributes":[{"key":"kind'
    '","value":{"stringValue":"train_step"}}],"flags":256}],"status":{}}]}]}]}'
)


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


def test_a_store_written_before_reads_back_and_encodes_to_the_same_request(tmp_path: Path) -> None:
    (tmp_path / "traces.jsonl").write_text(OLD_LINE + "\n")
    spans = {s["name"]: s for s in iter_spans(tmp_path / "traces.jsonl")}
    step = spans["train.step"]
    assert step["attributes"]["harness.train.step"] == 3 and step["attributes"]["x.list"] == [1, 2]
    assert step["attributes"]["x.nan"] != step["attributes"]["x.nan"] and step["events"][0]["name"] == "ev"
    assert spans["reward/math"]["parent_span_id"] == step["span_id"]
    assert spans["eval.checkpoint"]["links"][0]["span_id"] == step["span_id"]
    doc = json.loads(OLD_LINE)
    assert json.loads(spans_to_json(spans_from_json(doc))) == doc  # today's encoder writes the same request
