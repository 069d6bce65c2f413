"""`harness train` writes checkpoints of the toy task; `harness eval` scores them with the rewards of the saved
config (the trainer's own tiny random-init model, CPU, a few steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from eval_runs import write_jsonl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.cli import main as harness_main

    root = tmp_path_factory.mktemp("train")
    cfg = {
        "run": {"id": "toy-eval", "output_dir": str(root / "runs"), "seed": 0},
        "model": {"name_or_path": "toy:char"},
        "data": {"train": "toy:8", "chat_template": False},
        "rewards": {"char_count": {"weight": 1.0, "params": {"char": "a", "norm": 8.0}}},
        "trainer": {
            "num_generations": 2,
            "prompts_per_step": 1,
            "max_prompt_length": 16,
            "max_completion_length": 8,
            "max_steps": 2,
            "save_steps": 1,
            "lr": 1e-3,
            "monitors": {"truncated_frac": 1.0},
        },
        "eval": {"k": 2, "max_new_tokens": 8, "temperature": 1.0, "top_p": 1.0, "workers": 2},
    }
    path = root / "run.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert harness_main(["train", "--config", str(path), "--no-progress"]) == 0
    run = root / "runs" / "toy-eval"
    assert (run / "checkpoints" / "step-000002" / "config.yaml").is_file()
    return run


def test_eval_cli_scores_a_trained_checkpoint_with_its_saved_rewards(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evals.cli import main

    data = write_jsonl(tmp_path / "h.jsonl", [{"id": f"h{i}", "prompt": f"{c}{c}{c}:"} for i, c in enumerate("abc")])
    rc = main(
        [
            "--checkpoint",
            str(trained_run / "checkpoints" / "step-000002"),
            "--data",
            str(data),
            "--reward",
            "evals_length=0",
            "--param",
            "evals_length.norm=8",
            "--no-progress",
        ]
    )
    assert rc == 0
    out = capsys.readouterr()
    assert "char_count" in out.out and "pass@1=" in out.out
    assert "temperature=1 top_p=1 max_new_tokens=8" in out.err  # sampling settings printed
    res = json.loads((trained_run / "eval" / "step-000002" / "results.json").read_text())
    assert list(res["rewards"]) == ["char_count", "evals_length"]  # saved reward first, --reward added
    assert res["rewards"]["char_count"]["params"] == {"char": "a", "norm": 8.0}
    assert res["rewards"]["evals_length"]["params"] == {"norm": 8} and res["rewards"]["evals_length"]["weight"] == 0
    assert res["step"] == 2 and res["run_id"] == "toy-eval" and res["k"] == 2
    # the training set is toy:8 prompts, not a file: the check says so instead of failing
    assert res["contamination"]["checked"] is False
    recs = [json.loads(x) for x in (trained_run / "eval" / "step-000002" / "samples.jsonl").read_text().splitlines()]
    assert all(r["scores"]["char_count"]["value"] == pytest.approx(r["completion"].count("a") / 8.0) for r in recs)
    from harness.telemetry import iter_spans

    spans = list(iter_spans(trained_run / "traces.jsonl"))
    ev = [s for s in spans if s["name"] == "eval.checkpoint"]
    step2 = [s for s in spans if s["name"] == "train.step" and s["attributes"].get("harness.train.step") == 2]
    assert ev and step2 and any(link["span_id"] == step2[0]["span_id"] for link in ev[-1].get("links", []))


def test_eval_every_checkpoint_of_a_run_and_watch_stops_when_idle(trained_run: Path, tmp_path: Path) -> None:
    from evals.cli import main

    data = write_jsonl(tmp_path / "h.jsonl", [{"id": "h0", "prompt": "aa:"}])
    out = tmp_path / "evals"
    assert (
        main(
            [
                "--checkpoints",
                str(trained_run),
                "--data",
                str(data),
                "--output",
                str(out),
                "--watch",
                "--watch-timeout",
                "0",
                "--watch-interval",
                "0.1",
                "--no-progress",
                "--no-telemetry",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["step-000001", "step-000002"]
    assert all((out / n / "results.json").is_file() for n in ("step-000001", "step-000002"))


def test_eval_cli_errors_are_exit_codes(trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evals.cli import main

    assert main(["--checkpoints", str(tmp_path), "--data", "x.jsonl"]) == 2
    assert "no checkpoints/ directory" in capsys.readouterr().err
    assert (
        main(
            [
                "--checkpoint",
                str(trained_run / "checkpoints" / "step-000001"),
                "--data",
                str(tmp_path / "missing.jsonl"),
            ]
        )
        == 2
    )
    assert "data file not found" in capsys.readouterr().err


def test_max_new_tokens_defaults_to_the_training_length(tmp_path) -> None:
    from evals.checkpoint import CheckpointInfo
    from evals.runner import resolve_settings
    from harness.config import load_config

    cfg = load_config({"trainer": {"max_completion_length": 24}})
    in_run = CheckpointInfo(path=tmp_path, step=10, run_dir=tmp_path, config=cfg, telemetry_ctx=None, run_id="r")
    assert resolve_settings(in_run, None, None, None).max_new_tokens == 24  # held-out on the training scale
    alone = CheckpointInfo(path=tmp_path, step=None, run_dir=None, config=None, telemetry_ctx=None, run_id=None)
    assert resolve_settings(alone, None, 3, "hf").max_new_tokens == 1024
