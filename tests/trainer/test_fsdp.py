"""FSDP2 on CPU with gloo: sharded updates equal the single-process update, sharded checkpoints resume on another
world size, and the rank-0 export loads in a plain process.

Ranks are ``torch.multiprocessing`` processes with the environment torchrun gives (see ``_dist_helpers``); the
model is the trainer's random-init tiny Qwen2 (77k parameters), the batches are seeded random token ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _dist_helpers import run_ranks
from _dist_ranks import chain, continue_on_fixed_batch, loop_rank, resume_and_continue, update_rank

from trainer.dist import DistInfo
from trainer.losses import LossConfig
from trainer.toy import char_tokenizer, tiny_model

pytestmark = pytest.mark.slow

#: the toy run every resume test shares: KL to a (sharded) reference, so the loss depends on the weights, and
#: advantages scaled by the global batch std (an all-reduce inside the update)
_RUN = {
    "beta": 0.1,
    "scale_rewards": "batch",
    "parallel": "fsdp",
    "micro_batch_size": 4,
    "save_steps": 2,
    "max_steps": 4,
}


def _close(a: dict, b: dict, tol: float = 1e-5) -> float:
    assert a.keys() == b.keys()
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst <= tol, f"weights differ by up to {worst:.3g}"
    return worst


@pytest.mark.timeout(400)
def test_fsdp_updates_equal_the_single_process_update_with_half_the_state_per_rank(tmp_path):
    run_ranks(2, update_rank, str(tmp_path), timeout=360)
    got = torch.load(tmp_path / "fsdp.pt")
    model = tiny_model(len(char_tokenizer()), seed=0).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    want = continue_on_fixed_batch(
        model, opt, sched, LossConfig("grpo", max_completion_length=6), DistInfo(), updates=3
    )
    # 3 AdamW steps at lr 3e-3 move weights by ~1e-2; summation order differs between 2 ranks and 1 process
    _close(got["weights"], {k: v.detach() for k, v in model.state_dict().items()}, tol=1e-5)
    for g, w in zip(got["stats"], want, strict=True):
        assert g["grad_norm"] == pytest.approx(w["grad_norm"], rel=1e-4)
        assert g["loss"] == pytest.approx(w["loss"], rel=1e-4, abs=1e-6)
    assert got["gathered_shapes"] == {n: tuple(p.shape) for n, p in model.named_parameters()}  # whole, not shards
    full = sum(p.numel() * p.element_size() for p in model.parameters())
    for part, ddp_bytes in (("params", full), ("grads", full), ("optim", 2 * full)):
        ratio = got["mem"][part] / ddp_bytes
        assert 0.45 <= ratio <= 0.56, f"{part}: rank 0 holds {ratio:.3f} of a whole copy"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-rank sharded run and a 2-rank one (uninterrupted, and cut at step 2 then resumed), each checkpoint
    resumed on the other world size (and on one plain DDP process) and continued on one fixed global batch."""
    out = tmp_path_factory.mktemp("fsdp_runs")
    one = {**_RUN, "max_steps": 2}
    run_ranks(
        1,
        chain,
        (loop_rank, (str(out), "loop1", [{"run_id": "one", **one}])),
        (resume_and_continue, (str(out), "one", "one_on_1", one)),
        timeout=400,
    )
    run_ranks(
        2,
        chain,
        (
            loop_rank,
            (
                str(out),
                "loop2",
                [
                    {"run_id": "full", **_RUN},
                    {"run_id": "cut", **_RUN, "max_steps": 2},
                    {"run_id": "cut", **_RUN, "resume": True},
                ],
            ),
        ),
        (resume_and_continue, (str(out), "full", "two_on_2", _RUN)),
        (resume_and_continue, (str(out), "one", "one_on_2", one)),
        timeout=600,
    )
    resume_and_continue(0, str(out), "full", "two_on_ddp1", {**_RUN, "parallel": "ddp"})
    return out


def _print_losses(name: str, a: list[dict], b: list[dict]) -> None:
    print(
        f"{name}: "
        + "; ".join(
            f"loss {x['loss']:.7f} vs {y['loss']:.7f}, grad_norm {x['grad_norm']:.6f} vs {y['grad_norm']:.6f}"
            for x, y in zip(a, b, strict=True)
        )
    )


@pytest.mark.timeout(1200)
def test_two_rank_sharded_run_resumed_on_two_ranks_repeats_the_uninterrupted_losses(runs):
    full, cut, resumed = torch.load(runs / "loop2.pt")
    assert [m["step"] for m in resumed] == [3, 4] and len(cut) == 2
    _print_losses("2 -> 2 (loop)", full[2:], resumed)
    for a, b in zip(full[2:], resumed, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-7)
        assert b["kl"] == pytest.approx(a["kl"], rel=1e-5, abs=1e-9)
        assert b["reward/total/mean"] == a["reward/total/mean"]
    assert all(m["kl"] > 0 for m in full[1:])  # the weights moved away from the reference


@pytest.mark.parametrize("saved, other", [("two_on_2", "two_on_ddp1"), ("one_on_1", "one_on_2")], ids=["2->1", "1->2"])
def test_sharded_checkpoint_continues_identically_on_another_world_size(runs, saved, other):
    a, b = torch.load(runs / f"{saved}.pt"), torch.load(runs / f"{other}.pt")
    assert a["start"] == b["start"] > 0 and a["world"] != b["world"]
    _close(a["weights_at_resume"], b["weights_at_resume"], tol=0.0)  # the same restored weights, bit for bit
    _print_losses(f"{saved} vs {other}", a["stats"], b["stats"])
    for x, y in zip(a["stats"], b["stats"], strict=True):
        assert y["loss"] == pytest.approx(x["loss"], rel=1e-5, abs=1e-7)
        assert y["grad_norm"] == pytest.approx(x["grad_norm"], rel=1e-4)
    assert a["stats"][1]["kl"] > 0  # restored optimizer moments and weights, not a fresh start
    _close(a["weights"], b["weights"], tol=1e-5)


def test_rank0_export_equals_the_sharded_weights_and_evaluates_in_a_plain_process(runs, tmp_path):
    from transformers import AutoModelForCausalLM

    ckpt = runs / "full" / "checkpoints" / "step-000004"
    assert (ckpt / "sharded" / ".metadata").is_file() and (ckpt / "model.safetensors").is_file()
    exported = AutoModelForCausalLM.from_pretrained(ckpt).state_dict()
    sharded = torch.load(runs / "two_on_2.pt")["weights_at_resume"]
    _close({k: exported[k] for k in sharded}, sharded, tol=0.0)
    data = tmp_path / "heldout.jsonl"
    data.write_text("".join(json.dumps({"id": f"h{i}", "prompt": f"{c}{c}:"}) + "\n" for i, c in enumerate("abc")))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "eval",
            "--checkpoint",
            str(ckpt),
            "--data",
            str(data),
            "--k",
            "2",
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((runs / "full" / "eval" / "step-000004" / "results.json").read_text())
    assert res["step"] == 4 and "char_count" in res["rewards"]
