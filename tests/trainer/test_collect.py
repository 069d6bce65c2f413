"""Rollout collection: streamed chunks and dynamic sampling keep scores aligned with their completions."""

from pathlib import Path

import torch

from harness.plugins import add_plugins
from harness.scoring import ScoringSession
from trainer.collect import collect
from trainer.rollout.base import SamplingConfig
from trainer.rollout.hf import HFRollout
from trainer.toy import char_tokenizer, tiny_model, toy_samples


def _rollout(seed=0):
    tok = char_tokenizer()
    return HFRollout(
        tiny_model(len(tok), seed=seed), tok, max_prompt_length=8, generator=torch.Generator().manual_seed(seed)
    )


def _take_from(samples):
    it = iter(samples * 10)
    return lambda n: [next(it) for _ in range(n)]


def test_chunked_scoring_in_worker_processes_stays_aligned():
    r = _rollout()
    add_plugins([str(Path(__file__).resolve().parents[2] / "benchmarks" / "slow_reward.py")])  # char_count_slow
    with ScoringSession([{"name": "char_count_slow", "params": {"delay_s": 0.0}}], timeout=60, cache=False) as s:
        col = collect(
            _take_from(toy_samples(8)),
            r,
            s,
            lambda x: x.prompt_text,
            num_prompts=4,
            group_size=4,
            sampling=SamplingConfig(12),
            pad_id=r.pad_id,
            chunks=3,
        )
        res = col.result()
    assert len(col.batch) == len(res) == len(col.samples) == 16
    assert res.values("char_count_slow") == [float(t.count("a")) for t in col.batch.texts]
    assert [x.id for x in col.samples[:4]] == [col.samples[0].id] * 4  # groups stay adjacent


def test_dynamic_sampling_keeps_only_groups_with_reward_variance():
    r = _rollout(seed=1)
    with ScoringSession([{"name": "char_count", "params": {"char": "a"}}], cache=False) as s:
        col = collect(
            _take_from(toy_samples(16, seed=3)),
            r,
            s,
            lambda x: x.prompt_text,
            num_prompts=3,
            group_size=4,
            sampling=SamplingConfig(6),
            pad_id=r.pad_id,
            dynamic_sampling=True,
            max_rounds=4,
        )
    res = col.result()
    assert res.values("char_count") == [float(t.count("a")) for t in col.batch.texts]
    # fills: model seeds 0-11 at 1 and 2 threads all filled 3 groups within 3 of the 4 rounds allowed
    assert int(col.stats["dynamic/kept_groups"]) == 3
    assert len(col.batch) == 3 * 4
    vals = torch.tensor(res.values("char_count")).view(-1, 4)
    assert bool((vals.max(1).values > vals.min(1).values).all())  # every kept group has spread
    assert col.stats["dynamic/generated_groups"] >= 3


def test_dynamic_sampling_that_cannot_fill_warns_and_stops_at_its_bound(caplog):
    r = _rollout(seed=2)
    # "~" is not in the toy vocabulary: every reward is 0, every group has zero variance
    with (
        ScoringSession([{"name": "char_count", "params": {"char": "~"}}], cache=False) as s,
        caplog.at_level("WARNING"),
    ):
        col = collect(
            _take_from(toy_samples(16)),
            r,
            s,
            lambda x: x.prompt_text,
            num_prompts=2,
            group_size=4,
            sampling=SamplingConfig(4),
            pad_id=r.pad_id,
            dynamic_sampling=True,
            max_rounds=2,
        )
    assert col.stats["dynamic/rounds"] == 2 and col.stats["dynamic/kept_groups"] == 0
    assert "dynamic sampling filled 0 of 2 groups after 2 extra rounds" in caplog.text
    assert len(col.batch) == 8  # trains (without gradient) on the first round's groups


def test_overlong_filtering_masks_truncated_completions():
    from trainer.advantages import group_advantages
    from trainer.collect import totals_tensor
    from trainer.loop import update_inputs

    r = _rollout(seed=4)
    with ScoringSession([{"name": "char_count", "params": {"char": "a"}}], cache=False) as s:
        col = collect(
            _take_from(toy_samples(8)),
            r,
            s,
            lambda x: x.prompt_text,
            num_prompts=2,
            group_size=4,
            sampling=SamplingConfig(3),
            pad_id=r.pad_id,
        )
        col.result()
    assert col.batch.truncated.any()
    advantages = group_advantages(totals_tensor(col.result()), 4)
    on = update_inputs(col.batch, advantages, mask_truncated=True)
    off = update_inputs(col.batch, advantages, mask_truncated=False)
    trunc = col.batch.truncated
    assert (on.loss_mask[trunc] == 0).all()
    assert torch.equal(on.loss_mask[~trunc], off.loss_mask[~trunc])
