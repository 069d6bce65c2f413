"""One optimizer update of the policy on a scored generation batch: log-probs, loss, backward, step.

:func:`completion_logprobs` runs the model over prompt + completion and returns the log-probability of each
sampled completion token (at the sampling temperature). :func:`policy_update` splits the batch into
micro-batches (gradient accumulation), takes ``mu`` optimizer steps over it, sums gradients over ranks and
clips them. To hide reward time, the first micro-batch's forward pass runs *before* it waits for the scores.
The policy stays in eval mode (dropout off, as TRL's ``disable_dropout``), so old, new and reference log-probs
compare one deterministic policy; gradients flow all the same.

This module does not sample or score; the loop hands it a batch and a function that yields the advantages.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from trainer.dist import DistInfo, all_reduce_sum, sync_gradients
from trainer.losses import LossConfig, LossOutput, entropy_from_logits, policy_loss
from trainer.rollout.base import RolloutBatch
from trainer.rollout.hf import position_ids_from_mask

__all__ = ["UpdateInputs", "completion_logprobs", "micro_slices", "policy_update"]


@dataclass
class UpdateInputs:
    """What the update needs once scoring is done: per-row advantages and the per-token loss mask."""

    advantages: torch.Tensor  # (B,)
    loss_mask: torch.Tensor  # (B, T)


def micro_slices(n: int, size: int | None) -> list[slice]:
    """Consecutive slices of at most ``size`` rows covering ``range(n)``."""
    size = size or max(n, 1)
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def _trim(batch: RolloutBatch, rows: slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Rows of the batch with all-padding prompt columns (left) and completion columns (right) removed."""
    pm, cm = batch.prompt_mask[rows], batch.completion_mask[rows]
    p_keep = int(pm.sum(0).nonzero().min()) if pm.any() else pm.shape[1]
    t_len = int(cm.sum(1).max()) if cm.numel() else 0
    return batch.prompt_ids[rows, p_keep:], pm[:, p_keep:], batch.completion_ids[rows, :t_len], t_len


def completion_logprobs(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    temperature: float,
    *,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) log-probs of ``completion_ids`` given the prompts, and (B, T) entropies when asked (no grad)."""
    device = next(model.parameters()).device
    ids = torch.cat([prompt_ids, completion_ids], dim=1).to(device)
    t = completion_ids.shape[1]
    if bool(prompt_mask.all()):
        attn = pos = None  # no left padding: plain causal attention, no mask to build
    else:
        attn = torch.cat([prompt_mask, torch.ones_like(completion_ids)], dim=1).to(device)
        pos = position_ids_from_mask(attn)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False, logits_to_keep=t + 1)
    logits = out.logits[:, :-1].float() / temperature  # (B, T, V)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.to(device)[..., None]).squeeze(-1)
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = entropy_from_logits(logits.detach())
    return logp, ent


def _autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager:
    if bf16 and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    batch: RolloutBatch,
    get_inputs: Callable[[], UpdateInputs],
    loss_cfg: LossConfig,
    *,
    temperature: float,
    mu: int = 1,
    micro_batch_size: int | None = None,
    max_grad_norm: float | None = None,
    ref_model: Any | None = None,
    dist: DistInfo = DistInfo(),
    bf16: bool = False,
) -> dict[str, float]:
    """Take ``mu`` optimizer steps on ``batch``; returns loss, clip fractions, KL, entropy, grad norm, timings.

    ``get_inputs`` is called once, after the first forward pass, and may block on scoring.
    """
    device = next(model.parameters()).device
    slices = micro_slices(len(batch), micro_batch_size)
    trimmed = [_trim(batch, s) for s in slices]
    fwd = lambda m, k, ent=False: completion_logprobs(m, *trimmed[k][:3], temperature, with_entropy=ent)  # noqa: E731
    with torch.no_grad(), _autocast(device, bf16):
        old = [fwd(model, k)[0] for k in range(len(slices))] if mu > 1 else None
        ref = [fwd(ref_model, k)[0] for k in range(len(slices))] if ref_model is not None else None
    with _autocast(device, bf16):
        first = fwd(model, 0, True)
    t0 = time.perf_counter()
    inputs = get_inputs()
    wait_s = time.perf_counter() - t0
    n_seq, n_tok = all_reduce_sum([float(len(batch)), float(inputs.loss_mask.sum())], dist)
    stats: dict[str, float] = {"loss": 0.0, "clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.0, "kl": 0.0,
                               "entropy": 0.0, "grad_norm": 0.0}
    ent_n = 0.0
    for it in range(mu):
        optimizer.zero_grad(set_to_none=True)
        for k, s in enumerate(slices):
            if it == 0 and k == 0:
                logp, ent = first
            else:
                with _autocast(device, bf16):
                    logp, ent = fwd(model, k, it == 0)
            t_len = trimmed[k][3]
            out = policy_loss(
                logp, old[k] if old is not None else logp.detach(), inputs.advantages[s].to(device),
                inputs.loss_mask[s, :t_len].to(device), loss_cfg, ref_logp=ref[k] if ref is not None else None,
                num_sequences=int(n_seq), num_tokens=int(n_tok),
            )
            out.loss.backward()
            if it == 0:
                ent_n += _accumulate(stats, out, ent, batch.completion_mask[s, :t_len].to(device), n_tok)
        stats["grad_norm"] = _optimizer_step(model, optimizer, scheduler, dist, max_grad_norm)
    stats["entropy"] /= max(ent_n, 1.0)
    stats["timing/score_wait_s"] = wait_s
    stats["lr"] = float(scheduler.get_last_lr()[0])
    return stats


def _accumulate(stats: dict[str, float], out: LossOutput, ent: torch.Tensor | None, cmask: torch.Tensor,
                n_tok: float) -> float:
    """Add one micro-batch's statistics (token-weighted); returns the tokens its entropy covered."""
    w = out.tokens / max(n_tok, 1.0)
    stats["loss"] += float(out.loss.detach())
    stats["clip_ratio/low_mean"] += out.clip_low_frac * w
    stats["clip_ratio/high_mean"] += out.clip_high_frac * w
    stats["kl"] += out.kl * w
    if ent is None:
        return 0.0
    cm = cmask.float()
    stats["entropy"] += float((ent * cm).sum())
    return float(cm.sum())


def _optimizer_step(model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, dist: DistInfo,
                    max_grad_norm: float | None) -> float:
    """Sum gradients over ranks, clip, step; returns the gradient norm before clipping (0 when not clipped)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sync_gradients(params, dist)
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)) if max_grad_norm is not None else 0.0
    optimizer.step()
    scheduler.step()
    return norm
