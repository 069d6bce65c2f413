"""Batch-scaled advantages under data parallelism equal the single-process advantages of the global batch.

The 2-rank test fails on the code before this change (each rank used its own rewards' std: the issue's example,
rank 0 [1,0,1,0] and rank 1 [10,0,10,0] in groups of 2, gave +-0.866 on both ranks instead of +-0.111 / +-1.112).
"""

import pytest
import torch
from _dist_helpers import run_ranks
from _dist_ranks import RANK_REWARDS, batch_advantages_rank

from trainer.advantages import batch_moments, group_advantages, std_from_moments

NAN = float("nan")


@pytest.mark.timeout(300)
def test_two_ranks_batch_scale_equals_single_process_on_the_union(tmp_path):
    run_ranks(2, batch_advantages_rank, str(tmp_path), timeout=240)
    got = torch.cat([torch.load(tmp_path / f"adv{r}.pt") for r in (0, 1)])
    union = torch.tensor(RANK_REWARDS[0] + RANK_REWARDS[1])
    want = group_advantages(union, 2, scale="batch").advantages
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-7)
    # the lone scored rewards (0.5 and 3.0) count in the std; the global std is not either rank's own
    pooled = union[~torch.isnan(union)]
    assert got[0].item() == pytest.approx(0.5 / (pooled.std().item() + 1e-4), rel=1e-6)
    assert abs(got[0].item()) < 0.2 < abs(got[6].item())  # +-0.11 vs +-1.1: one scale for both ranks


def test_lone_scored_reward_counts_in_the_batch_std_but_gets_no_gradient():
    r = torch.tensor([1.0, 0.0, NAN, 7.0])  # second group: one scored reward, no baseline
    a = group_advantages(r, 2, scale="batch", eps=0.0)
    std = torch.tensor([1.0, 0.0, 7.0]).std().item()
    assert a.advantages.tolist() == pytest.approx([0.5 / std, -0.5 / std, 0.0, 0.0], rel=1e-6)
    assert a.trainable.tolist() == [True, True, False, False]


def test_moments_give_the_two_pass_std_and_the_union_advantages():
    r = torch.tensor([0.25, NAN, 3.5, -1.0, 2.0, 0.0], dtype=torch.float64)
    assert std_from_moments(batch_moments(r)) == pytest.approx(r[~torch.isnan(r)].std().item(), rel=1e-12)
    assert std_from_moments(batch_moments(torch.tensor([NAN, 2.0]))) == 0.0
    union = group_advantages(r, 2, scale="batch").advantages
    half = group_advantages(r[:4], 2, scale="batch", global_moments=batch_moments(r)).advantages
    assert torch.allclose(half, union[:4], rtol=1e-12)
    assert not torch.allclose(group_advantages(r[:4], 2, scale="batch").advantages, union[:4])
