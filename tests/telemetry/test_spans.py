"""The span tree, links and attributes of RunTelemetry, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, RunTelemetry, iter_spans
from harness.telemetry._store import spans_from_json
from harness.types import Score


def _start(tmp_path, **cfg):
    mem = InMemorySpanExporter()
    tel = RunTelemetry.start(
        tmp_path, "run-a", TelemetrySection(**cfg), environ={}, extra_processors=[SimpleSpanProcessor(mem)]
    )
    return tel, mem


def _train(tel, steps, means):
    for step in steps:
        with tel.train_step(step) as st:
            st.set_metrics({"loss": 1.0 / step, "kl": 0.01})
            for name, fn in means.items():
                v = fn(step)
                st.record_reward(name, RewardStats.from_values([v, v, None, None, 1 - v, v], group_size=2, weight=0.5))


def test_train_step_tree_and_attributes(tmp_path):
    tel, mem = _start(tmp_path)
    _train(tel, [1, 2], {"math": lambda s: 0.25, "format": lambda s: 1.0})
    tel.shutdown()
    spans = mem.get_finished_spans()
    steps = [s for s in spans if s.name == "train.step"]
    assert len(steps) == 2
    for st in steps:
        assert st.parent is None
        kids = sorted(s.name for s in spans if s.parent is not None and s.parent.span_id == st.context.span_id)
        assert kids == ["reward/format", "reward/math"]
        assert st.attributes["openinference.span.kind"] == "CHAIN"
        assert st.attributes["harness.metric.kl"] == pytest.approx(0.01)
    math1 = next(s for s in spans if s.name == "reward/math" and s.attributes["harness.train.step"] == 1)
    a = math1.attributes
    assert a["harness.run.id"] == "run-a" and a["session.id"] == "run-a"
    assert a["openinference.span.kind"] == "EVALUATOR"
    assert a["harness.reward.mean"] == pytest.approx((0.25 * 3 + 0.75) / 4)
    assert a["harness.reward.count"] == 6 and a["harness.reward.scored"] == 4 and a["harness.reward.unscored"] == 2
    assert a["harness.reward.status.error"] == 2 and a["harness.reward.status.ok"] == 4
    # groups of 2: (0.25, 0.25) flat, (None, None) no signal either, (0.75, 0.25) not flat
    assert a["harness.reward.zero_variance_group_frac"] == pytest.approx(2 / 3)
    assert a["harness.reward.weight"] == 0.5
    assert a["gen_ai.evaluation.name"] == "math"
    assert math1.resource.attributes["service.name"] == "grpo-harness"
    assert math1.resource.attributes["harness.run.id"] == "run-a"


def test_eval_links_to_training_reward_span_of_same_reward_and_step(tmp_path):
    tel, mem = _start(tmp_path)
    _train(tel, [1, 2, 3, 4], {"math": lambda s: s / 10, "format": lambda s: 1.0})
    ctx2 = tel.checkpoint_context(2)
    ctx4 = tel.checkpoint_context(4)
    # the evaluator reads the context back from the checkpoint directory as JSON
    ctx4 = json.loads(json.dumps(ctx4))
    with tel.eval_checkpoint(4, ctx4) as ev:
        ev.set_metrics({"pass@1": 0.2})
        ev.record_reward("math", 0.2, {"pass@1": 0.2})
        ev.record_reward("format", 0.9)
    tel.shutdown()
    spans = mem.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    # training mean since the previous checkpoint: steps 3 and 4 only
    def step_mean(s):
        v = s / 10
        return (3 * v + (1 - v)) / 4

    assert ctx2["rewards"]["math"]["train_mean"] == pytest.approx((step_mean(1) + step_mean(2)) / 2)
    assert ctx4["rewards"]["math"]["train_mean"] == pytest.approx((step_mean(3) + step_mean(4)) / 2)
    assert ctx4["since_step"] == 2 and ctx4["rewards"]["math"]["steps"] == 2

    ev = next(s for s in spans if s.name == "eval.checkpoint")
    assert ev.parent is None and len(ev.links) == 1
    step_span = by_id[ev.links[0].context.span_id]
    assert step_span.name == "train.step" and step_span.attributes["harness.train.step"] == 4
    assert ev.links[0].context.trace_id == step_span.context.trace_id
    assert ev.attributes["harness.metric.pass@1"] == pytest.approx(0.2)

    for name, heldout in (("math", 0.2), ("format", 0.9)):
        er = next(s for s in spans if s.name == f"eval.reward/{name}")
        assert er.parent.span_id == ev.context.span_id
        (link,) = er.links
        target = by_id[link.context.span_id]
        assert target.name == f"reward/{name}"
        assert target.attributes["harness.train.step"] == 4
        assert link.attributes["harness.reward.name"] == name
        a = er.attributes
        assert a["harness.reward.heldout"] == pytest.approx(heldout)
        assert a["harness.reward.train_mean"] == pytest.approx(ctx4["rewards"][name]["train_mean"])
        assert a["harness.reward.gap"] == pytest.approx(a["harness.reward.train_mean"] - heldout)
        assert a["session.id"] == "run-a" and a["harness.train.step"] == 4


def test_file_store_holds_the_same_spans_and_links(tmp_path):
    tel, mem = _start(tmp_path)
    _train(tel, [1, 2], {"math": lambda s: 0.5})
    ctx = tel.checkpoint_context(2)
    with tel.eval_checkpoint(2, ctx) as ev:
        ev.record_reward("math", 0.4)
    tel.shutdown()
    stored = list(iter_spans(tmp_path / "traces.jsonl"))
    mem_ids = {format(s.context.span_id, "016x") for s in mem.get_finished_spans()}
    assert {s["span_id"] for s in stored} == mem_ids
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    # one OTLP request per exported batch; each parses as one (what `harness traces push` sends)
    assert sum(
        len(ss.spans)
        for line in lines
        for rs in encode_spans(spans_from_json(json.loads(line))).resource_spans
        for ss in rs.scope_spans
    ) == len(mem_ids)
    er = next(s for s in stored if s["name"] == "eval.reward/math")
    assert er["links"][0]["span_id"] == ctx["rewards"]["math"]["span_id"]
    assert er["attributes"]["harness.run.id"] == "run-a"


def test_eval_without_context_is_unlinked_but_keeps_attributes(tmp_path):
    tel, mem = _start(tmp_path)
    with tel.eval_checkpoint(10, None) as ev:
        ev.record_reward("math", 0.5)
    tel.shutdown()
    spans = {s.name: s for s in mem.get_finished_spans()}
    assert not spans["eval.checkpoint"].links and not spans["eval.reward/math"].links
    assert spans["eval.reward/math"].attributes["harness.link.linked"] is False
    assert spans["eval.reward/math"].attributes["harness.train.step"] == 10


def test_sampled_per_sample_records(tmp_path):
    tel, mem = _start(tmp_path, sample_records=3)
    samples = [(f"s{i}", Score(value=float(i % 2), status="ok", answer=str(i))) for i in range(10)]
    with tel.train_step(1) as st:
        st.record_reward("math", RewardStats.from_values([s.value for _, s in samples]), samples=samples)
        st.record_reward("quiet", RewardStats.from_values([1.0]))
    tel.shutdown()
    spans = {s.name: s for s in mem.get_finished_spans()}
    events = spans["reward/math"].events
    assert len(events) == 3 and all(e.name == "gen_ai.evaluation.result" for e in events)
    ids = [e.attributes["harness.sample.id"] for e in events]
    assert len(set(ids)) == 3
    e = events[0]
    assert e.attributes["gen_ai.evaluation.score.value"] == float(int(ids[0][1:]) % 2)
    assert e.attributes["gen_ai.evaluation.score.label"] == "ok"
    assert not spans["reward/quiet"].events


def test_per_sample_records_off_by_default(tmp_path):
    tel, mem = _start(tmp_path)
    with tel.train_step(1) as st:
        st.record_reward(
            "math", RewardStats.from_values([1.0, 0.0]), samples=[("a", Score(value=1.0)), ("b", Score(value=0.0))]
        )
    tel.shutdown()
    (math,) = [s for s in mem.get_finished_spans() if s.name == "reward/math"]
    assert not math.events


def test_disabled_writes_nothing_and_still_returns_context(tmp_path):
    tel = RunTelemetry.start(tmp_path, "run-off", TelemetrySection(enabled=False), environ={})
    with tel.train_step(1) as st:
        st.set_metrics({"loss": 1.0})
        st.record_reward("math", RewardStats.from_values([1.0]))
    ctx = tel.checkpoint_context(1)
    with tel.eval_checkpoint(1, ctx) as ev:
        ev.record_reward("math", 1.0)
    tel.shutdown()
    assert not (tmp_path / "traces.jsonl").exists()
    assert ctx["step"] == 1 and ctx["span_id"] is None


def test_checkpoints_bound_the_per_step_memory_and_windows(tmp_path):
    tel, mem = _start(tmp_path)
    _train(tel, range(1, 101), {"math": lambda s: s / 100})
    ctxs = [tel.checkpoint_context(s) for s in range(10, 101, 10)]
    assert len(tel._steps) == 10  # only the checkpointed steps stay, for eval_checkpoint(step, None)
    assert [c["rewards"]["math"]["steps"] for c in ctxs] == [10] * 10
    assert tel.checkpoint_context(50) == ctxs[4]  # asking again gives the same window
    with tel.eval_checkpoint(50, None) as ev:  # the context this process saved for step 50
        ev.record_reward("math", 0.5)
    tel.shutdown()
    (er,) = [s for s in mem.get_finished_spans() if s.name == "eval.reward/math"]
    assert er.attributes["harness.reward.train_mean"] == pytest.approx(ctxs[4]["rewards"]["math"]["train_mean"])
    assert er.links[0].context.span_id == int(ctxs[4]["rewards"]["math"]["span_id"], 16)
