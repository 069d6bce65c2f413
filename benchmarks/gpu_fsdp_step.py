"""One-GPU FSDP2 smoke check (world size 1): sharded bf16 mixed-precision GRPO updates, a gathered-weight rollout,
a DCP checkpoint round trip and the rank-0 ``save_pretrained`` export, on a random-init Qwen2-style model.

Prints step time, peak GPU memory, the master-weight dtype and whether the reloaded weights match; exits non-zero
when a check fails. Meant to be called from ``benchmarks/gpu_check.sh`` (budget: about 2 minutes on one GPU);
``--device cpu`` runs the same path without mixed precision for a quick local check.

    python benchmarks/gpu_fsdp_step.py [--steps 3] [--hidden 768 --layers 12] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def _batch(rows: int, prompt: int, completion: int, vocab: int):
    from trainer.rollout.base import RolloutBatch

    g = torch.Generator().manual_seed(0)
    p = torch.randint(3, vocab, (rows, prompt), generator=g)
    c = torch.randint(3, vocab, (rows, completion), generator=g)
    return RolloutBatch(p, torch.ones_like(p), c, torch.ones_like(c), torch.zeros(rows, dtype=torch.bool), [""] * rows), \
        torch.randn(rows, generator=g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--completion", type=int, default=256)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("gpu_fsdp_step: no CUDA device; nothing measured", file=sys.stderr)
        return 2
    from trainer import dcp
    from trainer.dist import DistInfo
    from trainer.fsdp import ensure_process_group, full_state_dict, gathered, local_bytes, shard_model
    from trainer.losses import LossConfig
    from trainer.toy import tiny_model
    from trainer.head import PolicyForward
    from trainer.loop import policy_update
    from trainer.update import UpdateInputs

    if cuda:
        torch.cuda.set_device(0)
    info = ensure_process_group(DistInfo(device="cuda:0" if cuda else "cpu"))
    model = tiny_model(args.vocab, hidden=args.hidden, layers=args.layers, heads=max(1, args.hidden // 64)).eval()
    n_params = sum(p.numel() for p in model.parameters())
    fwd = PolicyForward.of(model)  # probed once, before sharding, as the trainer's loop does
    shard_model(model, info, mixed_precision=cuda)
    master = {p.dtype for p in model.parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    batch, adv = _batch(args.rows, 64, args.completion, args.vocab)
    cfg = LossConfig("grpo", max_completion_length=args.completion)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, norms = [], []
    for _ in range(args.steps + 1):
        t0 = time.perf_counter()
        st = policy_update(fwd, opt, sched, batch, UpdateInputs(adv, batch.completion_mask.float()), cfg,
                           temperature=1.0, mu=1, micro_batch_size=max(1, args.rows // 4), max_grad_norm=1.0,
                           dist=info, bf16=cuda)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        norms.append(st["grad_norm"])
    with gathered(model), torch.no_grad():  # a rollout's view: whole weights, plain forward passes
        dev = next(model.parameters()).device
        logits = model(input_ids=batch.prompt_ids[:2].to(dev)).logits
    ok = all(map(lambda x: x == x and x != float("inf"), norms)) and bool(torch.isfinite(logits).all())
    with tempfile.TemporaryDirectory() as d:
        dcp.save_sharded(Path(d) / "sharded", model, opt)
        before = full_state_dict(model)
        for p in model.parameters():  # scramble, then restore from the checkpoint
            p.data.zero_()
        dcp.load_sharded(Path(d), model, opt)
        after = full_state_dict(model)
        same = all(torch.equal(before[k], after[k]) for k in before)
        model.save_pretrained(os.path.join(d, "export"), state_dict=before)
        from transformers import AutoModelForCausalLM

        exported = AutoModelForCausalLM.from_pretrained(os.path.join(d, "export")).state_dict()
        export_ok = all(torch.equal(exported[k].cpu(), before[k]) for k in before)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    print(f"fsdp world size 1 on {args.device}: {n_params / 1e6:.1f}M parameters, master weights {sorted(map(str, master))}, "
          f"bf16 compute {cuda}")
    print(f"update: median {statistics.median(times[1:]):.3f} s/step over {args.steps} steps (first {times[0]:.2f} s), "
          f"grad norms {[round(x, 4) for x in norms]}, peak GPU memory {peak:.2f} GiB, "
          f"local state {(local_bytes(model.parameters()) * 4) / 2**30:.2f} GiB (params+grads+2 moments)")
    print(f"checks: finite {ok}, DCP round trip identical {same}, export reloads identical {export_ok}")
    return 0 if ok and same and export_ok and master == {torch.float32} else 1


if __name__ == "__main__":
    raise SystemExit(main())
