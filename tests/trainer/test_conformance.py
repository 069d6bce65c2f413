"""The conformance matrix: the trainer's log-probs and gradients equal each architecture's own forward.

For every architecture family in ``_conformance.ARCHS`` (tiny random-init models from configs, weights scaled so
that positions and masks move log-probs by nats: see the controls), in every mode the trainer runs (plain rows with
left-padded prompts, shared-prompt packing, gradient checkpointing, LoRA, bf16 autocast), against
``model(input_ids).logits`` of each row on its own, log-softmaxed in float32:

- float32: max |d log-prob| <= 1e-4 (measured <= 1.0e-5, MiniCPM3; <= 1e-5 everywhere), max relative gradient
  difference <= 1e-3 (measured <= 1.4e-4, MiniCPM3 with LoRA; <= 2e-5 elsewhere);
- bf16 autocast: plain and packed within twice the model's own bf16 forward's distance to float32, plus 1e-3;
- controls: all-zero positions or a corrupted mask move the log-probs by >= 0.25 nats (measured at least 0.41,
  Falcon's mask), so a layout or head that ignored them could not pass.

Whether a micro-batch packs is asserted too: every family packs these rows (packed length 21) except where a window
is shorter (Mistral with ``sliding_window`` 8, GPT-Neo with ``window_size`` 16) or the attention takes no ready 4D
mask (Bloom's ALiBi is built from a 2D mask; the packed pass fails and the check turns packing off).
Every run draws the same numbers (seeded init, seeded LoRA). Run ``python tests/trainer/_conformance.py`` to print
the matrix (docs/ARCHITECTURES.md). The FSDP case runs on two gloo ranks (slow, about 10-25 s).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from _conformance import ARCHS, BY_NAME, NO_POSITION_IDS, build, controls, grad_rel, measure, reference, rows

from trainer.head import PolicyForward, UnsupportedModelError, probe_logit_map
from trainer.update import completion_logprobs

GRAD_TOL = 1e-3
CONTROL_MIN = 0.25
#: families that run these rows plain: a window shorter than the packed length, or no ready 4D mask
PLAIN = {"mistral_window8", "gpt_neo_window16", "bloom"}


@pytest.mark.parametrize("arch", ARCHS, ids=[a.name for a in ARCHS])
def test_trainer_logprobs_equal_the_model_s_own_forward_in_every_mode(arch):
    cells = measure(arch)
    for mode, cell in cells.items():
        assert cell.dlogp <= cell.tol, f"{arch.name} {mode}: |d log-prob| {cell.dlogp:.3g} > {cell.tol:.3g}"
        assert cell.dgrad is None or cell.dgrad <= GRAD_TOL, f"{arch.name} {mode}: relative d grad {cell.dgrad:.3g}"
    for mode in ("packed", "checkpointed", "lora"):
        assert cells[mode].packed == (arch.name not in PLAIN), f"{arch.name} {mode}: packed={cells[mode].packed}"
    assert not cells["plain"].packed
    moved = controls(build(arch), rows())
    for name, d in moved.items():
        if arch.name in NO_POSITION_IDS and "positions" in name:
            continue
        assert d >= CONTROL_MIN, f"{arch.name}: the {name} control moved log-probs by only {d:.3g}"
    assert len(moved) == (2 if arch.name == "bloom" else 4)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("llama", dict(input_scale=1.0, scale=1.0, softcap=None)),
        ("granite", dict(input_scale=1.0, scale=2.0, softcap=None)),  # logits / logits_scaling (0.5)
        ("cohere", dict(input_scale=1.0, scale=2.0, softcap=None)),  # logits * logit_scale
        ("gemma2", dict(input_scale=1.0, scale=1.0, softcap=3.0)),  # final_logit_softcapping
        ("nanochat", dict(input_scale=1.0, scale=1.0, softcap=15.0)),  # its fixed default cap
        ("minicpm3", dict(input_scale=0.25, scale=1.0, softcap=None)),  # hidden / (hidden_size / dim_model_base)
    ],
)
def test_the_probe_finds_what_each_forward_does_around_its_head(name, want):
    found = probe_logit_map(build(BY_NAME[name]))
    assert found.input_scale == pytest.approx(want["input_scale"], rel=1e-6)
    assert found.scale == pytest.approx(want["scale"], rel=1e-6)
    if want["softcap"] is None:
        assert found.softcap is None
    else:
        assert found.softcap == pytest.approx(want["softcap"], rel=1e-4)


def test_a_real_granite_scale_is_found_too():
    """Granite's released configs divide by 8 or 16: the head's logits shrink; the probe does not care."""
    from _conformance import Arch

    model = build(Arch("granite16", "granite", {"logits_scaling": 16.0}))
    assert probe_logit_map(model).scale == pytest.approx(1 / 16, rel=1e-6)
    r = rows()
    got, _ = completion_logprobs(model, r.p_ids, r.p_mask, r.c_ids, 0.7, lengths=r.c_mask.sum(1), packing="on")
    with torch.no_grad():
        want_logits = [
            model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1] / 0.7
            for p, c in zip(r.prompts, r.completions, strict=True)
        ]
    for i, (lg, c) in enumerate(zip(want_logits, r.completions, strict=True)):
        want = torch.log_softmax(lg.float(), -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        assert (got[i, : len(c)] - want).abs().max() <= 1e-4


def _wrapped(transform):
    """A Llama whose forward post-processes its logits (or hidden states) in a way no scale or cap reproduces."""
    model = build(BY_NAME["llama"])
    forward = model.forward

    def patched(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.logits = transform(out.logits)
        return out

    model.forward = patched
    return model


@pytest.mark.parametrize(
    ("transform", "what"),
    [
        (lambda x: x + torch.linspace(-3.0, 3.0, x.shape[-1]), "logits"),  # a per-token bias after the head
        (lambda x: x.relu(), "logits"),  # not a map the head can be told about
        (lambda x: x.flip(-1), "logits"),  # a permuted vocabulary
    ],
)
def test_a_forward_we_cannot_reproduce_is_refused_naming_the_model_type(transform, what):
    with pytest.raises(UnsupportedModelError, match=rf"llama \(LlamaForCausalLM\): .*output head's {what}"):
        probe_logit_map(_wrapped(transform))


def test_a_transform_of_the_hidden_states_before_the_head_is_refused():
    model = build(BY_NAME["llama"])
    head = model.get_output_embeddings()
    head.register_forward_pre_hook(lambda _m, args: (torch.tanh(args[0]),))
    want = r"llama \(LlamaForCausalLM\): .*hidden states .* more than a scale"
    with pytest.raises(UnsupportedModelError, match=want):
        probe_logit_map(model)


def test_probing_restores_train_mode_and_changes_no_weight():
    model = build(BY_NAME["gemma2"]).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    probe_logit_map(model)
    assert model.training
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def _gpt_neo(window: int, *, declared: bool):
    """GPT-Neo with a local layer of ``window``; ``declared=False`` hides the window from the config after the
    model is built (the layer keeps it), as an architecture whose windows we do not know would."""
    from _conformance import Arch

    model = build(
        Arch("gpt_neo", "gpt_neo", {"attention_types": [[["global", "local"], 1]], "window_size": window}, "eager")
    )
    if not declared:
        model.config.attention_layers = ["global", "global"]
    return model


@pytest.mark.parametrize("declared", [True, False])
def test_gpt_neo_packs_within_its_window_and_runs_plain_beyond_it(declared, caplog):
    """Micro-batch 1 packs to 12 positions (within the local window of 16), micro-batch 2 to 21. A declared window
    sends the second one plain without a check; an undeclared one is caught by the check its new length calls
    for. Both match the model's own forward to 1e-4; the first never re-checks."""
    model = _gpt_neo(16, declared=declared)
    fwd = PolicyForward.of(model)
    short, long = rows(prompt_lens=(4, 3), comp_lens=(3, 2, 3, 4, 1, 2)), rows()
    for r in (short, long):
        got, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing="on")
        with torch.no_grad():
            want = reference(model, r)
        assert (got - want).detach()[r.c_mask.bool()].abs().max() <= 1e-4
    assert fwd.packing.verdict("float32", 12) is True
    assert fwd.packing.verdict("float32", 21) is (False if not declared else None)
    assert ("packing is off for GPTNeoForCausalLM from 21 positions" in caplog.text) == (not declared)


def test_a_model_wrong_in_its_first_check_is_not_tried_at_other_lengths(monkeypatch, caplog):
    """An architecture that ignores the packed positions (simulated: a layout whose positions are all 0) fails its
    first check; it then runs plain at every length without further checks."""
    from trainer import packing

    model = build(BY_NAME["qwen2"])
    fwd = PolicyForward.of(model)
    real_layout = packing.layout
    monkeypatch.setattr(
        packing,
        "layout",
        lambda *a: packing.Packed(
            **{**real_layout(*a).__dict__, "position_ids": torch.zeros_like(real_layout(*a).position_ids)}
        ),
    )
    r = rows()
    got, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing="on")
    with torch.no_grad():
        assert (got - reference(model, r)).detach()[r.c_mask.bool()].abs().max() <= 1e-4
    assert "packing is off for Qwen2ForCausalLM from 21 positions" in caplog.text
    assert fwd.packing.verdict("float32", 5) is False and fwd.packing.verdict("float32", 500) is False


def test_pack_state_checks_each_new_length_once():
    from trainer.packing import PackState

    s = PackState()
    assert s.verdict("float32", 10) is None
    s.record("float32", 10, True)
    assert s.verdict("float32", 10) is True and s.verdict("float32", 7) is True
    assert s.verdict("float32", 11) is None and s.verdict("bfloat16", 10) is None  # modes are checked apart
    s.record("float32", 30, False)
    assert s.verdict("float32", 30) is False and s.verdict("float32", 40) is False
    assert s.verdict("float32", 20) is None  # between what matched and what failed: checked when it occurs
    s.record("float32", 20, True)
    assert s.verdict("float32", 20) is True and s.failed["float32"] == 30
    assert math.isinf(PackState().failed.get("x", math.inf))


def test_bf16_packing_tolerance_follows_the_plain_pass_s_own_bf16_error():
    """Under bf16 autocast the packed pass is as far from float32 as the plain bf16 pass (0.02-0.06 nats on these
    tiny models), far above a fixed 1e-3; it packs, and both stay within twice the model's own bf16 distance."""
    model = build(BY_NAME["llama"])
    fwd = PolicyForward.of(model)
    r = rows()
    with torch.no_grad():
        want = reference(model, r)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            own = reference(model, r)
            got, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing="auto")
    real = r.c_mask.bool()
    own_err = float((own - want)[real].abs().max())
    assert own_err > 1e-2  # bf16 is coarse here: a fixed float32 tolerance would refuse packing
    assert fwd.packing.checked.get("bfloat16") == 21
    assert float((got - want)[real].abs().max()) <= 2 * own_err + 1e-3


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fsdp_sharded_scaled_head_equals_the_model_s_own_forward(tmp_path):
    """Granite (scaled logits) probed, then sharded on two gloo ranks: plain and packed log-probs and the whole
    gradients equal the unsharded model's own forward."""
    from _conformance import fsdp_rank
    from _dist_helpers import run_ranks

    run_ranks(2, fsdp_rank, str(tmp_path / "fsdp.pt"), "granite", timeout=240)
    got = torch.load(tmp_path / "fsdp.pt")
    model = build(BY_NAME["granite"])
    r = rows()
    want = reference(model, r)
    (want * r.weights).sum().backward()
    for mode in ("plain", "packed"):
        res = got[mode]
        assert res["packed"] == (mode == "packed")
        assert (res["logp"] - want.detach())[r.c_mask.bool()].abs().max() <= 1e-4, mode
        twin = copy.deepcopy(model)
        for n, p in twin.named_parameters():
            p.grad = res["grads"][n]
        assert grad_rel(twin, model) <= GRAD_TOL, mode


def test_training_refuses_such_a_model_at_load_before_any_step(tmp_path, monkeypatch):
    """``train()`` on the toy task, with the policy's forward adding a per-token bias to its logits: the run stops
    at load with the model type and the reason, and no step runs."""
    from _trainer_helpers import toy_config

    import trainer.context as context
    import trainer.loop as loop
    from trainer import train

    real = context.load_policy

    def biased(*args, **kwargs):
        model, tok = real(*args, **kwargs)
        forward = model.forward

        def patched(*a, **kw):
            out = forward(*a, **kw)
            out.logits = out.logits + torch.linspace(-2.0, 2.0, out.logits.shape[-1])
            return out

        model.forward = patched
        return model, tok

    monkeypatch.setattr(context, "load_policy", biased)
    steps = []
    monkeypatch.setattr(loop, "grpo_step", lambda *a: steps.append(1))
    with pytest.raises(UnsupportedModelError, match=r"^qwen2 \(Qwen2ForCausalLM\): the forward transforms"):
        train(toy_config(tmp_path, max_steps=1), progress=False)
    assert not steps
