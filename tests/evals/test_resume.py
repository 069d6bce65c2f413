"""A crashed evaluation resumes without recomputing finished prompts: a real process is SIGKILLed halfway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from eval_runs import HERE, write_jsonl

from evals import evaluate
from evals.outputs import EvalOutput, read_records
from harness.cfg.eval import EvalSection

pytestmark = pytest.mark.slow

SETTINGS = dict(k=2, temperature=1.0, top_p=1.0, max_new_tokens=8, workers=2)
SPECS: list[dict[str, Any]] = [
    {"name": "evals_contains_answer"},
    {"name": "evals_slow", "weight": 0.0, "params": {"delay": 0.3}},
]

SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import evals_test_rewards  # registers the test rewards
from evals import evaluate
from harness.cfg.eval import EvalSection

if __name__ == "__main__":
    evaluate({ckpt!r}, {data!r}, {specs!r}, settings=EvalSection(**{settings!r}), output_dir={out!r},
             telemetry=False)
"""


def test_resume_after_kill_keeps_finished_prompts_and_matches_an_uninterrupted_run(
    run_dir: Path, tmp_path: Path
) -> None:
    ckpt = str(run_dir / "checkpoints" / "step-000004")
    data = write_jsonl(
        tmp_path / "h.jsonl", [{"id": f"q{i}", "prompt": f"{i} * 3 = ?", "answer": str(i * 3 % 10)} for i in range(12)]
    )
    out = tmp_path / "out"
    script = tmp_path / "run_eval.py"
    script.write_text(SCRIPT.format(here=HERE, ckpt=ckpt, data=str(data), specs=SPECS, settings=SETTINGS, out=str(out)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if samples.exists() and len(read_records(samples)[0]) >= 2:  # at least one prompt finished
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the evaluator and its scoring workers
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"evaluation ended before the kill: {proc.stderr.read().decode(errors='replace') if proc.stderr else ''}"
    )
    before, _ = read_records(samples)
    assert not (out / "results.json").exists()
    with samples.open("a") as f:
        f.write('{"prompt_id": "q11", "sample_in')  # a write cut short by the crash

    res = evaluate(ckpt, str(data), SPECS, settings=EvalSection(**SETTINGS), output_dir=out, telemetry=False)
    t = res.results["timing"]
    finished_before = len(
        {r["prompt_id"] for r in before if sum(x["prompt_id"] == r["prompt_id"] for x in before) == 2}
    )
    assert t["prompts_resumed"] == finished_before and 0 < finished_before < 12
    assert t["prompts_generated"] == 12 - finished_before
    after, _ = read_records(samples)
    assert after[: len(before)] == before  # finished samples were kept as they were, not recomputed
    assert len({(r["prompt_id"], r["sample_index"]) for r in after}) == 24
    assert res.results["completions"]["count"] == 24

    # the resumed evaluation equals an uninterrupted one (per-prompt seeds)
    fresh = evaluate(
        ckpt, str(data), SPECS[:1], settings=EvalSection(**SETTINGS), output_dir=tmp_path / "fresh", telemetry=False
    )
    want = {
        (r["prompt_id"], r["sample_index"]): r["completion"]
        for r in read_records(fresh.output_dir / "samples.jsonl")[0]
    }
    got = {(r["prompt_id"], r["sample_index"]): r["completion"] for r in after}
    assert got == want
    assert res.results["pass@k"] == fresh.results["pass@k"]


def test_torn_tail_is_trimmed_and_partial_prompts_are_redone(tmp_path: Path) -> None:
    out = EvalOutput(tmp_path, {"k": 2}, k=2)
    assert out.open() == {}
    out.append(
        [
            {"prompt_id": "a", "sample_index": 0},
            {"prompt_id": "a", "sample_index": 1},
            {"prompt_id": "b", "sample_index": 0},
        ]
    )
    with out.samples_path.open("a") as f:
        f.write('{"prompt_id": "b", "samp')
    done = EvalOutput(tmp_path, {"k": 2}, k=2).open()
    assert list(done) == ["a"]  # b has one of its two samples: redone
    assert out.samples_path.read_text().endswith("}\n")  # the torn line is gone
    assert json.loads(out.samples_path.read_text().splitlines()[-1])["prompt_id"] == "b"
