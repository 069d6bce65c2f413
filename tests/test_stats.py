"""harness.stats: the one definition of each reported statistic (std with n - 1, zero variance, percentiles)."""

from __future__ import annotations

import math

import pytest

from harness.stats import (
    ZERO_VARIANCE_TOL,
    group_has_zero_variance,
    mean_std,
    percentile,
    score_summary,
    window_mean,
    zero_variance_group_frac,
)


def test_mean_std_is_the_sample_std_over_scored_values_only():
    mean, std = mean_std([1.0, None, 3.0, float("nan")])
    assert mean == 2.0 and std == pytest.approx(math.sqrt(2.0))  # ((1-2)^2 + (3-2)^2) / (2 - 1)
    assert mean_std([None]) == (None, None)
    assert mean_std([4.0, None]) == (4.0, None)  # one scored value has no sample std


def test_zero_variance_counts_flat_single_and_all_unscored_groups():
    vals = [1, 1, 0, 1, None, None, 0.5, None]
    # groups of 2: (1,1) flat, (0,1) not, (None,None) no signal, (0.5,None) one scored: no signal
    assert zero_variance_group_frac(vals, 2) == pytest.approx(3 / 4)
    assert zero_variance_group_frac(vals, None) is None
    assert zero_variance_group_frac([None, None], 2) == 1.0
    assert zero_variance_group_frac([], 2) is None


def test_zero_variance_tolerates_float_noise_but_not_signal():
    assert group_has_zero_variance([0.3, 0.1 + 0.2])  # 5.6e-17 apart
    assert not group_has_zero_variance([0.3, 0.3 + 100 * ZERO_VARIANCE_TOL])


def test_percentile_interpolates_and_clamps_q():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
    assert percentile([0, 10], 99) == pytest.approx(9.9)
    assert percentile([0, 10], 150) == 10.0 and percentile([0, 10], -5) == 0.0
    assert percentile([], 50) is None


def test_score_summary_counts_statuses_and_latency_percentiles():
    s = score_summary([1.0, None, 0.0], ["ok", "timeout", "fail"], [0.1, 0.3, 0.2])
    assert (s["mean"], s["count"], s["scored"]) == (0.5, 3, 2)
    assert s["std"] == pytest.approx(math.sqrt(0.5))
    assert s["statuses"] == {"ok": 1, "timeout": 1, "fail": 1}
    assert s["p50_s"] == pytest.approx(0.2) and s["p99_s"] == pytest.approx(0.298)
    assert score_summary([], [])["p50_s"] is None


def test_every_summary_of_one_batch_agrees_with_harness_stats():
    """The scoring path, the span statistics and the evaluator report the same mean and std for one column
    (before, the scoring summary and the spans divided by n and the metrics total and advantages by n - 1)."""
    from evals.results import build_results
    from harness.scoring import BatchResult
    from harness.telemetry import RewardStats
    from harness.types import RewardSpec, Score

    col = [Score(value=1.0), Score(value=0.0), Score.unscored("error", "boom"), Score(value=0.5)]
    res = BatchResult(specs=[RewardSpec(name="r")], scores={"r": col})
    want_mean, want_std = mean_std([s.value for s in col])
    records = [{"prompt_id": str(i), "sample_index": 0, "scores": {"r": s.model_dump()}} for i, s in enumerate(col)]
    held_out = build_results(records, [RewardSpec(name="r")], k=1, success_reward="r", threshold=1.0)["rewards"]["r"]
    for summary in (res.summary()["r"], held_out):
        assert summary["mean"] == want_mean and summary["std"] == pytest.approx(want_std)
    stats = RewardStats.from_batch(res, "r", group_size=2)
    assert stats.mean == want_mean and stats.std == pytest.approx(want_std)


def test_advantages_zero_variance_groups_follow_the_same_rule():
    torch = pytest.importorskip("torch")
    from trainer.advantages import group_advantages

    nan = float("nan")
    rewards = [0.3, 0.1 + 0.2, 0.0, 1.0, nan, nan, 0.5, nan]
    flags = group_advantages(torch.tensor(rewards, dtype=torch.float64), 2).zero_variance.tolist()
    assert flags == [group_has_zero_variance(rewards[i : i + 2]) for i in range(0, 8, 2)] == [True, False, True, True]
    assert sum(flags) / len(flags) == zero_variance_group_frac(rewards, 2)


def test_window_mean_takes_the_scored_steps_after_the_previous_checkpoint_up_to_this_one():
    points = [(1, 0.1), (2, 0.3), (3, None), (4, float("nan")), (5, 0.5), (6, 0.9)]
    assert window_mean(points, 1, 5) == (pytest.approx(0.4), 2)  # steps 2..5, unscored ones left out
    assert window_mean(points, None, 2) == (pytest.approx(0.2), 2)  # no previous checkpoint: from the first step
    assert window_mean(points, 5, 5) == (None, 0) and window_mean(points, 2, 4) == (None, 0)


@pytest.mark.parametrize(
    "module", ["harness.stats", "harness.table", "harness.scoring._result", "harness.telemetry._attrs"]
)
def test_the_examples_of_the_shared_helpers_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
