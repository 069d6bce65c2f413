"""What each spawned rank runs in the distributed tests (spawned processes import functions by module name,
and test modules are not importable under pytest's importlib mode, so the rank bodies live here)."""

from __future__ import annotations

import torch

NAN = float("nan")
#: Rewards of rank 0 and rank 1, groups of 2; each rank has one group with a lone scored reward.
RANK_REWARDS = [[1.0, 0.0, 1.0, 0.0, NAN, 0.5], [10.0, 0.0, 10.0, 0.0, 3.0, NAN]]


def batch_advantages_rank(rank: int, out: str) -> None:
    from trainer.dist import group_advantages_over_ranks, init_distributed

    info = init_distributed(prefer_cuda=False)
    ga = group_advantages_over_ranks(torch.tensor(RANK_REWARDS[rank]), 2, "batch", info)
    torch.save(ga.advantages, f"{out}/adv{rank}.pt")


# --- FSDP: the same global batch on 1 or 2 ranks -------------------------------------------------------------

GLOBAL_ROWS = 16


def fixed_batch(rows: slice | None = None):
    """A seeded global batch of 16 completions (random ids, some padding), the same in every process."""
    from _batches import batch_of

    g = torch.Generator().manual_seed(1234)
    p_ids = torch.randint(3, 40, (GLOBAL_ROWS, 5), generator=g)
    p_mask = torch.ones_like(p_ids)
    p_mask[::3, :2] = 0  # some left padding
    c_ids = torch.randint(3, 40, (GLOBAL_ROWS, 6), generator=g)
    c_mask = torch.ones_like(c_ids)
    c_mask[1::4, 4:] = 0  # some shorter completions
    adv = torch.randn(GLOBAL_ROWS, generator=g)
    rows = rows or slice(0, GLOBAL_ROWS)
    batch = batch_of(p_ids[rows], p_mask[rows], c_ids[rows], c_mask[rows])
    return batch, adv[rows]


def rank_rows(info) -> slice:
    per = GLOBAL_ROWS // info.world_size
    return slice(info.rank * per, (info.rank + 1) * per)


def continue_on_fixed_batch(model, optimizer, scheduler, loss_cfg, info, updates: int = 2, ref=None) -> list[dict]:
    """``updates`` policy updates on this rank's rows of the fixed batch; loss, KL and grad norm of each (the
    loss and KL summed over ranks: each rank's share uses the global normalizers)."""
    from trainer.dist import all_reduce_sum
    from trainer.loop import policy_update
    from trainer.update import UpdateInputs

    batch, adv = fixed_batch(rank_rows(info))
    out = []
    for _ in range(updates):
        st = policy_update(
            model,
            optimizer,
            scheduler,
            batch,
            UpdateInputs(adv, batch.completion_mask.float()),
            loss_cfg,
            temperature=1.0,
            mu=2,
            micro_batch_size=4,
            max_grad_norm=1.0,
            dist=info,
            ref_model=ref,
        )
        loss, kl = all_reduce_sum([st["loss"], st["kl"]], info)
        out.append({"loss": loss, "kl": kl, "grad_norm": st["grad_norm"]})
    return out


def full_weights(model) -> dict:
    from trainer.fsdp import full_state_dict

    return full_state_dict(model)


def update_rank(rank: int, out: str) -> None:
    """Shard a tiny model (with activation checkpointing) over the ranks and take 3 updates of the fixed batch;
    rank 0 saves the weights, the stats and the bytes it holds."""
    from trainer.dist import init_distributed
    from trainer.fsdp import ensure_process_group, gathered, local_bytes, shard_model
    from trainer.losses import LossConfig
    from trainer.toy import char_tokenizer, tiny_model

    info = ensure_process_group(init_distributed(prefer_cuda=False))
    model = tiny_model(len(char_tokenizer()), seed=0).eval()
    # activation checkpointing composes with sharding: each layer is re-gathered for its recomputation
    # (transformers checkpoints only in train mode; this model has no dropout, so train mode changes nothing else)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    shard_model(model, info)
    with gathered(model), torch.no_grad():  # a rollout: rank 1 decodes more steps than rank 0, no collective
        shapes = {n: tuple(p.shape) for n, p in model.named_parameters() if type(p) is torch.nn.Parameter}
        for _ in range(1 + 3 * rank):
            model(input_ids=torch.randint(3, 40, (2, 5)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    stats = continue_on_fixed_batch(model, opt, sched, LossConfig("grpo", max_completion_length=6), info, updates=3)
    states = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    mem = {
        "params": local_bytes(model.parameters()),
        "grads": local_bytes(p.grad for p in model.parameters()),
        "optim": local_bytes(states),
    }
    full = full_weights(model)
    if rank == 0:
        torch.save({"weights": full, "stats": stats, "mem": mem, "gathered_shapes": shapes}, f"{out}/fsdp.pt")


def loop_rank(rank: int, out: str, tag: str, runs: list[dict]) -> None:
    """Each of ``runs`` (toy_config keyword sets plus 'resume') through ``trainer.train``; rank 0 saves metrics."""
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _trainer_helpers import toy_config

    from trainer import train

    results = []
    for r in runs:
        kw = dict(r)
        resume, run_id = kw.pop("resume", False), kw.pop("run_id")
        res = train(toy_config(out, run_id, **kw), resume=resume, progress=False)
        results.append(
            [{k: m[k] for k in ("step", "loss", "kl", "grad_norm", "reward/total/mean")} for m in res.metrics]
        )
    if rank == 0:
        torch.save(results, f"{out}/{tag}.pt")


def resume_and_continue(rank: int, out: str, run_id: str, tag: str, trainer: dict) -> None:
    """Resume ``run_id`` through the loop's setup, continue on the fixed batch, save stats and full weights."""
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _trainer_helpers import toy_config

    from trainer.loop import setup_training

    ctx, _, start = setup_training(toy_config(out, run_id, **trainer), resume=True)
    try:
        before = full_weights(ctx.model)
        stats = continue_on_fixed_batch(
            ctx.model, ctx.optimizer, ctx.scheduler, ctx.loss_cfg, ctx.dist, ref=ctx.reference
        )
        full = full_weights(ctx.model)
    finally:
        ctx.session.close()
    if ctx.dist.rank == 0:
        torch.save(
            {
                "start": start,
                "stats": stats,
                "weights": full,
                "weights_at_resume": before,
                "world": ctx.dist.world_size,
                "parallel": ctx.dist.parallel,
            },
            f"{out}/{tag}.pt",
        )


def chain(rank: int, *calls) -> None:
    """Run several rank bodies in one set of processes: ``calls`` are (function, args) pairs."""
    for fn, args in calls:
        fn(rank, *args)


# --- bucketed gradient all-reduce (data parallelism without sharding) ----------------------------------------


class _MixedNet(torch.nn.Module):
    """Two float32 layers, a float64 scale (a bucket of its own dtype), a parameter no forward uses and a frozen
    one."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 2.0, 4, dtype=torch.float64))
        self.unused = torch.nn.Parameter(torch.zeros(3))
        self.frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.b(torch.tanh(self.a(x))).double() * self.scale).pow(2).sum()


def grad_sync_rank(rank: int, out: str) -> None:
    """Accumulate gradients over this rank's micro-batches (rank 1 runs one more than rank 0), reducing during
    the last backward in 64-byte buckets; save the summed gradients, the local ones and the overlap count."""
    from trainer.dist import GradientSync, init_distributed

    info = init_distributed(prefer_cuda=False)
    torch.manual_seed(0)
    model = _MixedNet()
    g = torch.Generator().manual_seed(100 + rank)
    micro = [torch.randn(3, 8, generator=g) for _ in range(2 + rank)]
    for x in micro:  # the local gradients, without any reduction
        model(x).backward()
    local = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    sync = GradientSync(model.parameters(), info, bucket_bytes=64, max_inflight=2)
    for k, x in enumerate(micro):
        if k == len(micro) - 1:
            sync.arm()
        model(x).backward()
    sync.finish()
    sync.close()
    summed = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    torch.save(
        {"local": local, "summed": summed, "buckets": len(sync.buckets), "in_backward": sync.launched_in_backward},
        f"{out}/sync{rank}.pt",
    )


def ddp_update_rank(rank: int, out: str) -> None:
    """Two policy updates of the tiny model on this rank's half of the fixed batch; rank 0 saves weights and stats."""
    from trainer.dist import init_distributed
    from trainer.losses import LossConfig
    from trainer.toy import char_tokenizer, tiny_model

    info = init_distributed(prefer_cuda=False)
    model = tiny_model(len(char_tokenizer()), seed=0).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    stats = continue_on_fixed_batch(model, opt, sched, LossConfig("grpo", max_completion_length=6), info)
    if rank == 0:
        torch.save({"weights": {k: v.detach() for k, v in model.state_dict().items()}, "stats": stats}, f"{out}/ddp.pt")
