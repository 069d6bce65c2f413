"""The contamination check of ``harness eval`` reads the training data the run used, from any directory.

Regression tests: on the old main a run saved ``data.train`` as the relative path it was given, and an evaluation
started from another directory could not find it, so the contamination check was silently skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from eval_runs import TRAIN, make_run, write_jsonl

from evals import evaluate
from harness.config import dump_config, load_config


def test_a_saved_run_config_holds_absolute_data_paths(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "train.jsonl", TRAIN)
    cfg = load_config({"data": {"train": "data/train.jsonl", "heldout": "hf:gsm8k:main:test"}})
    dump_config(cfg, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())["data"]
    assert saved["train"] == str(tmp_path / "data" / "train.jsonl") and saved["heldout"] == "hf:gsm8k:main:test"


def test_an_older_relative_train_path_resolves_where_the_run_was_started(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch
) -> None:
    run = make_run(tmp_path, tiny_model_dir)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["run"]["output_dir"] = "runs"  # as `harness train` was given them, relative to tmp_path
    cfg["data"] = {"train": "data/train.jsonl", "heldout": "data/heldout.jsonl"}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    leaked = write_jsonl(tmp_path / "leaky.jsonl", [dict(TRAIN[0], id="leak")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = evaluate(run / "checkpoints" / "step-000004", leaked, output_dir=tmp_path / "o", telemetry=False, k=1)
    c = res.results["contamination"]
    assert c["checked"], c
    assert c["exact_ids"] == ["leak"] and c["train_source"] == str(tmp_path / "data" / "train.jsonl")
    held = evaluate(run / "checkpoints" / "step-000004", output_dir=tmp_path / "o2", telemetry=False, k=1)
    assert json.loads((held.output_dir / "results.json").read_text())["dataset"]["prompts"] == 6
