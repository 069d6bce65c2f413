"""Per-token log-probabilities (and entropies) of sampled tokens, computed in chunks of positions.

The naive way builds the logits of every position, ``[batch, seq, vocab]``, then a float32 copy, a
temperature-divided copy and a log-softmax; with a 151,936-token vocabulary that is 0.6 GB per 1,000 positions
for each copy. Here the model's backbone runs once to its last hidden states ``(N, H)``, and the output head is
applied to ``chunk`` positions at a time: logits of one chunk, in float32, divided by the temperature, minus
their log-sum-exp, gathered at the sampled ids. With autograd on, each chunk runs under non-reentrant activation
checkpointing, so the backward pass recomputes that chunk's logits instead of keeping them: no tensor larger
than ``(chunk, vocab)`` exists at any time, forward or backward (when all positions fit one chunk, it runs
without checkpointing: its logits are within the budget anyway).

:func:`token_logprobs` is the pure function (hidden states, head, ids, temperature); :func:`sequence_logprobs`
runs a causal LM over prompt + completion and applies it to the completion positions. The update, the old-policy
pass and the reference model all go through :func:`sequence_logprobs`.

What a model's own forward does around its output head (a scale on the hidden states before it, a scale and a
tanh soft cap on the logits after it) is a :class:`LogitMap`, found by probing the model (:mod:`trainer.head`),
not read from config attributes; the chunked head applies it.

Not covered: heads other than a module that maps ``(n, H)`` to ``(n, vocab)``, logit post-processing beyond a
:class:`LogitMap` (:mod:`trainer.head` refuses such models at load), and top-p renormalization: the trainer refuses
``top_p < 1`` (see :mod:`trainer.config`), so these are log-probs of the full tempered softmax.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch.utils.checkpoint import checkpoint

__all__ = [
    "LogitMap",
    "token_logprobs",
    "sequence_logprobs",
    "naive_logprobs",
    "default_chunk",
    "split_model",
    "is_sharded",
]

#: The name under which FSDP2 is handed :func:`sequence_logprobs` to wrap as a forward method (only for the
#: moment of wrapping: the wrapped method is kept by the caller, not left on the model).
_FORWARD_NAME = "_chunked_logprobs"

#: Bytes of float32 logits one chunk may hold (the default chunk is this over 4 * vocab). The backward pass of a
#: chunk holds about five tensors of this size. On a GPU, chunks are larger (fewer, larger matmuls).
CHUNK_BYTES = 64 * 2**20
CHUNK_BYTES_CUDA = 512 * 2**20


@dataclass(frozen=True)
class LogitMap:
    """What a model's forward applies around its output head: ``logits = f(head(input_scale * h))`` with
    ``f(x) = softcap * tanh(scale * x / softcap)``, or ``scale * x`` without a cap.

    The identity map (the default) is a plain ``lm_head``; Granite divides its logits by ``logits_scaling``, Cohere
    multiplies them by ``logit_scale``, Gemma2 soft-caps them, MiniCPM3 scales the hidden states before the head.
    """

    input_scale: float = 1.0
    scale: float = 1.0
    softcap: float | None = None

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """``f(x)`` of head outputs ``x`` (any shape)."""
        if self.scale != 1.0:
            x = x * self.scale
        if self.softcap is not None and math.isfinite(self.softcap):
            x = torch.tanh(x / self.softcap) * self.softcap
        return x

    def logits(self, head: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor) -> torch.Tensor:
        """float32 logits of hidden states ``h`` as the model's forward computes them."""
        return self.apply(head(h * self.input_scale if self.input_scale != 1.0 else h).float())


IDENTITY = LogitMap()


def default_chunk(vocab_size: int, budget_bytes: int = CHUNK_BYTES) -> int:
    """Positions per chunk so that one chunk's float32 logits take about ``budget_bytes``.

    >>> default_chunk(151_936)
    110
    """
    return max(1, budget_bytes // (4 * max(1, vocab_size)))


#: Bytes of the float32 rows the fused log-softmax works on at a time (a small temporary, reused).
_BLOCK_BYTES = 8 * 2**20


def _blocks(logits: torch.Tensor) -> list[slice]:
    """Row slices of ``logits`` (c, V) of about ``_BLOCK_BYTES`` of float32 each on the CPU; all rows at once
    elsewhere (a GPU's caching allocator reuses its blocks, and fewer, larger kernels are what it runs well)."""
    if logits.device.type != "cpu":
        return [slice(0, len(logits))]
    n = max(1, _BLOCK_BYTES // (4 * max(1, logits.shape[-1])))
    return [slice(i, i + n) for i in range(0, len(logits), n)]


def _tempered(logits: torch.Tensor, temperature: float, *, fresh: bool) -> torch.Tensor:
    """float32 ``logits / temperature``; a new tensor when ``fresh`` (to be modified in place), else possibly
    ``logits`` itself."""
    x = logits.float()
    if x is logits and (fresh or temperature != 1.0):
        x = logits.clone()
    return x.div_(temperature) if temperature != 1.0 else x


def _logsumexp_picked(
    logits: torch.Tensor, ids: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-sum-exp, value at ``ids``, entropy of the softmax, or an empty tensor) of each row of
    ``logits / temperature`` in float32 (c,), a block of rows at a time."""
    c = len(logits)
    logz, picked = logits.new_empty(c, dtype=torch.float32), logits.new_empty(c, dtype=torch.float32)
    ent = logits.new_empty(c if with_entropy else 0, dtype=torch.float32)
    for rows in _blocks(logits):
        x = _tempered(logits[rows], temperature, fresh=False)
        top = x.amax(-1, keepdim=True)
        e = (x - top).exp_()
        total = e.sum(-1)
        logz[rows] = total.log() + top.squeeze(-1)
        picked[rows] = x.gather(-1, ids[rows, None]).squeeze(-1)
        if with_entropy:  # H = logZ - E_p[x], E_p[x] = sum(e * x) / sum(e), the sum as a dot product per row
            ent[rows] = logz[rows] - torch.bmm(e[:, None], x[:, :, None]).reshape(-1) / total
    return logz, picked, ent


class _TemperedLogSoftmax(torch.autograd.Function):
    """``log_softmax(logits / temperature)`` gathered at ``ids``, and the entropy of that softmax (no gradient),
    computed in float32 a block of rows at a time (:func:`_blocks`), with no ``(c, V)`` float32 tensor.

    Built from autograd's operators, the same formula makes a float32 copy of the chunk's logits, a tempered copy
    and the log-sum-exp's shifted copy, and its backward several more (the log-sum-exp's exponentials, the gather's
    zeros, the quotient by the temperature): each a fresh ``(c, V)`` float32 block, which on the CPU is a fresh
    mapping whose pages fault in one by one. Here the backward recomputes the softmax from the saved ``logits``
    (the head's output, bfloat16 under autocast, kept alive by nothing else) and the saved log-sum-exp, straight
    into the gradient: ``d logp / d logits = (onehot(ids) - softmax) / temperature``, in ``logits``' dtype.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, ids: torch.Tensor, temperature: float, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(logits.device.type, enabled=False):  # float32 throughout, the bmm included
            logz, picked, ent = _logsumexp_picked(logits, ids, temperature, with_entropy)
        ctx.save_for_backward(logits, ids, logz)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(ent)
        return picked - logz, ent

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor, _grad_ent: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, ids, logz = ctx.saved_tensors
        t = ctx.temperature
        out = torch.empty_like(logits)
        with torch.autocast(logits.device.type, enabled=False):
            for rows in _blocks(logits):
                g = grad[rows, None] / t
                p = _tempered(logits[rows], t, fresh=True).sub_(logz[rows, None]).exp_().mul_(-g)  # -softmax g / t
                out[rows] = p.scatter_add_(-1, ids[rows, None], g)
        return out, None, None, None


def _chunk_logprobs(
    h: torch.Tensor,
    ids: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    temperature: float,
    logit_map: LogitMap,
    ent_out: list[torch.Tensor] | None,
) -> torch.Tensor:
    """(c,) log-probs of one chunk; appends its (c,) entropies to ``ent_out`` when given and not yet done (the
    backward pass's recomputation of a checkpointed chunk skips them: they carry no gradient)."""
    if logit_map == IDENTITY:  # the head's output as it is (bfloat16 under autocast): converted in the softmax
        logits = head(h)
    else:
        logits = logit_map.logits(head, h)  # (c, V) float32
    want_ent = ent_out is not None and not ent_out
    logp, ent = _TemperedLogSoftmax.apply(logits, ids, temperature, want_ent)
    if want_ent and ent_out is not None:
        ent_out.append(ent)
    return logp


def token_logprobs(
    hidden: torch.Tensor,
    ids: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    *,
    temperature: float = 1.0,
    chunk: int | None = None,
    logit_map: LogitMap = IDENTITY,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``ids`` under ``softmax(logit_map(head, hidden) / temperature)``, ``chunk`` positions at a time.

    Args:
        hidden: ``(..., H)`` hidden states, each position predicting the id at the same index of ``ids``.
        ids: ``(...)`` token ids (long).
        head: the output layer, ``(n, H) -> (n, V)`` (a ``torch.nn.Linear`` or any module).
        temperature: the sampling temperature.
        chunk: positions per chunk; default :func:`default_chunk` of the head's output size (64 MiB of logits,
            512 MiB on a GPU).
        logit_map: what the model's forward applies around its head (before the temperature).
        with_entropy: also return the softmax entropy of each position (no gradient).

    Returns:
        ``(logp, entropy)``, each shaped like ``ids``, float32; entropy is None unless asked for.
    """
    shape = ids.shape
    h = hidden.reshape(-1, hidden.shape[-1])
    flat = ids.reshape(-1).to(h.device)
    if chunk is None:
        weight = getattr(head, "weight", None)
        budget = CHUNK_BYTES_CUDA if h.is_cuda else CHUNK_BYTES
        chunk = default_chunk(int(weight.shape[0]) if weight is not None else 151_936, budget)
    # one chunk holds all positions: its logits are within the budget, so nothing is gained by recomputing them
    grad = (
        torch.is_grad_enabled()
        and flat.numel() > chunk
        and (h.requires_grad or any(p.requires_grad for p in _params(head)))
    )
    logps: list[torch.Tensor] = []
    ents: list[torch.Tensor] = []
    for i in range(0, flat.numel(), chunk):
        once: list[torch.Tensor] | None = [] if with_entropy else None
        args = (h[i : i + chunk], flat[i : i + chunk], head, temperature, logit_map, once)
        logps.append(checkpoint(_chunk_logprobs, *args, use_reentrant=False) if grad else _chunk_logprobs(*args))
        if once:
            ents.append(once[0])
    if not logps:
        empty = h.new_zeros(shape, dtype=torch.float32)
        return empty, (empty.clone() if with_entropy else None)
    logp = torch.cat(logps).reshape(shape)
    return logp, (torch.cat(ents).reshape(shape) if with_entropy else None)


def _params(head: Any) -> list[torch.Tensor]:
    return list(head.parameters()) if isinstance(head, torch.nn.Module) else []


def naive_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The reference computation: a float32 log-softmax over the full ``(..., V)`` logits, gathered at ``ids``."""
    x = logits.float() / temperature
    return torch.log_softmax(x, dim=-1).gather(-1, ids[..., None]).squeeze(-1)


def split_model(model: Any) -> tuple[Any, Any]:
    """(backbone returning ``last_hidden_state``, output head) of a transformers causal LM.

    The backbone is the model's decoder (``get_decoder()``), or where that is the model itself (Llama4's text
    model), its base model or its child model with input embeddings. A peft model is unwrapped to its base model
    (LoRA layers stay in place and train).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    found = [getattr(base, "get_decoder", lambda: None)(), getattr(base, "base_model", None)]
    found += [m for m in base.children() if hasattr(m, "get_input_embeddings")]
    body = next((m for m in found if m is not None and m is not base and m is not head), None)
    if head is None or body is None:
        raise ValueError(f"{type(base).__name__}: no output embeddings / decoder to compute chunked log-probs from")
    return body, head


def sequence_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk: int | None = None,
    with_entropy: bool = False,
    predict: torch.Tensor | None = None,
    logit_map: LogitMap = IDENTITY,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) log-probs of ``targets``, the last T tokens of ``input_ids`` (B, L), each predicted by the position
    before it; and (B, T) entropies when asked (no gradient).

    With ``predict`` (n,), ``targets`` is (n,) too and ``predict[i]`` is the index, in the flattened (B * L)
    positions, of the one that predicts ``targets[i]`` (a packed layout, :mod:`trainer.packing`; then
    ``attention_mask`` may be 4D); the results are (n,). ``logit_map`` is the model's own map around its head
    (:func:`trainer.head.probe_logit_map`).

    The backbone and the head are called one by one, not through the model's ``forward``; a model sharded with
    FSDP2 (:func:`is_sharded`) therefore runs this wrapped by FSDP's forward hooks (:func:`_sharded_run`), so that
    its root parameters (embeddings, final norm, head) are gathered before and their gradients reduced after.
    """
    run = _sharded_run(model) if is_sharded(model) else functools.partial(_sequence_logprobs, model)
    return run(
        input_ids,
        attention_mask,
        position_ids,
        targets,
        temperature=temperature,
        chunk=chunk,
        with_entropy=with_entropy,
        predict=predict,
        logit_map=logit_map,
    )


def is_sharded(model: Any) -> bool:
    """Whether ``model`` is the root of an FSDP2 sharding (``fully_shard`` made it an ``FSDPModule``)."""
    if not torch.distributed.is_available():
        return False
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _sharded_run(model: Any) -> Callable[..., tuple[torch.Tensor, torch.Tensor | None]]:
    """:func:`_sequence_logprobs` of an FSDP2 root ``model`` between FSDP's pre- and post-forward hooks.

    FSDP2's public way to hook a method other than ``forward`` (``register_fsdp_forward_method``) patches a
    named method of the module; the name is set only for that call and the wrapped method taken back, so the model
    carries nothing of ours afterwards.
    """
    from torch.distributed.fsdp import register_fsdp_forward_method

    def run(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        logp, ent = _sequence_logprobs(model, *args, **kwargs)
        # FSDP2 hooks the outputs of a forward for its pre-backward step and warns about views (an in-place op on
        # one would drop that hook); the (B, T) result is a reshape of the chunks: a copy costs B*T floats
        return _own(logp), (None if ent is None else _own(ent))

    model.__dict__[_FORWARD_NAME] = run
    try:
        register_fsdp_forward_method(model, _FORWARD_NAME)
    finally:
        wrapped = model.__dict__.pop(_FORWARD_NAME)
    return cast(Callable[..., tuple[torch.Tensor, torch.Tensor | None]], wrapped)


def _own(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when it owns its storage, else a copy (not a view of another tensor)."""
    return t.clone() if t._base is not None else t


def _uncached_casts(device: torch.device) -> contextlib.AbstractContextManager:
    """On the CPU under autocast: autocast without its weight cache, for the backbone's forward.

    Autocast keeps the low-precision copy of every weight it casts until its outermost region exits, so that a
    weight used twice is cast once; a backbone uses each weight once per forward, so the cache only keeps a
    second copy of the whole model alive to the end of the forward (SmolLM2: 270 MB), in blocks freshly paged in
    at every step. Uncached, each layer's copies are freed when it is done and the next layer's reuse that heap
    memory. The values are the same casts either way. The head, used once per chunk, stays cached (the nesting
    restores the outer region's setting)."""
    if device.type != "cpu" or not torch.is_autocast_enabled(device.type):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.get_autocast_dtype(device.type), cache_enabled=False)


def _sequence_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    targets: torch.Tensor,
    *,
    temperature: float,
    chunk: int | None,
    with_entropy: bool,
    predict: torch.Tensor | None = None,
    logit_map: LogitMap = IDENTITY,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    body, head = split_model(model)
    with _uncached_casts(input_ids.device):
        out = body(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
    if predict is not None:
        hidden = out.last_hidden_state.flatten(0, 1)[predict]  # (n, H)
    else:
        t = targets.shape[1]
        hidden = out.last_hidden_state[:, -t - 1 : -1]  # (B, T, H): position j predicts token j + 1
    return token_logprobs(
        hidden, targets, head, temperature=temperature, chunk=chunk, logit_map=logit_map, with_entropy=with_entropy
    )
