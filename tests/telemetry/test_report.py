"""harness report: the divergence alarm (pure), the join from a real file store, the CLI outputs."""

from __future__ import annotations

import json

import pytest

from harness.cfg.telemetry import AlarmSection, TelemetrySection
from harness.cli import main as harness_main
from harness.report.build import build_report, divergence_alarms, format_table, to_markdown
from harness.report.sources import load_file_store
from harness.telemetry import RewardStats, RunTelemetry


def test_alarm_fires_when_train_rises_and_heldout_is_flat_or_falls():
    cfg = AlarmSection(window=3, train_rise=0.05, heldout_min_rise=0.01)
    train = [0.1, 0.2, 0.3, 0.4, 0.5]
    heldout = [0.3, 0.4, 0.5, 0.5, 0.45]
    out = divergence_alarms(train, heldout, cfg)
    # ckpt 2 compares 0 -> 2: held-out +0.2, fine; ckpt 3: 1 -> 3 held-out +0.1, fine; ckpt 4: 2 -> 4: -0.05
    assert out[:4] == [None, None, None, None]
    assert out[4] is not None and "fell" in out[4] and "+0.200" in out[4]
    flat = divergence_alarms([0.1, 0.3], [0.5, 0.505], AlarmSection(window=2))
    assert flat[1] is not None and "flat" in flat[1]
    # training falling never alarms; missing values never alarm
    assert divergence_alarms([0.5, 0.1], [0.5, 0.1], AlarmSection(window=2)) == [None, None]
    assert divergence_alarms([None, 0.2, 0.5], [0.5, 0.5, 0.4], cfg) == [None, None, None]


def _hacking_run(run_dir, run_id="hack", steps=12, every=3):
    """Training reward climbs every step; held-out climbs until step 6, then falls (reward hacking)."""
    tel = RunTelemetry.start(run_dir, run_id, TelemetrySection(), environ={})
    heldout = {3: 0.30, 6: 0.40, 9: 0.38, 12: 0.35}
    for step in range(1, steps + 1):
        with tel.train_step(step) as st:
            st.record_reward("math", RewardStats.from_values([step / steps] * 4))
            st.record_reward("format", RewardStats.from_values([0.9] * 4))
        if step % every == 0:
            ctx = tel.checkpoint_context(step)
            with tel.eval_checkpoint(step, ctx) as ev:
                ev.record_reward("math", heldout[step])
                ev.record_reward("format", 0.9)
    tel.shutdown()


def test_build_report_from_file_store_joins_windows_and_flags_hacking(tmp_path):
    _hacking_run(tmp_path)
    rep = build_report(load_file_store(tmp_path), AlarmSection(window=3, train_rise=0.05, heldout_min_rise=0.01))
    assert rep.run_id == "hack"
    math_rows = [r for r in rep.rows if r.reward == "math"]
    assert [r.step for r in math_rows] == [3, 6, 9, 12]
    # training mean since the previous checkpoint: steps 4..6 -> (4+5+6)/3/12
    assert math_rows[1].train_mean == pytest.approx(5 / 12) and math_rows[1].train_steps == 3
    assert math_rows[1].heldout == pytest.approx(0.40)
    assert math_rows[1].gap == pytest.approx(5 / 12 - 0.40)
    assert all(r.link == "resolved" for r in rep.rows)
    # window of 3 checkpoints: at 9 held-out still rose from 3 (+0.08); at 12 it fell from 6 (-0.05)
    assert [(r.step, r.reward) for r in rep.alarms] == [(12, "math")]
    table = format_table(rep)
    assert "ALARM math @ step 12" in table and "format" in table
    md = to_markdown(rep)
    assert "| 12 | math |" in md and "## Alarms" in md and "report.png" in md


def test_report_cli_writes_markdown_and_png_and_can_fail_on_alarm(tmp_path, capsys):
    _hacking_run(tmp_path)
    assert harness_main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ALARM math @ step 12" in out
    png = (tmp_path / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert "| 9 | math |" in (tmp_path / "report.md").read_text()
    assert harness_main(["report", str(tmp_path), "--fail-on-alarm"]) == 1
    # a looser threshold silences the alarm
    assert harness_main(["report", str(tmp_path), "--fail-on-alarm", "--train-rise", "0.9"]) == 0
    capsys.readouterr()
    assert harness_main(["report", str(tmp_path), "--json", "--out", str(tmp_path / "o")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_id"] == "hack" and len(doc["rows"]) == 8


def test_report_thresholds_come_from_run_config(tmp_path, capsys):
    _hacking_run(tmp_path)
    (tmp_path / "config.yaml").write_text("telemetry:\n  alarm:\n    train_rise: 0.95\n")
    assert harness_main(["report", str(tmp_path), "--fail-on-alarm"]) == 0
    (tmp_path / "config.yaml").write_text("telemetry:\n  alarm:\n    window: 1\n")
    assert harness_main(["report", str(tmp_path), "--config", str(tmp_path / "config.yaml")]) == 2
    assert "telemetry.alarm.window" in capsys.readouterr().err


def test_report_without_store_names_the_file(tmp_path, capsys):
    assert harness_main(["report", str(tmp_path / "nope")]) == 2
    assert "no trace file store" in capsys.readouterr().err


def test_report_of_several_runs_picks_one(tmp_path):
    _hacking_run(tmp_path, run_id="a", steps=3)
    _hacking_run(tmp_path, run_id="b", steps=6)
    spans = load_file_store(tmp_path)
    assert {r.step for r in build_report(spans, run_id="a").rows} == {3}
    assert build_report(spans).run_id == "b"  # the latest


def test_no_alarm_while_heldout_is_saturated_at_or_above_training():
    """Regression: on the old main held-out 1.000 at every checkpoint while training climbed toward it alarmed."""
    cfg = AlarmSection(window=3)
    assert divergence_alarms([0.5, 0.7, 0.9], [1.0, 1.0, 1.0], cfg) == [None, None, None]
    assert divergence_alarms([0.6, 0.8, 1.0], [1.0, 1.0, 1.0], cfg) == [None, None, None]  # training got there too
    # the same training curve against a flat held-out score below it, or one that can still rise, alarms
    assert divergence_alarms([0.5, 0.7, 0.9], [0.6, 0.6, 0.6], cfg)[2] is not None
    assert divergence_alarms([0.5, 0.7, 0.9], [0.8, 0.8, 0.8], cfg)[2] is not None
    assert divergence_alarms([0.5, 0.7, 0.9], [1.0, 1.0, 1.0], AlarmSection(window=3, saturated_at=None))[2] is not None


def test_a_span_with_a_step_that_is_not_a_number_is_left_out_with_a_warning(caplog):
    def span(name: str, step: object, **attrs: object) -> dict:
        a = {"harness.run.id": "r", "harness.train.step": step, **attrs}
        return {
            "name": name,
            "span_id": f"{name}@{step}",
            "start_ns": 1,
            "end_ns": 2,
            "attributes": a,
            "events": [],
            "links": [],
        }

    spans = [
        span("reward/m", 1, **{"harness.reward.mean": 0.5}),
        span("reward/m", "two", **{"harness.reward.mean": 0.9}),
        span("eval.reward/m", 1, **{"harness.reward.heldout": 0.4}),
        span("eval.reward/m", 2.5, **{"harness.reward.heldout": 0.1}),
    ]
    report = build_report(spans)
    assert [(r.step, r.train_mean, r.heldout) for r in report.rows] == [(1, 0.5, 0.4)]
    assert report.train_curve == {"m": [(1, 0.5)]}
    left_out = [r.getMessage() for r in caplog.records if "is not a step number" in r.getMessage()]
    assert len(left_out) == 2 and "'two'" in " ".join(left_out) and "2.5" in " ".join(left_out)
