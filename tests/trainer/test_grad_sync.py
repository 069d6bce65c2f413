"""Data parallelism without sharding: gradients summed over 2 gloo ranks (CPU) in buckets launched during the last
backward equal the sums of each rank's own gradients, and 2-rank updates equal the 1-process update.

Ranks are ``torch.multiprocessing`` processes with the environment torchrun gives (see ``_dist_helpers``); the
models are a small hand-built module and the trainer's random-init tiny Qwen2 (77k parameters).
"""

from __future__ import annotations

import pytest
import torch
from _dist_helpers import run_ranks
from _dist_ranks import continue_on_fixed_batch, ddp_update_rank, grad_sync_rank

from trainer.dist import DistInfo, GradientSync
from trainer.losses import LossConfig
from trainer.toy import char_tokenizer, tiny_model


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bucketed_sums_equal_every_ranks_local_gradients_summed(tmp_path):
    run_ranks(2, grad_sync_rank, str(tmp_path), timeout=240)
    r0, r1 = torch.load(tmp_path / "sync0.pt"), torch.load(tmp_path / "sync1.pt")
    assert r0["buckets"] >= 4  # 64-byte buckets: the float32 layers span several, the float64 scale its own
    assert r0["in_backward"] >= 1 and r1["in_backward"] >= 1  # some all-reduces started before backward ended
    assert set(r0["summed"]) == set(r1["summed"]) == {"a.weight", "a.bias", "b.weight", "b.bias", "scale", "unused"}
    for name, got in r0["summed"].items():
        want = r0["local"].get(name, torch.zeros_like(got)) + r1["local"].get(name, torch.zeros_like(got))
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        assert torch.equal(got, r1["summed"][name]), f"ranks hold different sums for {name}"
    assert not r0["summed"]["unused"].any()  # no gradient on either rank: zeros, as the flat all-reduce gave


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_rank_updates_equal_the_single_process_update(tmp_path):
    run_ranks(2, ddp_update_rank, str(tmp_path), timeout=360)
    got = torch.load(tmp_path / "ddp.pt")
    model = tiny_model(len(char_tokenizer()), seed=0).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    want = continue_on_fixed_batch(model, opt, sched, LossConfig("grpo", max_completion_length=6), DistInfo())
    # AdamW steps at lr 3e-3 move weights by ~1e-2; the summation order differs between 2 ranks and 1 process
    worst = max(float((got["weights"][k] - v.detach()).abs().max()) for k, v in model.state_dict().items())
    assert worst <= 1e-5, f"weights differ by up to {worst:.3g}"
    for g, w in zip(got["stats"], want, strict=True):
        assert g["grad_norm"] == pytest.approx(w["grad_norm"], rel=1e-4)
        assert g["loss"] == pytest.approx(w["loss"], rel=1e-4, abs=1e-6)


def test_one_process_and_fsdp_leave_gradients_alone():
    lin = torch.nn.Linear(3, 2)
    lin(torch.ones(1, 3)).sum().backward()
    before = lin.weight.grad.clone()
    for info in (DistInfo(), DistInfo(0, 2, parallel="fsdp")):
        sync = GradientSync(lin.parameters(), info)
        sync.arm()
        sync.finish()
        sync.close()
        assert torch.equal(lin.weight.grad, before)
