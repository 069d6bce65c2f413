"""What ``harness eval`` takes from a run's saved config is printed as such, and a saved ``eval.limit`` does not
cut a held-out file the user passes with ``--data``.

Regression tests: on the old main ``harness eval --data my6rows.jsonl`` of a run whose config saved
``eval.limit: 2`` evaluated 2 prompts and said nothing about why.
"""

from __future__ import annotations

import json
from pathlib import Path

from eval_runs import HELDOUT, make_run, write_jsonl

from evals.cli import main


def _prompts(out: Path) -> int:
    return json.loads((out / "results.json").read_text())["dataset"]["prompts"]


def test_a_saved_limit_does_not_cut_a_data_file_and_inherited_settings_are_named(
    tmp_path: Path, tiny_model_dir: Path, capsys
) -> None:
    run = make_run(tmp_path, tiny_model_dir, eval_section={"limit": 2, "k": 1})
    ckpt = str(run / "checkpoints" / "step-000004")
    mine = write_jsonl(tmp_path / "mine.jsonl", [dict(r, id=f"m{i}") for i, r in enumerate(HELDOUT)])
    assert (
        main(
            [
                "--checkpoint",
                ckpt,
                "--data",
                str(mine),
                "--output",
                str(tmp_path / "a"),
                "--no-telemetry",
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert _prompts(tmp_path / "a") == len(HELDOUT)  # all of the user's file
    assert "the saved eval.limit=2 is not applied to --data" in err and "--limit 2" in err
    assert f"settings inherited from {run / 'config.yaml'}: " in err
    inherited = err.split("config.yaml: ")[1].splitlines()[0]
    assert "k=1" in inherited and "temperature=1.0" in inherited and "limit" not in inherited

    # without --data the saved held-out set and its limit apply, and the limit is named as inherited
    assert main(["--checkpoint", ckpt, "--output", str(tmp_path / "b"), "--no-telemetry", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert _prompts(tmp_path / "b") == 2 and "limit=2" in err.split("config.yaml: ")[1].splitlines()[0]
    # an explicit --limit always applies, and is not reported as inherited
    assert (
        main(
            [
                "--checkpoint",
                ckpt,
                "--data",
                str(mine),
                "--limit",
                "3",
                "--output",
                str(tmp_path / "c"),
                "--no-telemetry",
                "--no-progress",
            ]
        )
        == 0
    )
    assert _prompts(tmp_path / "c") == 3 and "not applied" not in capsys.readouterr().err
