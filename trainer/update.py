"""One optimizer update of the policy on a scored generation batch: log-probs, loss, backward, step.

:func:`completion_logprobs` runs the model over prompt + completion and returns the log-probability of each sampled
completion token (at the sampling temperature), through the chunked head of :mod:`trainer.logprobs`, so no
``[batch, seq, vocab]`` float32 tensor is built. :func:`policy_update` splits the batch into micro-batches (gradient
accumulation) by a row count and/or a token budget (:func:`micro_batches`), takes ``mu`` optimizer steps over it,
sums gradients over ranks and clips them. It is two calls, so that the loop can hide reward time:
:func:`first_forward` (old and reference log-probs, the first micro-batch's forward pass) needs no reward and runs
while the scores are computed; :func:`apply_update` takes the advantages and steps. Dropout is off in the policy
(see :func:`trainer.setup.load_policy`), so old, new and reference log-probs compare one deterministic policy; with
gradient checkpointing the policy is in train mode, which then computes the same function. With ``bf16`` the forward
runs under bfloat16 autocast over float32 weights. Rows of a micro-batch that share a prompt can run as one packed
sequence, the prompt computed once (:mod:`trainer.packing`, ``pack``: by default where a cost model says it saves
FLOPs).

When the batch carries the sampler's log-probs (vLLM) and ``is_cap`` is set, each token's loss is weighted by
``min(pi_old / pi_sampler, is_cap)`` (:func:`trainer.losses.tis_weights`), where pi_old is the trainer's own
log-prob at the weights that sampled the batch (the first pass's, detached, so no extra forward pass is needed
when ``mu == 1``).

This module does not sample, score or compute advantages; the loop hands it a batch and the advantages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainer import packing
from trainer.dist import DistInfo, GradientSync, all_reduce_sum
from trainer.head import PolicyForward
from trainer.logprobs import sequence_logprobs
from trainer.losses import LossConfig, LossOutput, TISStats, policy_loss, tis_weights
from trainer.rollout.base import RolloutBatch
from trainer.rollout.hf import position_ids_from_mask

__all__ = [
    "UpdateInputs",
    "FirstPass",
    "completion_logprobs",
    "micro_batches",
    "first_forward",
    "apply_update",
    "policy_update",
]


@dataclass
class UpdateInputs:
    """What the update needs once scoring is done: per-row advantages and the per-token loss mask."""

    advantages: torch.Tensor  # (B,)
    loss_mask: torch.Tensor  # (B, T)


def micro_batches(
    prompt_mask: torch.Tensor, completion_mask: torch.Tensor, size: int | None = None, tokens: int | None = None
) -> list[slice]:
    """Consecutive row slices covering the batch, each of at most ``size`` rows and at most ``tokens`` padded
    tokens (rows x (longest prompt + longest completion) of the slice, the shape its forward pass has).

    A single row longer than ``tokens`` forms a micro-batch of its own.
    """
    n = int(completion_mask.shape[0])
    p_len = prompt_mask.sum(1).tolist()
    c_len = completion_mask.sum(1).tolist()
    out: list[slice] = []
    start, mp, mc = 0, 0, 0
    for i in range(n):
        np_, nc = max(mp, int(p_len[i])), max(mc, int(c_len[i]))
        rows = i - start + 1
        full = (size is not None and rows > size) or (tokens is not None and rows * (np_ + nc) > tokens)
        if full and rows > 1:
            out.append(slice(start, i))
            start, np_, nc = i, int(p_len[i]), int(c_len[i])
        mp, mc = np_, nc
    if n:
        out.append(slice(start, n))
    return out


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
    chunk: int | None = None,
    lengths: torch.Tensor | None = None,
    pack: bool | None = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) log-probs of ``completion_ids`` given the prompts, and (B, T) entropies when asked (no grad).

    ``model`` is a :class:`trainer.head.PolicyForward` (the model, its probed head map and its packing state), or a
    bare model, probed on this call. ``lengths`` (B,) are the completions' real lengths (default: all T tokens).
    ``pack``: run rows that share a prompt as one packed sequence (:mod:`trainer.packing`) where the model's
    attention and windows allow it and the packed length has matched the plain pass, ``None`` only where that is
    also cheaper, ``False`` never; positions past a row's length are then 0.
    """
    fwd = model if isinstance(model, PolicyForward) else PolicyForward.of(model)
    args = (fwd, prompt_ids, prompt_mask, completion_ids, temperature)
    if pack is not False:
        n_len = lengths if lengths is not None else torch.full((len(completion_ids),), completion_ids.shape[1])

        def gap(runs: list[tuple[int, int]]) -> tuple[float, float]:  # see packing.choose
            return _packing_gap(*args, n_len, runs, chunk)

        runs = packing.choose(fwd.model, fwd.packing, prompt_ids, prompt_mask, n_len, force=bool(pack), gap=gap)
        if runs is not None:
            return _packed_logprobs(*args, n_len, runs, with_entropy, chunk)
    return _plain_logprobs(*args, with_entropy, chunk)


def _packing_gap(
    fwd: PolicyForward,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    temperature: float,
    lengths: torch.Tensor,
    runs: list[tuple[int, int]],
    chunk: int | None,
) -> tuple[float, float]:
    """(packed, plain): the largest |log-prob| distance of each pass, in the current autocast mode, to the plain
    pass in float32 (the plain pass itself without autocast), over the completions' real tokens."""
    args = (fwd, prompt_ids, prompt_mask, completion_ids, temperature)
    device = next(fwd.model.parameters()).device
    with torch.no_grad():
        packed = _packed_logprobs(*args, lengths, runs, False, chunk)[0]
        plain = _plain_logprobs(*args, False, chunk)[0]
        ref = plain
        if torch.is_autocast_enabled(device.type):
            with torch.autocast(device.type, enabled=False):
                ref = _plain_logprobs(*args, False, chunk)[0]
    real = torch.arange(packed.shape[1], device=packed.device)[None] < lengths.to(packed.device)[:, None]
    if not bool(real.any()):
        return 0.0, 0.0
    return float((packed - ref)[real].abs().max()), float((plain - ref)[real].abs().max())


def _plain_logprobs(
    fwd: PolicyForward,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    chunk: int | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`completion_logprobs` with each row its own ``[prompt, completion]`` sequence."""
    device = next(fwd.model.parameters()).device
    ids = torch.cat([prompt_ids, completion_ids], dim=1).to(device)
    if bool(prompt_mask.all()):
        attn = pos = None  # no left padding: plain causal attention, no mask to build
    else:
        attn = torch.cat([prompt_mask, torch.ones_like(completion_ids)], dim=1).to(device)
        pos = position_ids_from_mask(attn)
    return sequence_logprobs(
        fwd.model,
        ids,
        attn,
        pos,
        completion_ids.to(device),
        temperature=temperature,
        chunk=chunk,
        with_entropy=with_entropy,
        logit_map=fwd.logit_map,
    )


def _packed_logprobs(
    fwd: PolicyForward,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    temperature: float,
    lengths: torch.Tensor,
    runs: list[tuple[int, int]],
    with_entropy: bool,
    chunk: int | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`completion_logprobs` over the packed layout, scattered back to (B, T) (0 past each row's end)."""
    model = fwd.model
    device = next(model.parameters()).device
    pk = packing.layout(prompt_ids.cpu(), prompt_mask.cpu(), completion_ids.cpu(), lengths.cpu(), runs)
    logp, ent = sequence_logprobs(
        model,
        pk.input_ids.to(device),
        packing.attention_mask_for(model, pk.allowed).to(device),
        pk.position_ids.to(device),
        pk.targets.to(device),
        temperature=temperature,
        chunk=chunk,
        with_entropy=with_entropy,
        predict=pk.predict.to(device),
        logit_map=fwd.logit_map,
    )
    where = (pk.rows.to(device), pk.cols.to(device))
    shape = tuple(completion_ids.shape)
    out = logp.new_zeros(shape).index_put(where, logp)
    return out, (ent.new_zeros(shape).index_put(where, ent) if ent is not None else None)


def autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on ``device`` (CUDA or CPU) when ``bf16``; the weights stay float32."""
    if bf16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@dataclass
class FirstPass:
    """The forward passes an update runs before it needs the advantages (see :func:`first_forward`).

    Attributes:
        model: the policy.
        batch: the generation batch.
        slices: its micro-batches (row slices).
        trimmed: per micro-batch, (prompt ids, prompt mask, completion ids, completion length) without padding.
        forward: ``forward(model, k, with_entropy)``: (B, T) log-probs (and entropies) of micro-batch ``k``.
        mu: optimizer steps the update will take on the batch.
        old_logp: per micro-batch, the log-probs before the first step (no grad; only when ``mu > 1``).
        ref_logp: per micro-batch, the reference model's log-probs (no grad; only with a reference model).
        first: micro-batch 0's log-probs and entropies with grad, the first pass of the first step.
    """

    model: Any
    policy: PolicyForward
    batch: RolloutBatch
    slices: list[slice]
    trimmed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]
    forward: Callable[[PolicyForward, int, bool], tuple[torch.Tensor, torch.Tensor | None]]
    mu: int
    old_logp: list[torch.Tensor] | None
    ref_logp: list[torch.Tensor] | None
    first: tuple[torch.Tensor, torch.Tensor | None]


def first_forward(
    model: Any,
    batch: RolloutBatch,
    *,
    temperature: float,
    mu: int = 1,
    micro_batch_size: int | None = None,
    micro_batch_tokens: int | None = None,
    ref_model: Any | None = None,
    bf16: bool = False,
    logprob_chunk: int | None = None,
    pack: bool | None = None,
) -> FirstPass:
    """The part of an update that needs no reward: old and reference log-probs and the first micro-batch's
    forward pass with grad. The loop runs it while the scoring workers are still judging ``batch``.

    ``model`` and ``ref_model`` are :class:`trainer.head.PolicyForward` objects (the loop builds them once) or
    bare models (probed here)."""
    policy = model if isinstance(model, PolicyForward) else PolicyForward.of(model)
    ref = ref_model if ref_model is None or isinstance(ref_model, PolicyForward) else PolicyForward.of(ref_model)
    device = next(policy.model.parameters()).device
    slices = micro_batches(batch.prompt_mask, batch.completion_mask, micro_batch_size, micro_batch_tokens)
    trimmed = [_trim(batch, s) for s in slices]

    lengths = [batch.completion_mask[s].sum(1) for s in slices]

    def forward(m: PolicyForward, k: int, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        with autocast(device, bf16):
            return completion_logprobs(
                m,
                *trimmed[k][:3],
                temperature,
                with_entropy=with_entropy,
                chunk=logprob_chunk,
                lengths=lengths[k],
                pack=pack,
            )

    with torch.no_grad():
        old_logp = [forward(policy, k)[0] for k in range(len(slices))] if mu > 1 else None
        ref_logp = [forward(ref, k)[0] for k in range(len(slices))] if ref is not None else None
    first = forward(policy, 0, True)
    return FirstPass(policy.model, policy, batch, slices, trimmed, forward, mu, old_logp, ref_logp, first)


def apply_update(
    passes: FirstPass,
    inputs: UpdateInputs,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    loss_cfg: LossConfig,
    *,
    max_grad_norm: float | None = None,
    dist: DistInfo = DistInfo(),
    is_cap: float | None = None,
) -> dict[str, float]:
    """Take ``passes.mu`` optimizer steps on the batch of ``passes`` with the advantages and mask of ``inputs``;
    returns loss, clip fractions, KL, entropy, grad norm, lr (and ``is_ratio/*`` when the off-policy correction
    ran)."""
    model, batch, slices, trimmed = passes.model, passes.batch, passes.slices, passes.trimmed
    device = next(model.parameters()).device
    n_seq, n_tok = all_reduce_sum([float(len(batch)), float(inputs.loss_mask.sum())], dist)
    stats: dict[str, float] = {
        "loss": 0.0,
        "clip_ratio/low_mean": 0.0,
        "clip_ratio/high_mean": 0.0,
        "kl": 0.0,
        "entropy": 0.0,
        "grad_norm": 0.0,
    }
    sampler_logp = batch.sampler_logp if is_cap is not None else None
    weights: list[torch.Tensor | None] = [None] * len(slices)
    is_stats: list[tuple[TISStats, float]] = []
    entropy_tokens = 0.0
    sync = GradientSync(model.parameters(), dist)  # sums gradients over ranks while the last backward runs
    for it in range(passes.mu):
        optimizer.zero_grad(set_to_none=True)
        for k, rows in enumerate(slices):
            logp, ent = passes.first if it == 0 and k == 0 else passes.forward(passes.policy, k, it == 0)
            t_len = trimmed[k][3]
            mask = inputs.loss_mask[rows, :t_len].to(device)
            old_k = passes.old_logp[k] if passes.old_logp is not None else logp.detach()
            if sampler_logp is not None and is_cap is not None and it == 0:
                weights[k], st = tis_weights(
                    old_k, sampler_logp[rows, :t_len].to(device), mask, is_cap, sequence=loss_cfg.loss_type == "gspo"
                )
                is_stats.append((st, float(mask.sum())))
            out = policy_loss(
                logp,
                old_k,
                inputs.advantages[rows].to(device),
                mask,
                loss_cfg,
                ref_logp=passes.ref_logp[k] if passes.ref_logp is not None else None,
                num_sequences=int(n_seq),
                num_tokens=int(n_tok),
                is_weight=weights[k],
            )
            if k == len(slices) - 1:
                sync.arm()
            out.loss.backward()
            if it == 0:
                entropy_tokens += _accumulate(stats, out, ent, batch.completion_mask[rows, :t_len].to(device), n_tok)
        stats["grad_norm"] = _optimizer_step(model, optimizer, scheduler, sync, max_grad_norm)
    sync.close()
    stats["entropy"] /= max(entropy_tokens, 1.0)
    if is_stats:
        stats.update(_is_metrics(is_stats))
    stats["lr"] = float(scheduler.get_last_lr()[0])
    stats["micro_batches"] = float(len(slices))
    return stats


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    batch: RolloutBatch,
    inputs: UpdateInputs,
    loss_cfg: LossConfig,
    *,
    temperature: float,
    mu: int = 1,
    micro_batch_size: int | None = None,
    micro_batch_tokens: int | None = None,
    max_grad_norm: float | None = None,
    ref_model: Any | None = None,
    dist: DistInfo = DistInfo(),
    bf16: bool = False,
    is_cap: float | None = None,
    logprob_chunk: int | None = None,
    pack: bool | None = None,
) -> dict[str, float]:
    """:func:`first_forward` then :func:`apply_update`, for a batch whose advantages are already known.

    ``model`` is a :class:`trainer.head.PolicyForward` or a bare model (then probed on every call)."""
    passes = first_forward(
        model,
        batch,
        temperature=temperature,
        mu=mu,
        micro_batch_size=micro_batch_size,
        micro_batch_tokens=micro_batch_tokens,
        ref_model=ref_model,
        bf16=bf16,
        logprob_chunk=logprob_chunk,
        pack=pack,
    )
    return apply_update(
        passes, inputs, optimizer, scheduler, loss_cfg, max_grad_norm=max_grad_norm, dist=dist, is_cap=is_cap
    )


def _is_metrics(parts: list[tuple[TISStats, float]]) -> dict[str, float]:
    """Token-weighted mean, max and capped fraction of the importance ratios over the micro-batches."""
    w = sum(n for _, n in parts) or 1.0
    return {
        "is_ratio/mean": sum(st.mean * n for st, n in parts) / w,
        "is_ratio/max": max(st.max for st, _ in parts),
        "is_ratio/capped_frac": sum(st.capped_frac * n for st, n in parts) / w,
    }


def _accumulate(
    stats: dict[str, float], out: LossOutput, ent: torch.Tensor | None, cmask: torch.Tensor, n_tok: float
) -> float:
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


def _optimizer_step(
    model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, sync: GradientSync, max_grad_norm: float | None
) -> float:
    """Finish summing gradients over ranks, clip, step; returns the gradient norm before clipping (0 when not
    clipped)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sync.finish()
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)) if max_grad_norm is not None else 0.0
    optimizer.step()
    scheduler.step()
    return norm
