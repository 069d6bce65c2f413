"""Gradients through FSDP2 equal the unsharded model's, and no rank warns that the model returned a view.

Regression: the sharded log-prob forward returned a reshape (a view), and torch warned on every rank that an
in-place op on it "can cause backward to fail or produce wrong gradients". The trainer does no in-place op on it,
so the gradients were right (this test, on the old main, passes its gradient check and fails only its warning
check); the output is now a tensor of its own and the warning is gone. Two gloo ranks on CPU, the trainer's
random-init tiny Qwen2 (nothing downloaded), seeded random token ids.
"""

from __future__ import annotations

import pytest
import torch
from _dist_helpers import run_ranks
from _grad_ranks import batch, grad_rank, loss_of

from trainer.toy import char_tokenizer, tiny_model

pytestmark = pytest.mark.slow


@pytest.mark.timeout(400)
def test_sharded_gradients_equal_the_unsharded_gradients_without_a_view_warning(tmp_path):
    run_ranks(2, grad_rank, str(tmp_path), timeout=360)
    got = torch.load(tmp_path / "grads.pt")
    model = tiny_model(len(char_tokenizer()), seed=0).train()
    loss_of(model, *batch()).backward()  # the whole batch in one process: the sum of both ranks' losses
    want = {n: p.grad for n, p in model.named_parameters()}
    assert got["grads"].keys() == want.keys()
    for name, g in want.items():
        scale = float(g.abs().max())
        assert scale > 0, f"{name}: no gradient in the reference"  # every parameter takes part
        err = float((got["grads"][name] - g).abs().max())
        assert err <= 1e-5 * max(1.0, scale), f"{name}: sharded gradient differs by {err:.3g} (max |g| {scale:.3g})"
    assert not [w for w in got["warnings"] if "view tensor" in w], got["warnings"]
    assert got["left"] == []  # nothing of ours hangs off the sharded model after its forward and backward


_TRAIN = """
run: {{id: fsdp-cli, output_dir: {out}, seed: 0}}
model: {{name_or_path: "toy:char"}}
data: {{train: "toy:16", chat_template: false}}
rewards: {{char_count: {{weight: 1.0, params: {{norm: 8.0}}}}}}
trainer: {{parallel: fsdp, num_generations: 2, prompts_per_step: 2, max_prompt_length: 16, max_completion_length: 8,
          max_steps: 2, save_steps: 2, lr: 1.0e-3, monitors: {{truncated_frac: 1.0}}}}
telemetry: {{enabled: false}}
"""


@pytest.mark.timeout(600)
def test_torchrun_prints_one_summary_and_a_resume_on_fewer_ranks_says_so(tmp_path):
    """``torchrun -m trainer.cli`` on 2 gloo ranks: one summary (rank 1 printed ``checkpoint None`` on the old main),
    no view warning; resuming its sharded checkpoint in one process says what changes with the number of ranks."""
    import os
    import subprocess
    import sys

    cfg = tmp_path / "run.yaml"
    cfg.write_text(_TRAIN.format(out=tmp_path / "runs"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "trainer.cli",
            "--config",
            str(cfg),
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    summaries = [line for line in two.stdout.splitlines() if line.startswith("run fsdp-cli:")]
    assert len(summaries) == 1 and "checkpoint None" not in two.stdout, two.stdout
    assert "step-000002" in summaries[0]
    assert "view tensor" not in two.stderr
    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.cli",
            "--config",
            str(cfg),
            "--resume",
            "--no-progress",
            "--set",
            "trainer.max_steps=3",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert one.returncode == 0, one.stderr[-3000:]
    assert "written by 2 rank(s), resumed on 1" in one.stderr and "resharded" in one.stderr
    assert "run fsdp-cli: 3 steps" in one.stdout
