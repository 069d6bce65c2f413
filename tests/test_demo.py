"""The demo pipeline end to end: warm-up, GRPO, held-out evaluation of every checkpoint, traces, report.

It runs the real thing at the demo's own size (a tiny random-init model warmed up in the test, about half a
minute on one core): the held-out math score of the last checkpoint is above the first one's, every held-out
reward span links to the training span of the same reward and step, and the report is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.demo import DemoSettings, run_demo
from harness.demo.cli import format_outcome
from harness.demo.task import make_split
from harness.telemetry._sources import load_file_store


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("demo")
    return run_demo(DemoSettings(output_dir=str(out), run_id="demo-test", progress=False))


def test_split_is_disjoint_and_complete() -> None:
    s = make_split(seed=3)
    assert not set(s.train) & set(s.heldout)
    assert len(s.train) + len(s.heldout) == 100


@pytest.mark.slow
def test_heldout_math_score_rises_from_first_to_last_checkpoint(demo) -> None:
    steps = sorted(demo.heldout)
    assert steps == [20, 40, 60, 80, 100]
    assert demo.rise("math") > 0.05, demo.heldout
    assert demo.rise("boxed_present") > 0.05, demo.heldout


@pytest.mark.slow
def test_heldout_prompts_are_disjoint_from_training_by_the_contamination_check(demo) -> None:
    assert demo.contamination["checked"] is True
    assert demo.contamination["exact"] == 0


@pytest.mark.slow
def test_every_heldout_reward_span_links_to_its_training_reward_span(demo) -> None:
    spans = load_file_store(demo.run_dir)
    by_id = {s["span_id"]: s for s in spans}
    evals = [s for s in spans if s["name"].startswith("eval.reward/")]
    assert len(evals) == 2 * 5  # two rewards, five checkpoints
    for ev in evals:
        reward = ev["name"].split("/", 1)[1]
        step = ev["attributes"]["harness.train.step"]
        targets = [by_id[link["span_id"]] for link in ev["links"]]
        assert [t["name"] for t in targets] == [f"reward/{reward}"]
        assert targets[0]["attributes"]["harness.train.step"] == step
        assert ev["attributes"]["session.id"] == "demo-test"


@pytest.mark.slow
def test_report_table_files_and_last_screen(demo) -> None:
    assert "math" in demo.report_table and "resolved" in demo.report_table and "dangling" not in demo.report_table
    md, png = demo.report_files
    assert md.read_text().count("| math") == 5 and png.stat().st_size > 1000
    screen = format_outcome(demo)
    assert "held-out math:" in screen and "contamination check: 0 exact" in screen
    results = json.loads((demo.run_dir / "eval" / "step-000100" / "results.json").read_text())
    assert set(results["rewards"]) == {"math", "boxed_present"}  # the training rewards, from the saved config


@pytest.mark.slow
def test_warmup_model_and_checkpoints_load_with_from_pretrained(demo) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for d in (demo.run_dir / "warmup-model", demo.run_dir / "checkpoints" / "step-000100"):
        tok = AutoTokenizer.from_pretrained(d)
        model = AutoModelForCausalLM.from_pretrained(d)
        assert tok.decode(tok.encode("3+4=")) == "3+4=" and model.config.vocab_size == len(tok)
    assert Path(demo.run_dir / "checkpoints" / "step-000100" / "telemetry.json").is_file()


def test_smollm2_settings_are_sized_for_a_cpu_and_overrides_win() -> None:
    s = DemoSettings.for_model("smollm2")
    assert (s.steps, s.save_steps, s.k) == (6, 3, 2)
    assert DemoSettings.for_model("smollm2", steps=2, k=None).steps == 2
    assert DemoSettings.for_model("tiny") == DemoSettings()
