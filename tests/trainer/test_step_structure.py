"""What one GRPO step is made of: the metric names it records and the source files a reader must open to follow it.

Both run a real step of the toy task (random-init tiny Qwen2-style model built from a config, char-level tokenizer,
the real scoring path).

- Every metric of a step is named in :mod:`trainer.metrics` (a constant, or ``reward/<name>/<stat>``), so mypy
  checks the names where they are written and read; a module that writes a metric by a string of its own fails.
- The files whose functions one step calls in the training process (found with ``sys.setprofile``): the step is
  meant to be followed in few files, so a new one must be a decision. The ceiling is on the trainer's own files
  (other packages change the count of theirs on their own terms; the failure message lists every file); it is
  today's count: lower it when a change removes a file from the step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _trainer_helpers import toy_config

from harness.telemetry import RunTelemetry
from trainer import metrics as M
from trainer.loop import setup_training, train, train_step

ROOT = Path(__file__).resolve().parents[2]
#: files of trainer/ whose code one traced GRPO step runs in the training process (measured: 15 of 23 in the
#: repository, trainer/memory.py's heap trims the 15th; the others are harness/ scoring, statistics, data and
#: telemetry modules)
TRAINER_FILES_CEILING = 15


def _declared() -> set[str]:
    return {v for k, v in vars(M).items() if k.isupper() and isinstance(v, str)}


def test_every_metric_of_a_step_has_a_declared_name(tmp_path: Path) -> None:
    rewards = {"char_count": {"params": {"char": "a", "norm": 16.0}}, "overlong": {"weight": 0.0}}
    cfg = toy_config(tmp_path, "names", rewards=rewards, max_steps=1, save_steps=0, dynamic_sampling=True)
    result = train(cfg, progress=False)
    line = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    per_reward = {M.reward_key(name, stat) for name in rewards for stat in M.REWARD_STATS}
    assert set(line) - _declared() - per_reward == set()
    always = {M.STEP, M.TOTAL_MEAN, M.LOSS, M.KL, M.ENTROPY, M.GRAD_NORM, M.STEP_S, M.REWARD_CRITICAL_S}
    always |= {M.DYNAMIC_ROUNDS, M.GENERATE_S, M.MEAN_LENGTH, M.reward_key("overlong", "mean")}
    assert always <= set(line)  # the names are the ones actually written, not a list beside them


def _files_of_one_step(tmp_path: Path) -> dict[str, int]:
    cfg = toy_config(tmp_path, "files", max_steps=2, save_steps=0)
    ctx, run_dir, _ = setup_training(cfg, False)
    calls: dict[str, int] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(ROOT)) and not Path(name).relative_to(ROOT).parts[0].startswith((".", "tests")):
                calls[name] = calls.get(name, 0) + 1

    tel = RunTelemetry.start(run_dir, "files", cfg.telemetry)
    try:
        train_step(ctx, 1, tel)  # the first step: lazy imports and one-off checks are not part of every step
        sys.setprofile(profile)
        try:
            train_step(ctx, 2, tel)
        finally:
            sys.setprofile(None)
    finally:
        tel.shutdown()
        ctx.session.close()
    return {str(Path(k).relative_to(ROOT)): v for k, v in calls.items()}


def test_one_grpo_step_runs_code_of_few_files(tmp_path: Path) -> None:
    files = _files_of_one_step(tmp_path)
    listing = "\n".join(f"{k} ({v} calls)" for k, v in sorted(files.items()))
    assert {"trainer/loop.py", "trainer/update.py", "trainer/collect.py"} <= set(files), listing  # the hook sees
    trainer_files = [f for f in files if f.startswith("trainer/")]
    assert len(trainer_files) <= TRAINER_FILES_CEILING, f"one step now runs code of {len(files)} files:\n{listing}"
