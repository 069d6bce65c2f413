"""Policy losses, k3 KL and entropy against hand-computed values and gradients from the paper formulas."""

import math

import pytest
import torch

from trainer.losses import LossConfig, entropy_from_logits, kl_k3, policy_loss


def _inputs():
    # two sequences: lengths 2 and 3 (T = 3), advantages +1 and -2
    logp = torch.tensor([[-1.0, -0.5, 0.0], [-2.0, -1.0, -0.3]], requires_grad=True)
    old = torch.tensor([[-1.1, -0.2, 0.0], [-1.5, -1.0, -0.6]])
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    return logp, old, adv, mask


def _clipped_token_loss(logp, old, adv, lo, hi):
    r = torch.exp(logp - old)
    a = adv[:, None]
    return -torch.minimum(r * a, torch.clamp(r, 1 - lo, 1 + hi) * a)


def test_grpo_is_sequence_mean_then_batch_mean():
    logp, old, adv, mask = _inputs()
    out = policy_loss(logp, old, adv, mask, LossConfig("grpo", 0.2, 0.2))
    tok = _clipped_token_loss(logp.detach(), old, adv, 0.2, 0.2)
    want = ((tok[0, :2].mean()) + tok[1].mean()) / 2
    assert out.loss.item() == pytest.approx(want.item(), rel=1e-6)


def test_bnpo_dapo_dr_grpo_normalizers():
    logp, old, adv, mask = _inputs()
    tok = _clipped_token_loss(logp.detach(), old, adv, 0.2, 0.28)
    total = (tok * mask).sum().item()
    bnpo = policy_loss(logp, old, adv, mask, LossConfig("bnpo", 0.2, 0.28)).loss.item()
    dapo = policy_loss(logp, old, adv, mask, LossConfig("dapo", 0.2, 0.28)).loss.item()
    dr = policy_loss(logp, old, adv, mask, LossConfig("dr_grpo", 0.2, 0.28, max_completion_length=8)).loss.item()
    assert bnpo == pytest.approx(total / 5)
    assert dapo == pytest.approx(total / 5)
    assert dr == pytest.approx(total / (2 * 8))  # constant: sequences * max_completion_length, not lengths
    # dapo normalizes by the tokens of the whole step, given from outside
    assert policy_loss(logp, old, adv, mask, LossConfig("dapo", 0.2, 0.28), num_tokens=10).loss.item() == pytest.approx(
        total / 10
    )


def test_clip_higher_changes_which_tokens_are_clipped():
    # ratio e^0.25 = 1.284 with A > 0: clipped at eps_high = 0.2, not at 0.28
    logp = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-0.25]])
    adv, mask = torch.tensor([1.0]), torch.ones(1, 1)
    sym = policy_loss(logp, old, adv, mask, LossConfig("dapo", 0.2, 0.2))
    hi = policy_loss(logp, old, adv, mask, LossConfig("dapo", 0.2, 0.28))
    assert sym.loss.item() == pytest.approx(-1.2)
    assert hi.loss.item() == pytest.approx(-1.28)
    assert sym.clip_high_frac == 1.0 and hi.clip_high_frac == 1.0
    (g_sym,) = torch.autograd.grad(sym.loss, logp)
    assert g_sym.item() == 0.0  # the clipped branch carries no gradient
    ok = policy_loss(logp, torch.tensor([[-0.2]]), adv, mask, LossConfig("dapo", 0.2, 0.28))
    (g,) = torch.autograd.grad(ok.loss, logp)
    assert g.item() == pytest.approx(-math.exp(0.2))  # d/dlogp of -r*A with r = e^0.2
    assert ok.clip_high_frac == 0.0


def test_low_clip_counts_only_negative_advantages():
    logp = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    old = torch.tensor([[-0.5, -0.5]])  # ratio e^-0.5 = 0.61 < 0.8
    out_neg = policy_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 2), LossConfig("grpo"))
    out_pos = policy_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), LossConfig("grpo"))
    assert out_neg.clip_low_frac == 1.0 and out_pos.clip_low_frac == 0.0


def test_on_policy_gradient_is_minus_advantage_over_length():
    # at ratio 1 the grpo gradient w.r.t. each token log-prob is -A / |o_i| / B (DeepSeekMath eq. 3)
    logp, _, adv, mask = _inputs()
    out = policy_loss(logp, logp.detach(), adv, mask, LossConfig("grpo"))
    (g,) = torch.autograd.grad(out.loss, logp)
    want = torch.tensor([[-1 / 2 / 2, -1 / 2 / 2, 0.0], [2 / 3 / 2, 2 / 3 / 2, 2 / 3 / 2]])
    assert torch.allclose(g, want)


def test_gspo_uses_the_sequence_level_ratio():
    logp, old, adv, mask = _inputs()
    cfg = LossConfig("gspo", 3e-4, 4e-4)
    out = policy_loss(logp, old, adv, mask, cfg)
    s0 = math.exp(((-1.0 + 1.1) + (-0.5 + 0.2)) / 2)  # exp(-0.1) = 0.905: below 1 - 3e-4, A > 0: unclipped
    s1 = math.exp(((-2.0 + 1.5) + 0.0 + (-0.3 + 0.6)) / 3)  # exp(-0.0667), A < 0: clipped at 1 - 3e-4
    assert s1 < 1 - 3e-4  # the premise of ``want``: sequence 1's ratio is below the clip range
    want = (-(s0 * 1.0) + -((1 - 3e-4) * -2.0)) / 2
    assert out.loss.item() == pytest.approx(want, rel=1e-6)
    assert out.clip_low_frac == pytest.approx(0.5)
    (g,) = torch.autograd.grad(out.loss, logp)
    # sequence 0: d(-s0 A)/dlogp_t = -A s0 / |o_0| / B on each of its tokens; sequence 1 is clipped: 0
    assert g[0, :2].tolist() == pytest.approx([-s0 / 2 / 2] * 2, rel=1e-6)
    assert g[1].abs().sum().item() == 0.0


def test_cispo_is_capped_stop_gradient_weight_times_logp():
    logp = torch.tensor([[0.0, -1.0]], requires_grad=True)
    old = torch.tensor([[-2.0, -1.0]])  # ratios e^2 = 7.39 (capped at 5) and 1
    adv, mask = torch.tensor([2.0]), torch.ones(1, 2)
    out = policy_loss(logp, old, adv, mask, LossConfig("cispo", cispo_cap=5.0))
    assert out.loss.item() == pytest.approx(-(5.0 * 2 * 0.0 + 1.0 * 2 * -1.0) / 2)
    (g,) = torch.autograd.grad(out.loss, logp)
    assert g[0].tolist() == pytest.approx([-5.0 * 2 / 2, -1.0 * 2 / 2])  # gradient flows through log pi only
    assert out.clip_high_frac == pytest.approx(0.5)


def test_kl_k3_is_nonnegative_and_exact():
    logp = torch.tensor([-1.0, -2.0, -0.5])
    ref = torch.tensor([-1.0, -1.0, -1.5])
    k3 = kl_k3(logp, ref)
    d = ref - logp
    assert k3.tolist() == pytest.approx((torch.exp(d) - d - 1).tolist())
    assert k3[0].item() == 0.0 and (k3 >= 0).all()


def test_beta_adds_kl_per_token_and_reports_it():
    logp, old, adv, mask = _inputs()
    ref = logp.detach() - 0.1
    base = policy_loss(logp, old, adv, mask, LossConfig("dapo", beta=0.0), ref_logp=ref)
    with_kl = policy_loss(logp, old, adv, mask, LossConfig("dapo", beta=0.5), ref_logp=ref)
    k = math.exp(0.1 * -1) - (-0.1) - 1
    assert with_kl.loss.item() - base.loss.item() == pytest.approx(0.5 * k, rel=1e-5)
    assert with_kl.kl == pytest.approx(k, rel=1e-5)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(logp, old, adv, mask, LossConfig("grpo", beta=0.1))


@pytest.mark.parametrize("loss", ["grpo", "bnpo", "dr_grpo", "dapo", "gspo", "cispo"])
def test_micro_batches_sum_to_the_full_batch_gradient(loss):
    torch.manual_seed(0)
    logp = (torch.randn(4, 5) * 0.3 - 1).requires_grad_()
    old = logp.detach() + torch.randn(4, 5) * 0.05
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.float)
    cfg = LossConfig(loss, 0.2, 0.28, max_completion_length=5)
    (full,) = torch.autograd.grad(policy_loss(logp, old, adv, mask, cfg).loss, logp)
    n_tok = int(mask.sum())
    parts = [
        policy_loss(logp[s], old[s], adv[s], mask[s], cfg, num_sequences=4, num_tokens=n_tok).loss
        for s in (slice(0, 2), slice(2, 4))
    ]
    (acc,) = torch.autograd.grad(sum(parts), logp)
    if loss == "bnpo":  # normalized per micro-batch by definition: equal only when micro-batches hold equal tokens
        assert not torch.allclose(full, acc)
    else:
        assert torch.allclose(full, acc, atol=1e-7)


def test_entropy_of_uniform_and_peaked_distributions():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])
    assert entropy_from_logits(logits).tolist() == pytest.approx([math.log(4), 0.0], abs=1e-6)


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="shape mismatch"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3), LossConfig())
