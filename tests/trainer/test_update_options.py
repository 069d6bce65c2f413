"""Update options at real sizes, checked on random-init tiny models: gradient checkpointing, token-budget
micro-batches, float32 master weights under a bfloat16 config, the truncated importance-sampling correction and
the refusal of top_p < 1."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from _batches import random_rollout_batch

from harness.cfg.trainer import TrainerSection
from harness.config import load_config
from harness.errors import ConfigError
from trainer.loop import policy_update
from trainer.losses import LossConfig, policy_loss, tis_weights
from trainer.rollout.base import right_pad
from trainer.setup import disable_dropout, enable_checkpointing, load_policy, use_bf16, validate
from trainer.toy import char_tokenizer, tiny_model
from trainer.update import UpdateInputs, completion_logprobs, micro_batches, prepare_update


def _update(model, batch, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    adv = torch.linspace(-1.0, 1.0, len(batch))
    inputs = UpdateInputs(adv, batch.completion_mask.float())
    return policy_update(model, opt, sched, batch, inputs, kw.pop("loss", LossConfig("grpo")), temperature=0.8, **kw)


def test_micro_batches_respect_the_row_and_token_bounds():
    pm = torch.ones(5, 4)
    cm = right_pad([[1] * n for n in (2, 6, 3, 1, 8)], 0)[1]
    assert micro_batches(pm, cm) == [slice(0, 5)]
    assert micro_batches(pm, cm, size=2) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    # rows x (4 + longest completion): [0,1] = 2 x 10 = 20; adding row 2 gives 30 > 24
    assert micro_batches(pm, cm, tokens=24) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert micro_batches(pm, cm, tokens=5) == [slice(i, i + 1) for i in range(5)]  # a long row stands alone
    assert micro_batches(pm, cm, size=1, tokens=1000) == [slice(i, i + 1) for i in range(5)]


@pytest.mark.parametrize("loss", ["grpo", "dapo", "dr_grpo"])
def test_token_budget_micro_batches_give_the_one_batch_loss_and_step(loss):
    tok = char_tokenizer()
    base = tiny_model(len(tok), seed=2)
    batch = random_rollout_batch(len(tok), [3, 9, 2, 7, 5, 1])
    cfg = LossConfig(loss, max_completion_length=9)
    one, split = copy.deepcopy(base), copy.deepcopy(base)
    a = _update(one, batch, loss=cfg)
    b = _update(split, batch, loss=cfg, micro_batch_tokens=30)
    assert a["micro_batches"] == 1 and b["micro_batches"] >= 3
    assert b["loss"] == pytest.approx(a["loss"], abs=1e-6)
    for (name, p), (_, q) in zip(one.named_parameters(), split.named_parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), name


def test_gradient_checkpointing_gives_the_same_gradients():
    tok = char_tokenizer()
    plain = tiny_model(len(tok), seed=4)
    ckpt = copy.deepcopy(plain)
    plain.eval()
    disable_dropout(ckpt)
    enable_checkpointing(ckpt)
    ckpt.train()
    assert any(getattr(m, "gradient_checkpointing", False) for m in ckpt.modules())
    batch = random_rollout_batch(len(tok), [4, 8, 6])
    w = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    for m in (plain, ckpt):
        logp, _ = completion_logprobs(m, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, 1.0)
        (logp * w * batch.completion_mask).sum().backward()
    for (name, p), (_, q) in zip(plain.named_parameters(), ckpt.named_parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-5), name


def test_dropout_is_disabled_in_train_mode():
    tok = char_tokenizer()
    m = tiny_model(len(tok))
    m.config.attention_dropout = 0.5
    for layer in m.model.layers:
        layer.self_attn.attention_dropout = 0.5
    disable_dropout(m)
    m.train()
    ids = torch.randint(2, len(tok), (2, 12))
    a, b = m(input_ids=ids).logits, m(input_ids=ids).logits
    assert torch.equal(a, b)
    assert all(layer.self_attn.attention_dropout == 0.0 for layer in m.model.layers)


def _saved_model_config(tmp_path, dtype, **trainer):
    tok = char_tokenizer()
    tiny_model(len(tok), seed=5).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return load_config(
        {
            "run": {"id": "p", "output_dir": str(tmp_path / "runs")},
            "model": {"name_or_path": str(tmp_path / "m"), "dtype": dtype},
            "data": {"train": "toy:8", "chat_template": False},
            "rewards": {"char_count": 1.0},
            "trainer": {"num_generations": 2, "max_prompt_length": 8, "max_completion_length": 8, **trainer},
        }
    )


def test_bfloat16_config_trains_float32_master_weights_under_autocast(tmp_path):
    cfg = _saved_model_config(tmp_path, "bfloat16")
    t = cfg.trainer.resolved()
    model, tok = load_policy(cfg, t, "cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert use_bf16(cfg, t, "cpu") is True
    batch = random_rollout_batch(len(tok), [6, 6, 6, 6])

    def changed_fraction(m: torch.nn.Module) -> float:
        before = [p.detach().clone() for p in m.parameters()]
        opt = torch.optim.AdamW(m.parameters(), lr=1e-6)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
        inputs = UpdateInputs(torch.tensor([1.0, -1.0, 0.5, -0.5]), batch.completion_mask.float())
        policy_update(m, opt, sched, batch, inputs, LossConfig("grpo"), temperature=1.0, bf16=True)
        moved = sum(int((p.detach() != b).sum()) for p, b in zip(m.parameters(), before, strict=True))
        return moved / sum(b.numel() for b in before)

    bf16_weights = copy.deepcopy(model).to(torch.bfloat16)
    assert changed_fraction(model) > 0.9  # float32 master weights take the lr 1e-6 step
    assert changed_fraction(bf16_weights) < 0.2  # what training bfloat16 weights directly would do


def test_float16_and_top_p_below_one_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="float16"):
        validate(_saved_model_config(tmp_path, "float16"), TrainerSection(), 1)
    with pytest.raises(ValueError, match="top_p=0.95.*top_p: 1.0"):
        TrainerSection(top_p=0.95)


def test_tis_weights_against_hand_computed_values():
    old = torch.log(torch.tensor([[0.5, 0.2, 0.3], [0.1, 0.1, 0.9]]))
    sampler = torch.log(torch.tensor([[0.25, 0.4, 0.3], [0.1, 0.05, 0.9]]))
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    w, st = tis_weights(old, sampler, mask, cap=1.5)
    # ratios 2, 0.5, 1 | 1, 2, (1, masked)
    assert torch.allclose(w, torch.tensor([[1.5, 0.5, 1.0], [1.0, 1.5, 1.0]]), atol=1e-6)
    assert st.mean == pytest.approx(6.5 / 5, abs=1e-6) and st.max == pytest.approx(2.0, abs=1e-6)
    assert st.capped_frac == pytest.approx(2 / 5)
    ws, sst = tis_weights(old, sampler, mask, cap=1.1, sequence=True)
    seq = [math.exp((math.log(2) + math.log(0.5) + 0) / 3), math.exp((0 + math.log(2)) / 2)]  # 1, sqrt(2)
    assert ws.tolist() == pytest.approx([seq[0], 1.1], abs=1e-6)
    assert sst.max == pytest.approx(seq[1], abs=1e-6) and sst.capped_frac == pytest.approx(0.5)


def test_is_weight_scales_each_token_loss():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    mask = torch.ones(1, 2)
    adv = torch.tensor([2.0])
    w = torch.tensor([[1.5, 0.5]])
    out = policy_loss(logp, logp, adv, mask, LossConfig("grpo"), is_weight=w)
    assert float(out.loss) == pytest.approx(-(2.0 * 1.5 + 2.0 * 0.5) / 2)  # ratio 1: -A * w, mean over tokens


def test_update_applies_the_correction_with_the_sampler_logprobs():
    tok = char_tokenizer()
    model = tiny_model(len(tok), seed=6)
    batch = random_rollout_batch(len(tok), [4, 2, 3])
    with torch.no_grad():
        trainer_logp, _ = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, 0.8)
    shift = torch.tensor([[0.5, -0.5, 0.0, 0.2], [0.0, 1.5, 0.0, 0.0], [-0.3, 0.0, 0.1, 0.0]])
    batch.sampler_logp = (trainer_logp - shift) * batch.completion_mask  # ratio exp(shift) on real tokens
    m = _update(copy.deepcopy(model), batch, is_cap=2.0)
    r = torch.exp(shift)[batch.completion_mask.bool()]
    assert m["is_ratio/mean"] == pytest.approx(float(r.mean()), rel=1e-4)
    assert m["is_ratio/max"] == pytest.approx(math.exp(1.5), rel=1e-4)
    assert m["is_ratio/capped_frac"] == pytest.approx(1 / 9)
    off = _update(copy.deepcopy(model), batch, is_cap=None)
    assert "is_ratio/mean" not in off and off["loss"] != pytest.approx(m["loss"])


def test_a_run_with_checkpointing_and_token_micro_batches_equals_the_plain_run(tmp_path):
    """The loop wiring: the same seeded toy run with gradient checkpointing (train mode, dropout off) and
    micro-batches of at most 48 padded tokens gives the plain run's losses and rewards step for step."""
    from _trainer_helpers import toy_config

    from trainer import train

    plain = train(toy_config(tmp_path, "plain", max_steps=3), progress=False)
    split = train(
        toy_config(tmp_path, "split", max_steps=3, gradient_checkpointing=True, micro_batch_tokens=48), progress=False
    )
    assert [m["micro_batches"] for m in plain.metrics] == [1.0] * 3
    assert all(m["micro_batches"] >= 3 for m in split.metrics)
    for a, b in zip(plain.metrics, split.metrics, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5)
        assert b["reward/total/mean"] == pytest.approx(a["reward/total/mean"], abs=1e-9)
    assert split.model.training and not plain.model.training


def test_bf16_default_on_cpu_follows_the_cpu_and_the_model_size(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from harness.threads import cpu_has_bf16_matmul

    cfg = _saved_model_config(tmp_path, "float32")
    t = cfg.trainer.resolved()
    small, _ = load_policy(cfg, t, "cpu")  # hidden 64: casts would cost more than they save
    assert use_bf16(cfg, t, "cpu", small) is False
    wide = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=64,
            hidden_size=512,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=4,
        )
    )  # random-init, hidden 512
    assert use_bf16(cfg, t, "cpu", wide) is cpu_has_bf16_matmul()
    off = t.model_copy(update={"bf16": False})
    assert use_bf16(cfg, off, "cpu", wide) is False


def test_prepare_update_holds_no_graph_and_its_old_and_reference_log_probs_are_the_plain_ones():
    """What the loop computes before waiting for scores: per micro-batch, the policy's log-probs before the first
    step (mu > 1) and the reference model's, without grad: nothing of an autograd graph outlives the wait."""
    vocab = len(char_tokenizer())
    policy, ref = tiny_model(vocab, seed=0), tiny_model(vocab, seed=1)
    disable_dropout(policy)
    batch = random_rollout_batch(vocab, [3, 5, 2, 4], seed=3)
    prep = prepare_update(policy, batch, temperature=0.8, mu=2, micro_batch_size=2, ref_model=ref, packing="off")
    assert prep.old_logp is not None and prep.ref_logp is not None and len(prep.old_logp) == 2
    for k, rows in enumerate(prep.slices):
        for got, model in ((prep.old_logp[k], policy), (prep.ref_logp[k], ref)):
            assert not got.requires_grad and got.grad_fn is None
            p_ids, p_mask, c_ids = (t[rows] for t in (batch.prompt_ids, batch.prompt_mask, batch.completion_ids))
            want, _ = completion_logprobs(model, p_ids, p_mask, c_ids, 0.8)
            mask = batch.completion_mask[rows].bool()
            assert torch.allclose(got[mask[:, : got.shape[1]]], want[mask], atol=1e-5)
    assert all(p.grad is None for p in policy.parameters())
    one = prepare_update(policy, batch, temperature=0.8, mu=1, micro_batch_size=2)  # the first pass's, detached
    assert one.old_logp is None and one.ref_logp is None
