"""A training step's reward span in the run's file store carries the judge's model, token usage, latency and
rationale (GenAI names) on its per-sample ``gen_ai.evaluation.result`` events, from real judge Scores."""

from __future__ import annotations

from pathlib import Path

from scripted_server import Action, ScriptedServer

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, RunTelemetry, iter_spans


def test_judge_fields_reach_the_traces_file(scripted: ScriptedServer, make_judge, tmp_path: Path) -> None:
    judge = make_judge(scripted.url, cache=False)
    scores = [judge({"prompt": "2+3?", "answer": "5"}, "5")]
    scripted.default = Action(text="no verdict here")
    scores.append(judge({"prompt": "2+2?", "answer": "4"}, "4"))
    samples = [(f"s{i}", s) for i, s in enumerate(scores)]
    tel = RunTelemetry.start(tmp_path, "run-j", TelemetrySection(sample_records=2), environ={})
    with tel.train_step(1) as st:
        st.record_reward("llm_judge", RewardStats.from_values([s.value for s in scores]), samples=samples)
    tel.shutdown()
    span = next(s for s in iter_spans(tel.traces_path) if s["name"] == "reward/llm_judge")
    ok, failed = [e["attributes"] for e in span["events"]]
    assert ok["gen_ai.request.model"] == "scripted" and ok["gen_ai.usage.input_tokens"] == 11
    assert ok["gen_ai.usage.output_tokens"] == 7 and ok["harness.judge.latency_s"] > 0
    assert ok["gen_ai.evaluation.explanation"] == "Looks right." and ok["harness.judge.rubric"] == "correctness"
    assert failed["gen_ai.evaluation.score.label"] == "error" and "gen_ai.evaluation.score.value" not in failed
    assert failed["gen_ai.usage.output_tokens"] == 7
