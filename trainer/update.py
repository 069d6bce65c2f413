"""The parts of one optimizer update of the policy on a generation batch: log-probs, loss, statistics, step.

:func:`completion_logprobs` runs the model over prompt + completion and returns the log-probability of each sampled
completion token (at the sampling temperature), through the chunked head of :mod:`trainer.logprobs`, so no
``[batch, seq, vocab]`` float32 tensor is built. :func:`prepare_update` does the part of an update that needs no
reward, so the loop runs it while the scores are computed: it splits the batch into micro-batches (gradient
accumulation) by a row count and/or a token budget (:func:`micro_batches`) and computes the old (``mu > 1``) and
reference log-probs without grad, into an :class:`UpdateBatch`. The forward/loss/backward loop over the
micro-batches and the ``mu`` passes is :func:`trainer.loop.optimize`, in the loop's own module; here are its parts:
:meth:`UpdateBatch.logprobs` (one micro-batch's forward), :class:`UpdateTally` (the loss of a micro-batch with the
global normalizers and importance weights, and the statistics) and :func:`optimizer_step` (sum over ranks, clip,
step). Dropout is off in the policy (see
:func:`trainer.setup.load_policy`), so old, new and reference log-probs compare one deterministic policy; with
gradient checkpointing the policy is in train mode, which then computes the same function. With ``bf16`` the forward
runs under bfloat16 autocast over float32 weights. Rows of a micro-batch that share a prompt can run as one packed
sequence, the prompt computed once (:mod:`trainer.packing`, ``packing``: ``auto`` where a cost model says it saves
FLOPs, ``on`` wherever a prompt is shared, ``off`` never).

When the batch carries the sampler's log-probs (vLLM) and ``is_cap`` is set, each token's loss is weighted by
``min(pi_old / pi_sampler, is_cap)`` (:func:`trainer.losses.tis_weights`), where pi_old is the trainer's own
log-prob at the weights that sampled the batch (the first pass's, detached, so no extra forward pass is needed
when ``mu == 1``).

This module does not sample, score or compute advantages; the loop hands it a batch and the advantages.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from trainer import metrics as M
from trainer import packing as shared_prompt
from trainer.config import Packing
from trainer.dist import DistInfo, GradientSync, all_reduce_sum
from trainer.head import PolicyForward
from trainer.logprobs import sequence_logprobs
from trainer.losses import LossConfig, LossOutput, TISStats, policy_loss, tis_weights
from trainer.rollout.base import RolloutBatch
from trainer.rollout.hf import position_ids_from_mask

__all__ = [
    "UpdateInputs",
    "UpdateBatch",
    "UpdateTally",
    "completion_logprobs",
    "micro_batches",
    "prepare_update",
    "optimizer_step",
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
    packing: Packing = "off",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) log-probs of ``completion_ids`` given the prompts, and (B, T) entropies when asked (no grad).

    ``model`` is a :class:`trainer.head.PolicyForward` (the model, its probed head map and its packing state), or a
    bare model, probed on this call. ``lengths`` (B,) are the completions' real lengths (default: all T tokens).
    ``packing``: ``on`` runs rows that share a prompt as one packed sequence (:mod:`trainer.packing`) where the
    model's attention and windows allow it and the packed length has matched the plain pass, ``auto`` only where
    that is also cheaper, ``off`` never; positions past a row's length are then 0.
    """
    fwd = model if isinstance(model, PolicyForward) else PolicyForward.of(model)
    args = (fwd, prompt_ids, prompt_mask, completion_ids, temperature)
    if packing != "off":
        n_len = lengths if lengths is not None else torch.full((len(completion_ids),), completion_ids.shape[1])

        def gap(runs: list[tuple[int, int]]) -> tuple[float, float]:  # see packing.choose
            return _packing_gap(*args, n_len, runs, chunk)

        runs = shared_prompt.choose(
            fwd.model,
            fwd.packing,
            prompt_ids,
            prompt_mask,
            n_len,
            force=packing == "on",
            sharded=fwd.sharded,
            gap=gap,
        )
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
    pk = shared_prompt.layout(prompt_ids.cpu(), prompt_mask.cpu(), completion_ids.cpu(), lengths.cpu(), runs)
    logp, ent = sequence_logprobs(
        model,
        pk.input_ids.to(device),
        shared_prompt.attention_mask_for(model, pk.allowed).to(device),
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
class UpdateBatch:
    """A generation batch laid out for the update, with what needs no reward computed (:func:`prepare_update`).

    Attributes:
        policy: the policy's forward (model, head map, packing state), held by the loop's step context.
        batch: the generation batch.
        mu: optimizer steps the update takes on the batch.
        slices: its micro-batches (row slices).
        trimmed: per micro-batch, (prompt ids, prompt mask, completion ids, completion length) without padding.
        lengths: per micro-batch, the completions' real lengths (rows,).
        temperature: the sampling temperature (log-probs are of the tempered softmax).
        bf16: the forward passes run under bfloat16 autocast.
        packing: ``off``, ``auto`` or ``on`` (:func:`completion_logprobs`).
        chunk: positions per chunk of the output head (None: :func:`trainer.logprobs.default_chunk`).
        old_logp: per micro-batch, the policy's log-probs before the first step (no grad; only when ``mu > 1``).
        ref_logp: per micro-batch, the reference model's log-probs (no grad; only with a reference model).
    """

    policy: PolicyForward
    batch: RolloutBatch
    mu: int
    slices: list[slice]
    trimmed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]
    lengths: list[torch.Tensor]
    temperature: float
    bf16: bool
    packing: Packing
    chunk: int | None
    old_logp: list[torch.Tensor] | None = None
    ref_logp: list[torch.Tensor] | None = None

    def logprobs(
        self, k: int, *, with_entropy: bool = False, fwd: PolicyForward | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(rows, T) log-probs (and entropies) of micro-batch ``k`` under ``fwd`` (default: the policy)."""
        fwd = fwd if fwd is not None else self.policy
        with autocast(next(fwd.model.parameters()).device, self.bf16):
            return completion_logprobs(
                fwd,
                *self.trimmed[k][:3],
                self.temperature,
                with_entropy=with_entropy,
                chunk=self.chunk,
                lengths=self.lengths[k],
                packing=self.packing,
            )


def prepare_update(
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
    packing: Packing = "auto",
) -> UpdateBatch:
    """The part of an update that needs no reward: the micro-batches, and the old (``mu > 1``) and reference
    log-probs, without grad. The loop runs it while the scoring workers are still judging ``batch``.

    ``model`` and ``ref_model`` are :class:`trainer.head.PolicyForward` objects (the loop builds them once) or
    bare models (probed here)."""
    policy = model if isinstance(model, PolicyForward) else PolicyForward.of(model)
    ref = ref_model if ref_model is None or isinstance(ref_model, PolicyForward) else PolicyForward.of(ref_model)
    slices = micro_batches(batch.prompt_mask, batch.completion_mask, micro_batch_size, micro_batch_tokens)
    prep = UpdateBatch(
        policy,
        batch,
        mu,
        slices,
        [_trim(batch, s) for s in slices],
        [batch.completion_mask[s].sum(1) for s in slices],
        temperature,
        bf16,
        packing,
        logprob_chunk,
    )
    with torch.no_grad():
        if mu > 1:
            prep.old_logp = [prep.logprobs(k)[0] for k in range(len(slices))]
        if ref is not None:
            prep.ref_logp = [prep.logprobs(k, fwd=ref)[0] for k in range(len(slices))]
    return prep


class UpdateTally:
    """One update's loss terms and statistics: the normalizers over every rank, the per-micro-batch
    importance weights (first pass), and the token-weighted loss, clip fractions, KL and entropy."""

    def __init__(
        self, prep: UpdateBatch, inputs: UpdateInputs, loss_cfg: LossConfig, dist: DistInfo, is_cap: float | None
    ) -> None:
        self.prep, self.inputs, self.loss_cfg, self.is_cap = prep, inputs, loss_cfg, is_cap
        self.device = next(prep.policy.model.parameters()).device
        self.n_seq, self.n_tok = all_reduce_sum([float(len(prep.batch)), float(inputs.loss_mask.sum())], dist)
        self.sampler_logp = prep.batch.sampler_logp if is_cap is not None else None
        self.weights: list[torch.Tensor | None] = [None] * len(prep.slices)
        self.is_stats: list[tuple[TISStats, float]] = []
        self.stats: dict[str, float] = dict.fromkeys(
            (M.LOSS, M.CLIP_LOW, M.CLIP_HIGH, M.KL, M.ENTROPY, M.GRAD_NORM), 0.0
        )
        self.entropy_tokens = 0.0

    def loss(self, k: int, logp: torch.Tensor, *, first_pass: bool) -> LossOutput:
        """The loss of micro-batch ``k`` given its log-probs with grad; the old log-probs are the prepared ones,
        or with ``mu == 1`` these, detached (the weights that sampled the batch)."""
        rows, t_len, prep = self.prep.slices[k], self.prep.trimmed[k][3], self.prep
        mask = self.inputs.loss_mask[rows, :t_len].to(self.device)
        old_k = prep.old_logp[k] if prep.old_logp is not None else logp.detach()
        if self.sampler_logp is not None and self.is_cap is not None and first_pass:
            sampled = self.sampler_logp[rows, :t_len].to(self.device)
            gspo = self.loss_cfg.loss_type == "gspo"
            self.weights[k], st = tis_weights(old_k, sampled, mask, self.is_cap, sequence=gspo)
            self.is_stats.append((st, float(mask.sum())))
        return policy_loss(
            logp,
            old_k,
            self.inputs.advantages[rows].to(self.device),
            mask,
            self.loss_cfg,
            ref_logp=prep.ref_logp[k] if prep.ref_logp is not None else None,
            num_sequences=int(self.n_seq),
            num_tokens=int(self.n_tok),
            is_weight=self.weights[k],
        )

    def add(self, k: int, out: LossOutput, ent: torch.Tensor | None) -> None:
        """Add micro-batch ``k``'s statistics of the first pass."""
        rows, t_len = self.prep.slices[k], self.prep.trimmed[k][3]
        cmask = self.prep.batch.completion_mask[rows, :t_len].to(self.device)
        self.entropy_tokens += _accumulate(self.stats, out, ent, cmask, self.n_tok)

    def metrics(self, grad_norm: float, lr: float) -> dict[str, float]:
        """loss, clip fractions, KL, entropy, grad norm (of the last step), lr, and ``is_ratio/*`` when the
        off-policy correction ran."""
        stats = {**self.stats, M.GRAD_NORM: grad_norm}
        stats[M.ENTROPY] /= max(self.entropy_tokens, 1.0)
        if self.is_stats:
            stats.update(_is_metrics(self.is_stats))
        stats[M.LR] = lr
        stats[M.MICRO_BATCHES] = float(len(self.prep.slices))
        return stats


def _is_metrics(parts: list[tuple[TISStats, float]]) -> dict[str, float]:
    """Token-weighted mean, max and capped fraction of the importance ratios over the micro-batches."""
    w = sum(n for _, n in parts) or 1.0
    return {
        M.IS_MEAN: sum(st.mean * n for st, n in parts) / w,
        M.IS_MAX: max(st.max for st, _ in parts),
        M.IS_CAPPED_FRAC: sum(st.capped_frac * n for st, n in parts) / w,
    }


def _accumulate(
    stats: dict[str, float], out: LossOutput, ent: torch.Tensor | None, cmask: torch.Tensor, n_tok: float
) -> float:
    """Add one micro-batch's statistics (token-weighted); returns the tokens its entropy covered."""
    w = out.tokens / max(n_tok, 1.0)
    stats[M.LOSS] += float(out.loss.detach())
    stats[M.CLIP_LOW] += out.clip_low_frac * w
    stats[M.CLIP_HIGH] += out.clip_high_frac * w
    stats[M.KL] += out.kl * w
    if ent is None:
        return 0.0
    cm = cmask.float()
    stats[M.ENTROPY] += float((ent * cm).sum())
    return float(cm.sum())


def optimizer_step(
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
