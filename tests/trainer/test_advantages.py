"""Group-relative advantages against hand-computed values (DeepSeekMath eq. 3 outcome supervision, Dr. GRPO)."""

import math

import pytest
import torch

from trainer.advantages import group_advantages, zero_variance_groups

NAN = float("nan")


def test_group_scale_matches_hand_computed_values():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    a = group_advantages(r, 4, scale="group", eps=0.0)
    # group 1: mean 0.5, unbiased std sqrt(1/3); group 2: mean 2.75, std 1.5
    s1, s2 = math.sqrt(1 / 3), 1.5
    want = [0.5 / s1, -0.5 / s1, -0.5 / s1, 0.5 / s1, -0.75 / s2, -0.75 / s2, -0.75 / s2, 2.25 / s2]
    assert a.advantages.tolist() == pytest.approx(want, rel=1e-6)
    assert a.trainable.all()
    assert a.zero_variance.tolist() == [False, False]


def test_none_scale_is_dr_grpo_centering_only():
    r = torch.tensor([3.0, 1.0, 2.0, 2.0])
    a = group_advantages(r, 2, scale="none")
    assert a.advantages.tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0])
    assert a.zero_variance.tolist() == [False, True]


def test_batch_scale_uses_one_std_for_all_groups():
    r = torch.tensor([1.0, 0.0, 4.0, 0.0])
    a = group_advantages(r, 2, scale="batch", eps=0.0)
    std = torch.tensor([1.0, 0.0, 4.0, 0.0]).std().item()
    assert a.advantages.tolist() == pytest.approx([0.5 / std, -0.5 / std, 2 / std, -2 / std], rel=1e-6)


def test_unscored_are_excluded_from_mean_and_std_not_zero():
    # if the NaN were a 0, the mean would be 2/3 and the first sample's advantage would differ
    r = torch.tensor([1.0, 0.0, NAN, 1.0])
    a = group_advantages(r, 4, scale="none")
    assert a.group_mean.tolist() == pytest.approx([2 / 3])
    assert a.advantages.tolist() == pytest.approx([1 / 3, -2 / 3, 0.0, 1 / 3])
    assert a.trainable.tolist() == [True, True, False, True]


def test_group_with_fewer_than_two_scored_gives_no_gradient():
    r = torch.tensor([NAN, 1.0, NAN, NAN, 1.0, 0.0])
    a = group_advantages(r, 3)
    assert a.trainable.tolist() == [False, False, False, False, True, True]
    assert a.advantages[:3].tolist() == [0.0, 0.0, 0.0]
    assert a.zero_variance.tolist() == [True, False]
    assert math.isnan(a.group_std[0])


def test_zero_variance_group_gets_zero_advantage_not_nan():
    a = group_advantages(torch.tensor([0.5, 0.5, 0.5, 0.5]), 4)
    assert a.advantages.tolist() == [0.0] * 4
    assert zero_variance_groups(torch.tensor([1.0, 1.0, 0.0, 1.0]), 2).tolist() == [True, False]


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.zeros(4), 3)
    with pytest.raises(ValueError, match="1-D"):
        group_advantages(torch.zeros(2, 2), 2)
