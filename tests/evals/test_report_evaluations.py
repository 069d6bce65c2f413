"""``harness report`` keeps held-out evaluations apart: an ad-hoc ``harness eval`` of a run's checkpoint (another
data set, k and reward, output elsewhere) leaves the run's report unchanged, and ``--eval`` shows it on request.

Regression: on the old main the latest ``eval.checkpoint`` span of a checkpoint won, whatever it had evaluated, so
a 6-prompt ad-hoc file replaced the run's held-out score and raised a false divergence alarm. The model is the
tests' tiny random-init Qwen2-style model (nothing downloaded); evaluations are real, in this process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_runs import write_jsonl

from harness.cfg.telemetry import AlarmSection, TelemetrySection
from harness.cli import main as harness_main
from harness.report.build import build_report, format_table
from harness.report.sources import load_file_store
from harness.telemetry import RewardStats, RunTelemetry


def _report_json(run: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert harness_main(["report", str(run), "--json", "--out", str(run / "rep"), *extra]) == 0
    return capsys.readouterr().out


def test_an_ad_hoc_eval_leaves_the_run_report_unchanged(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert harness_main(["eval", "--checkpoints", str(run_dir), "--no-progress"]) == 0
    before = _report_json(run_dir, capsys)
    doc = json.loads(before)
    assert [e["own"] for e in doc["evaluations"]] == [True]
    own = doc["evaluations"][0]
    assert own["data"] == "heldout.jsonl" and own["k"] == 4 and own["prompts"] == 6
    assert {r["reward"] for r in doc["rows"]} == {"evals_contains_answer", "evals_length"}
    assert all(r["data"] == "heldout.jsonl" and r["k"] == 4 and r["evaluation"] == own["id"] for r in doc["rows"])

    other = write_jsonl(tmp_path / "adhoc.jsonl", [{"id": f"x{i}", "prompt": f"{i}?", "answer": "7"} for i in range(3)])
    ckpt = run_dir / "checkpoints" / "step-000004"
    assert (
        harness_main(
            [
                "eval",
                "--checkpoint",
                str(ckpt),
                "--data",
                str(other),
                "--k",
                "2",
                "--reward",
                "evals_slow=0",
                "--param",
                "evals_slow.delay=0",
                "--output",
                str(tmp_path / "elsewhere"),
                "--no-progress",
            ]
        )
        == 0
    )
    adhoc = json.loads((tmp_path / "elsewhere" / "results.json").read_text())["evaluation"]
    assert f"not the run's own: harness report {run_dir} shows it with --eval {adhoc['id']}" in capsys.readouterr().err
    assert adhoc["own"] is False and adhoc["id"] != own["id"] and adhoc["data"] == "adhoc.jsonl"

    assert _report_json(run_dir, capsys) == before  # the run's report did not move
    capsys.readouterr()
    assert harness_main(["report", str(run_dir), "--out", str(tmp_path / "r")]) == 0
    table = capsys.readouterr().out
    assert "heldout.jsonl, k=4" in table and "not shown: 1 other evaluation" in table and adhoc["id"] in table
    assert "evals_slow" not in table.split("not shown")[0]  # the ad-hoc reward has no row (nor a panel)

    both = json.loads(_report_json(run_dir, capsys, "--eval", "all"))
    assert [e["id"] for e in both["evaluations"]] == [own["id"], adhoc["id"]]
    assert {(r["reward"], r["data"], r["k"]) for r in both["rows"] if r["evaluation"] == adhoc["id"]} == {
        ("evals_contains_answer", "adhoc.jsonl", 2),
        ("evals_length", "adhoc.jsonl", 2),
        ("evals_slow", "adhoc.jsonl", 2),
    }
    only = json.loads(_report_json(run_dir, capsys, "--eval", adhoc["id"][:6]))
    assert [e["id"] for e in only["evaluations"]] == [adhoc["id"]]
    capsys.readouterr()
    assert harness_main(["report", str(run_dir), "--eval", "nope"]) == 2
    assert "matches no evaluation" in capsys.readouterr().err


def _rising_run(run_dir: Path) -> dict:
    """Training and the run's own held-out score rise together over 4 checkpoints; then a 6-prompt ad-hoc file
    scores 0.0 at the last checkpoint (the false alarm of the old report)."""
    tel = RunTelemetry.start(run_dir, "r", TelemetrySection(), environ={})
    own = {"id": "aaaaaaaaaaaa", "own": True, "data": "heldout.jsonl", "prompts": 64, "k": 8, "rewards": ["math"]}
    adhoc = {
        "id": "bbbbbbbbbbbb",
        "own": False,
        "data": "six.jsonl",
        "prompts": 6,
        "k": 2,
        "rewards": ["math", "judge"],
    }
    ctxs = {}
    for step in range(1, 13):
        with tel.train_step(step) as st:
            st.record_reward("math", RewardStats.from_values([step / 12] * 4))
        if step % 3 == 0:
            ctxs[step] = tel.checkpoint_context(step)
            with tel.eval_checkpoint(step, ctxs[step], own) as ev:
                ev.record_reward("math", step / 12 - 0.05)
    with tel.eval_checkpoint(12, ctxs[12], adhoc) as ev:
        ev.record_reward("math", 0.0)
        ev.record_reward("judge", 0.5)
    tel.shutdown()
    return own


def test_an_ad_hoc_zero_raises_no_alarm_and_adds_no_panel(tmp_path: Path) -> None:
    _rising_run(tmp_path)
    cfg = AlarmSection(window=3, train_rise=0.05, heldout_min_rise=0.01)
    spans = load_file_store(tmp_path)
    rep = build_report(spans, cfg)
    assert [r.heldout for r in rep.rows] == pytest.approx([3 / 12 - 0.05, 6 / 12 - 0.05, 9 / 12 - 0.05, 12 / 12 - 0.05])
    assert not rep.alarms and {r.reward for r in rep.rows} == {"math"}
    assert [e.id for e in rep.hidden] == ["bbbbbbbbbbbb"]
    # shown on request, the ad-hoc evaluation has its own rows and windows: its single checkpoint averages steps 1..12
    every = build_report(spans, cfg, evaluation="all")
    adhoc = [r for r in every.rows if r.evaluation == "bbbbbbbbbbbb"]
    assert {(r.reward, r.data, r.k) for r in adhoc} == {("math", "six.jsonl", 2), ("judge", "six.jsonl", 2)}
    assert next(r for r in adhoc if r.reward == "math").train_steps == 12
    assert "six.jsonl, k=2 [bbbbbbbbbbbb]" in format_table(every)
    assert build_report(spans, cfg, evaluation="six.jsonl").evaluations[0].id == "bbbbbbbbbbbb"


def test_without_an_own_evaluation_the_first_one_made_is_followed(tmp_path: Path) -> None:
    """A run whose config names no held-out set: every evaluation is ad hoc; later ones do not take over."""
    tel = RunTelemetry.start(tmp_path, "r", TelemetrySection(), environ={})
    with tel.train_step(3) as st:
        st.record_reward("math", RewardStats.from_values([0.5] * 4))
    ctx = tel.checkpoint_context(3)
    for eid, value in (("first0000000", 0.4), ("second000000", 0.0)):
        with tel.eval_checkpoint(3, ctx, {"id": eid, "own": False, "data": f"{eid}.jsonl", "k": 1}) as ev:
            ev.record_reward("math", value)
    tel.shutdown()
    rep = build_report(load_file_store(tmp_path))
    assert [(r.evaluation, r.heldout) for r in rep.rows] == [("first0000000", 0.4)]
