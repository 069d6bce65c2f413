"""Per-token policy losses of the GRPO family, their aggregation, k3 KL and entropy, as pure tensor functions.

Shapes: ``logp``, ``old_logp``, ``ref_logp`` and ``mask`` are (B, T) over completion tokens; ``advantages`` is
(B,). ``mask`` is 1 on tokens that carry loss (real completion tokens of trainable, non-filtered samples).

Loss types (r = pi/pi_old per token, A = advantage, clip = clip(r, 1 - eps_low, 1 + eps_high)):

``grpo``    DeepSeekMath (2402.03300) eq. 3: -min(r A, clip A) per token, averaged over each sequence's tokens,
            then over sequences.
``bnpo``    the same token loss averaged over the tokens of each micro-batch (batch-normalized).
``dr_grpo`` Dr. GRPO (2503.20783): the same token loss summed and divided by a constant,
            num_sequences * max_completion_length (pair it with scale_rewards="none").
``dapo``    DAPO (2503.14476) eq. 8-10: token-level average over every token of the generation batch, with
            clip-higher (eps_high > eps_low).
``gspo``    GSPO (2507.18071) eq. 5-7: sequence ratio s = exp(mean_t(log r)), loss -min(s A, clip(s) A) per
            sequence, averaged over sequences.
``cispo``   CISPO (MiniMax-M1, 2506.13585) eq. 4: -sg(min(r, cap)) A log pi per token, token-level average over the
            batch; the cap is an absolute bound (``cispo_cap``), not 1 + eps.

Off-policy correction: when the completions were sampled by another engine (vLLM, in lower precision), the
per-token loss is multiplied by a truncated importance-sampling weight ``min(pi_old / pi_sampler, cap)``
(Yao et al., "Your efficient RL framework secretly brings you off-policy RL training", 2025; TRL's
``vllm_importance_sampling_correction``), computed by :func:`tis_weights` from the trainer's log-probs at the
sampling weights and the sampler's own log-probs; for gspo the weight is the capped sequence ratio
``exp(mean_t(old - sampler))``.

KL: the k3 estimator exp(ref - logp) - (ref - logp) - 1 per token, added as ``beta * kl`` to each token loss
(to the sequence loss for gspo). The normalizers are passed in (``num_sequences``, ``num_tokens``) so that a
step split into micro-batches, or over ranks whose gradients are summed, gives the full-batch loss exactly.

This module does not compute log-probs from a model; :mod:`trainer.logprobs` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = [
    "LossConfig",
    "LossOutput",
    "policy_loss",
    "kl_k3",
    "entropy_from_logits",
    "masked_mean",
    "tis_weights",
    "TISStats",
]

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo", "gspo", "cispo"]


@dataclass(frozen=True)
class LossConfig:
    """The knobs of :func:`policy_loss`.

    Attributes:
        loss_type: one of grpo, bnpo, dr_grpo, dapo, gspo, cispo.
        epsilon_low: lower clip range, the ratio is clipped at 1 - epsilon_low.
        epsilon_high: upper clip range, the ratio is clipped at 1 + epsilon_high.
        cispo_cap: cispo only, the absolute upper bound of the IS weight.
        beta: k3 KL coefficient (0: no KL term).
        max_completion_length: dr_grpo's constant normalizer per sequence.
    """

    loss_type: LossType = "grpo"
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    cispo_cap: float = 5.0
    beta: float = 0.0
    max_completion_length: int = 1

    def __post_init__(self) -> None:
        if self.loss_type not in ("grpo", "bnpo", "dr_grpo", "dapo", "gspo", "cispo"):
            raise ValueError(f"unknown loss_type {self.loss_type!r}")


@dataclass(frozen=True)
class LossOutput:
    """What :func:`policy_loss` returns: the scalar to backpropagate and detached statistics.

    Attributes:
        loss: scalar with grad.
        clip_low_frac: fraction of loss tokens (sequences for gspo) clipped at the low side with A < 0.
        clip_high_frac: fraction clipped at the high side with A > 0 (cispo: IS weight above the cap).
        kl: mean k3 KL over loss tokens (0 when beta is 0 and no reference was given).
        tokens: number of loss tokens in this call.
    """

    loss: torch.Tensor
    clip_low_frac: float
    clip_high_frac: float
    kl: float
    tokens: int


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1; 0 where the mask is empty (never NaN)."""
    m = mask.to(x.dtype)
    if dim is None:
        return (x * m).sum() / m.sum().clamp(min=1.0)
    return (x * m).sum(dim) / m.sum(dim).clamp(min=1.0)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1, always >= 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """(..., V) logits -> (...) entropy in nats of the softmax distribution."""
    logz = torch.logsumexp(logits, dim=-1, keepdim=True)
    logq = logits - logz
    return -(logq.exp() * logq).sum(dim=-1)


@dataclass(frozen=True)
class TISStats:
    """The untruncated importance ratios pi_old / pi_sampler over the loss tokens (sequences for gspo)."""

    mean: float
    max: float
    capped_frac: float


def tis_weights(
    old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, cap: float, *, sequence: bool = False
) -> tuple[torch.Tensor, TISStats]:
    """Truncated importance-sampling weights ``min(exp(old - sampler), cap)``, without gradient.

    Args:
        old_logp: (B, T) the trainer's log-probs of the sampled tokens under the weights that sampled them.
        sampler_logp: (B, T) the sampling engine's log-probs of the same tokens.
        mask: (B, T) 1 on loss tokens (the statistics cover these only).
        cap: upper bound of the weight.
        sequence: one weight per sequence, ``min(exp(mean_t(old - sampler)), cap)``, shaped (B,) (gspo).

    Returns:
        (weights (B, T) or (B,), statistics of the untruncated ratios).
    """
    d = (old_logp - sampler_logp).detach().float()
    if sequence:
        ratio = torch.exp(masked_mean(d, mask, dim=1))  # (B,)
        has = mask.sum(1) > 0
        r = ratio[has]
    else:
        ratio = torch.exp(d)
        r = ratio[mask.bool()]
    stats = TISStats(
        float(r.mean()) if r.numel() else 1.0,
        float(r.max()) if r.numel() else 1.0,
        float((r > cap).float().mean()) if r.numel() else 0.0,
    )
    return torch.clamp(ratio, max=cap), stats


def _clip_stats(
    ratio: torch.Tensor, adv: torch.Tensor, lo: float, hi: float, mask: torch.Tensor
) -> tuple[float, float]:
    low = ((ratio < 1.0 - lo) & (adv < 0)).to(ratio.dtype)
    high = ((ratio > 1.0 + hi) & (adv > 0)).to(ratio.dtype)
    return float(masked_mean(low, mask)), float(masked_mean(high, mask))


def _aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, cfg: LossConfig, num_sequences: int, num_tokens: int
) -> torch.Tensor:
    m = mask.to(per_token.dtype)
    total = (per_token * m).sum()
    if cfg.loss_type == "grpo":
        return masked_mean(per_token, mask, dim=1).sum() / num_sequences
    if cfg.loss_type == "bnpo":  # normalized per micro-batch, weighted by the micro-batch's share of sequences
        return total / m.sum().clamp(min=1.0) * (mask.shape[0] / num_sequences)
    if cfg.loss_type == "dr_grpo":
        return total / (num_sequences * cfg.max_completion_length)
    return total / max(num_tokens, 1)  # dapo, cispo


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: LossConfig,
    *,
    ref_logp: torch.Tensor | None = None,
    num_sequences: int | None = None,
    num_tokens: int | None = None,
    is_weight: torch.Tensor | None = None,
) -> LossOutput:
    """The loss of one (micro-)batch.

    Args:
        logp: (B, T) log-probs of the sampled tokens under the current policy (with grad).
        old_logp: (B, T) the same under the policy that sampled them (no grad).
        advantages: (B,) per-sequence advantages.
        mask: (B, T) 1 on tokens that carry loss.
        cfg: the loss type and its constants.
        ref_logp: (B, T) log-probs under the frozen reference, needed when ``cfg.beta > 0``.
        num_sequences: sequences in the whole step (all micro-batches, all ranks); default B.
        num_tokens: loss tokens in the whole step; default ``mask.sum()``.
        is_weight: truncated importance weights from :func:`tis_weights`, (B, T), or (B,) for gspo; each
            token's (sequence's) loss is multiplied by its weight.

    Returns:
        :class:`LossOutput`.
    """
    if not (logp.shape == old_logp.shape == mask.shape) or advantages.shape != logp.shape[:1]:
        raise ValueError(
            f"shape mismatch: logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)}, "
            f"advantages {tuple(advantages.shape)} (expected (B, T) x3 and (B,))"
        )
    if cfg.beta > 0 and ref_logp is None:
        raise ValueError("beta > 0 needs ref_logp")
    num_sequences = int(num_sequences if num_sequences is not None else logp.shape[0])
    num_tokens = int(num_tokens if num_tokens is not None else mask.sum().item())
    maskf = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype)[:, None]  # (B, 1)
    kl_tok = kl_k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    lo, hi = cfg.epsilon_low, cfg.epsilon_high

    if cfg.loss_type == "gspo":
        log_s = masked_mean(logp - old_logp, mask, dim=1)  # (B,)
        s = torch.exp(log_s)
        a = advantages.to(logp.dtype)
        seq = -torch.minimum(s * a, torch.clamp(s, 1.0 - lo, 1.0 + hi) * a)
        if is_weight is not None:
            seq = seq * is_weight.to(seq.dtype)
        if cfg.beta > 0:
            seq = seq + cfg.beta * masked_mean(kl_tok, mask, dim=1)
        has = (maskf.sum(1) > 0).to(logp.dtype)
        loss = (seq * has).sum() / num_sequences
        sd = s.detach()
        low_f, high_f = _clip_stats(sd, a, lo, hi, has)
    else:
        ratio = torch.exp(logp - old_logp)
        if cfg.loss_type == "cispo":
            w = torch.clamp(ratio, max=cfg.cispo_cap).detach()
            per_token = -w * adv * logp
            low_f = 0.0
            high_f = float(masked_mean((ratio.detach() > cfg.cispo_cap).to(logp.dtype), mask))
        else:
            per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - lo, 1.0 + hi) * adv)
            low_f, high_f = _clip_stats(ratio.detach(), adv.expand_as(ratio), lo, hi, mask)
        if is_weight is not None:
            per_token = per_token * is_weight.to(per_token.dtype)
        if cfg.beta > 0:
            per_token = per_token + cfg.beta * kl_tok
        loss = _aggregate(per_token, mask, cfg, num_sequences, num_tokens)
    kl = float(masked_mean(kl_tok.detach(), mask)) if ref_logp is not None else 0.0
    return LossOutput(loss=loss, clip_low_frac=low_f, clip_high_frac=high_f, kl=kl, tokens=int(maskf.sum().item()))
