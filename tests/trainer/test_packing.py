"""Shared-prompt packing (trainer.packing): the packed layout on hand-made rows, the cost model, and equality with
the plain forward pass (log-probs, entropies, gradients and one update) on random-init tiny models, with SDPA and
eager attention, with and without gradient checkpointing."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from _batches import batch_of, rollout_batch

from trainer import packing
from trainer.head import PolicyForward
from trainer.loop import policy_update
from trainer.losses import LossConfig
from trainer.setup import disable_dropout, enable_checkpointing
from trainer.toy import tiny_model
from trainer.update import UpdateInputs, completion_logprobs

VOCAB = 301


def _rows(prompts: list[list[int]], completions: list[list[int]]) -> tuple[torch.Tensor, ...]:
    b = rollout_batch(prompts, completions)
    return b.prompt_ids, b.prompt_mask, b.completion_ids, b.completion_mask


def test_segments_are_runs_of_consecutive_rows_with_equal_prompt_tokens():
    p_ids, p_mask, _, _ = _rows([[5, 6], [5, 6], [7], [5, 6], [5, 6, 1]], [[1]] * 5)
    assert packing.segments(p_ids, p_mask) == [(0, 2), (2, 3), (3, 4), (4, 5)]


def test_layout_of_two_groups():
    # rows 0 and 1 share prompt [5, 6, 7]; row 2 has prompt [8, 9] (left-padded by one)
    p_ids, p_mask, c_ids, c_mask = _rows([[5, 6, 7], [5, 6, 7], [8, 9]], [[11, 12], [13], [14, 15]])
    pk = packing.layout(p_ids, p_mask, c_ids, c_mask.sum(1))
    assert pk.input_ids.tolist() == [[5, 6, 7, 11, 12, 13], [8, 9, 14, 15, 0, 0]]
    assert pk.position_ids.tolist() == [[0, 1, 2, 3, 4, 3], [0, 1, 2, 3, 0, 0]]
    assert pk.targets.tolist() == [11, 12, 13, 14, 15]
    assert pk.rows.tolist() == [0, 0, 1, 2, 2]
    assert pk.cols.tolist() == [0, 1, 0, 0, 1]
    # 11 and 13 are predicted by the prompt's last token (7, flat index 2); 12 by 11; 14 by 9; 15 by 14
    assert pk.predict.tolist() == [2, 3, 2, 6 + 1, 6 + 2]
    a = pk.allowed[:, 0]
    assert a.shape == (2, 6, 6)
    assert a[0, 5].tolist() == [True, True, True, False, False, True]  # 13 sees the prompt and itself, not 11/12
    assert a[0, 4].tolist() == [True, True, True, True, True, False]  # 12 sees the prompt, 11 and itself
    assert a[0, :3, :3].tolist() == torch.ones(3, 3).tril().bool().tolist()  # the prompt is plainly causal
    assert a[1, 4].tolist() == [False, False, False, False, True, False]  # padding sees only itself
    assert not a[1, :4, 4:].any()  # and nothing sees padding


def test_an_empty_prompt_cannot_be_packed():
    p_ids, p_mask, c_ids, c_mask = _rows([[0], [0]], [[3], [4]])
    p_mask[:] = 0
    with pytest.raises(ValueError, match="row 0: an empty prompt"):
        packing.layout(p_ids, p_mask, c_ids, c_mask.sum(1))


def test_cost_model_packs_long_shared_prompts_and_keeps_long_completions_plain():
    w = packing.cost_weights(
        SimpleNamespace(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536)
    )
    group = [(0, 8), (8, 16)]
    assert packing.pays([80] * 16, [24] * 16, group, w)  # the word-problem demo's shape
    assert not packing.pays([20] * 16, [1024] * 16, group, w)  # long completions: quadratic attention wins
    assert not packing.pays([80] * 4, [24] * 4, [(0, 1), (1, 2), (2, 3), (3, 4)], w)  # nothing shared


def test_supported_attention_implementations_and_windows():
    def model(impl):
        return SimpleNamespace(config=SimpleNamespace(_attn_implementation=impl))

    assert packing.supported(model("sdpa")) and packing.supported(model("eager"))
    assert not packing.supported(model("flash_attention_2")) and not packing.supported(model("flex_attention"))
    # windows bound the packed length (see packing.choose); a window that is switched off or unused does not
    assert packing.windows(SimpleNamespace(sliding_window=4096)) == [4096]
    assert packing.windows(SimpleNamespace(sliding_window=4096, use_sliding_window=False)) == []  # Qwen2's switch
    kinds = ["sliding_attention", "full_attention"]
    assert packing.windows(SimpleNamespace(sliding_window=512, layer_types=kinds)) == [512]
    assert packing.windows(SimpleNamespace(sliding_window=512, layer_types=["full_attention"] * 2)) == []
    assert packing.windows(SimpleNamespace(window_size=256, attention_layers=["global", "local"])) == [256]  # GPT-Neo
    assert packing.windows(SimpleNamespace(window_size=256, attention_layers=["global", "global"])) == []
    assert packing.windows(SimpleNamespace(attention_chunk_size=8192)) == [8192]  # Llama4
    assert packing.windows(SimpleNamespace(hidden_size=64)) == []


def _grouped(seed: int = 5) -> tuple[torch.Tensor, ...]:
    """Two prompts (7 and 4 tokens) x 3 completions of ragged lengths, as a rollout lays them out."""
    g = torch.Generator().manual_seed(seed)
    pa, pb = torch.randint(2, VOCAB, (7,), generator=g).tolist(), torch.randint(2, VOCAB, (4,), generator=g).tolist()
    comps = [torch.randint(2, VOCAB, (n,), generator=g).tolist() for n in (6, 3, 5, 1, 6, 4)]
    return _rows([pa] * 3 + [pb] * 3, comps)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_packed_logprobs_entropies_and_gradients_equal_the_plain_pass(impl, checkpointing):
    plain = tiny_model(VOCAB, seed=1)
    plain.config._attn_implementation = impl
    if checkpointing:
        disable_dropout(plain)
        enable_checkpointing(plain)
        plain.train()
    packed = copy.deepcopy(plain)
    p_ids, p_mask, c_ids, c_mask = _grouped()
    a, ea = completion_logprobs(
        packed, p_ids, p_mask, c_ids, 0.7, with_entropy=True, chunk=4, lengths=c_mask.sum(1), packing="on"
    )
    b, eb = completion_logprobs(plain, p_ids, p_mask, c_ids, 0.7, with_entropy=True, chunk=4, packing="off")
    real = c_mask.bool()
    assert a.shape == b.shape == c_ids.shape
    assert (a - b)[real].abs().max() <= 1e-5 and (ea - eb)[real].abs().max() <= 1e-5
    assert not a[~real].any()  # past each completion's end: 0
    assert not ea.requires_grad
    w = torch.linspace(-1.0, 1.0, a.numel()).reshape(a.shape) * c_mask
    (a * w).sum().backward()
    (b * w).sum().backward()
    for (name, p), (_, q) in zip(packed.named_parameters(), plain.named_parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), name


def test_auto_packing_follows_the_cost_model(monkeypatch):
    model = tiny_model(VOCAB, seed=1)
    p_ids, p_mask, c_ids, c_mask = _grouped()
    calls = []
    real_layout = packing.layout
    monkeypatch.setattr(packing, "layout", lambda *a: calls.append(1) or real_layout(*a))
    completion_logprobs(model, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="auto")
    assert calls  # 7- and 4-token prompts shared 3 times, completions of up to 6 tokens: packing pays
    calls.clear()
    completion_logprobs(model, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="off")
    assert not calls
    model.config._attn_implementation = "flex_attention"  # takes no ready 4D mask: never packed
    assert not packing.supported(model)


def test_a_packed_update_takes_the_plain_update_s_step():
    base = tiny_model(VOCAB, seed=2)
    p_ids, p_mask, c_ids, c_mask = _grouped(seed=9)
    batch = batch_of(p_ids, p_mask, c_ids, c_mask)
    inputs = UpdateInputs(torch.tensor([1.0, -0.5, -0.5, 0.7, 0.1, -0.8]), c_mask.float())
    stats, models = [], []
    for pack in ("on", "off"):
        m = copy.deepcopy(base)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
        stats.append(
            policy_update(
                m,
                opt,
                sched,
                batch,
                inputs,
                LossConfig("grpo", max_completion_length=6),
                temperature=0.8,
                micro_batch_size=3,
                packing=pack,
            )
        )
        models.append(m)
    assert stats[0]["loss"] == pytest.approx(stats[1]["loss"], abs=1e-6)
    assert stats[0]["entropy"] == pytest.approx(stats[1]["entropy"], abs=1e-5)
    for (name, p), (_, q) in zip(models[0].named_parameters(), models[1].named_parameters(), strict=True):
        assert not torch.equal(p, base.get_parameter(name)), name  # the step moved every weight
        assert torch.allclose(p, q, atol=1e-6), name


def test_a_model_whose_packed_pass_differs_is_never_packed(monkeypatch, caplog):
    """The first packed pass is checked against the plain one; an architecture that ignores the packed positions
    (simulated here by a layout whose positions are all 0) fails it and runs plain from then on."""
    model = tiny_model(VOCAB, seed=1)
    fwd = PolicyForward.of(model)
    p_ids, p_mask, c_ids, c_mask = _grouped()
    real_layout = packing.layout

    def wrong_positions(*a):
        pk = real_layout(*a)
        return packing.Packed(**{**pk.__dict__, "position_ids": torch.zeros_like(pk.position_ids)})

    monkeypatch.setattr(packing, "layout", wrong_positions)
    got, _ = completion_logprobs(fwd, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="auto")
    want, _ = completion_logprobs(fwd, p_ids, p_mask, c_ids, 1.0, packing="off")
    assert torch.equal(got, want)
    assert "shared-prompt packing is off for Qwen2ForCausalLM" in caplog.text
    calls = []
    monkeypatch.setattr(packing, "layout", lambda *a: calls.append(1) or real_layout(*a))
    completion_logprobs(fwd, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="auto")
    assert not calls  # the verdict is kept (in the PolicyForward, not on the model): no packed pass again
    assert not [k for k in model.__dict__ if "pack" in k]


def test_a_model_that_passes_the_check_keeps_packing(monkeypatch):
    model = tiny_model(VOCAB, seed=1)
    fwd = PolicyForward.of(model)
    p_ids, p_mask, c_ids, c_mask = _grouped()
    completion_logprobs(fwd, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="auto")
    assert fwd.packing.checked == {"float32": 7 + 6 + 3 + 5}
    calls = []
    real_layout = packing.layout
    monkeypatch.setattr(packing, "layout", lambda *a: calls.append(1) or real_layout(*a))
    completion_logprobs(fwd, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="auto")
    assert len(calls) == 1  # packed, with no second check (the packed length is within the checked range)


def test_packed_lora_gradients_equal_the_plain_pass():
    from peft import LoraConfig, get_peft_model

    base = tiny_model(VOCAB, seed=3)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    packed = get_peft_model(base, cfg)
    for n, p in packed.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.05, generator=torch.Generator().manual_seed(1))  # B = 0 would hide a bug
    plain = copy.deepcopy(packed)
    assert packing.supported(packed)
    p_ids, p_mask, c_ids, c_mask = _grouped(seed=11)
    a, _ = completion_logprobs(packed, p_ids, p_mask, c_ids, 1.0, lengths=c_mask.sum(1), packing="on")
    b, _ = completion_logprobs(plain, p_ids, p_mask, c_ids, 1.0, packing="off")
    real = c_mask.bool()
    assert (a - b)[real].abs().max() <= 1e-5
    (a * c_mask).sum().backward()
    (b * c_mask).sum().backward()
    trained = [
        (n, p, q)
        for (n, p), (_, q) in zip(packed.named_parameters(), plain.named_parameters(), strict=True)
        if p.requires_grad
    ]
    assert trained and all("lora_" in n for n, _, _ in trained)
    for name, p, q in trained:
        assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), name


def test_a_training_step_with_packing_takes_the_plain_step(tmp_path, monkeypatch):
    """The loop end to end on the toy task (random-init tiny model): one step with the default packing and one
    with ``pack_prompts: false`` sample the same completions and take the same step."""
    from _trainer_helpers import toy_config

    from trainer import train

    packed_passes: dict = {}
    real_layout = packing.layout
    res = {}
    for pack in (None, False):
        calls: list = []
        monkeypatch.setattr(packing, "layout", lambda *a, c=calls: c.append(1) or real_layout(*a))
        res[pack] = train(
            toy_config(tmp_path / str(pack), max_steps=1, save_steps=1, pack_prompts=pack), progress=False
        )
        packed_passes[pack] = len(calls)
    assert packed_passes[None] >= 1 and packed_passes[False] == 0  # the default packs the toy task's groups
    a, b = res[None].metrics[0], res[False].metrics[0]
    assert a["reward/total/mean"] == b["reward/total/mean"]  # the same rollout: packing only changes the update
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert a["entropy"] == pytest.approx(b["entropy"], abs=1e-5)
