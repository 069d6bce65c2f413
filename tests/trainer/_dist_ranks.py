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
