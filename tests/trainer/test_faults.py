"""Reward faults never kill a run: unscored samples leave their groups, an all-unscored batch gives no update."""

import torch
from _trainer_helpers import toy_config
from safetensors.torch import load_file

from harness.registry import reward
from harness.types import Score
from trainer import train
from trainer.toy import char_tokenizer, tiny_model


@reward("trainer_test_flaky", isolation="inline")
def _flaky():
    """Raises on completions containing 'q' or 'z' (a broken plugin), else counts 'a'."""

    def score(sample, completion):
        if "q" in completion or "z" in completion:
            raise RuntimeError("plugin bug")
        return Score(value=completion.count("a") / 16)

    return score


@reward("trainer_test_broken", isolation="inline")
def _broken():
    """Always raises."""

    def score(sample, completion):
        raise ZeroDivisionError("always")

    return score


def test_a_crashing_reward_leaves_samples_unscored_and_the_run_finishes(tmp_path, caplog):
    cfg = toy_config(tmp_path, "flaky", rewards={"trainer_test_flaky": 1.0}, max_steps=6)
    res = train(cfg, progress=False)
    assert res.steps == 6
    unscored = [m["reward/trainer_test_flaky/unscored_frac"] for m in res.metrics]
    assert max(unscored) > 0.1
    assert any("trainer_test_flaky" in w and "unscored" in w for w in res.warnings)
    assert "error" in res.metrics[0]["reward/trainer_test_flaky/statuses"]
    assert all(m["loss"] == m["loss"] for m in res.metrics)  # never NaN


def test_an_all_unscored_batch_warns_and_changes_no_weight(tmp_path):
    cfg = toy_config(tmp_path, "broken", rewards={"trainer_test_broken": 1.0}, max_steps=2)
    res = train(cfg, progress=False)
    assert any("every sample of this batch is unscored" in w for w in res.warnings)
    assert res.metrics[-1]["reward/total/scored_frac"] == 0.0
    assert res.metrics[-1]["grad_norm"] == 0.0
    saved = load_file(str(res.last_checkpoint / "model.safetensors"))
    init = tiny_model(len(char_tokenizer()), seed=0).state_dict()
    for name, w in saved.items():
        assert torch.equal(w, init[name]), name


def test_lora_trains_only_the_adapters_and_beta_loads_a_reference(tmp_path):
    cfg = toy_config(
        tmp_path, "lora", max_steps=2, beta=0.04, lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    )
    res = train(cfg, progress=False)
    trainable = [n for n, p in res.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert all(m["kl"] >= 0.0 for m in res.metrics)
    assert res.metrics[-1]["kl"] > 0.0  # the adapters moved the policy away from the frozen reference
    assert (res.last_checkpoint / "adapter_config.json").is_file()
