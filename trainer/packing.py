"""Shared-prompt packing: the completions of one prompt in one sequence, so the prompt is computed once.

GRPO samples every prompt G times. A plain update runs each completion row as ``[prompt, completion]``, so each
prompt's tokens go through the model G times. Here the rows of a micro-batch that share a prompt are packed into
one sequence ``[prompt, completion 1, completion 2, ...]`` with a 4D attention mask under which every completion
sees the prompt and its own earlier tokens and nothing else, and position ids that restart at the prompt's length
for every completion. A completion token's log-prob is read at the position that predicts it (the prompt's last
token for a completion's first token). That is the plain forward pass's function, up to the order of float sums,
without G - 1 copies of the prompt's compute and activations.

:func:`layout` builds the packed ids, positions, mask and read-out indices (pure, no model); :func:`pays` compares
the two layouts' cost (linear FLOPs per token plus attention FLOPs per query-key pair, :func:`cost_weights`):
with long completions, the packed sequence's attention, quadratic in its length, outweighs the saved prompt
tokens, and the plain layout is kept; :func:`supported` says whether a model's attention takes a 4D mask.

Not covered: attention implementations without 4D masks (flash-attention 2, flex, paged): those models always run
the plain layout. Rows of a micro-batch share a prompt only when they are consecutive and their prompt tokens are
equal (the rollout lays each group out that way); nothing else is deduplicated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainer.logprobs import SHARDED_FORWARD

__all__ = ["Packed", "segments", "layout", "cost_weights", "pays", "supported", "choose", "attention_mask_for"]

log = logging.getLogger(__name__)

#: Attention implementations whose mask argument may be a ready 4D mask (bool for SDPA, additive for eager).
MASKED_ATTENTION = ("sdpa", "eager")

#: Where a model keeps the verdict of its first packed pass against the plain one (see :func:`choose`).
_CHECKED = "_harness_packing_checked"


@dataclass(frozen=True)
class Packed:
    """One micro-batch packed by prompt: ``S`` sequences of ``L`` positions, ``n`` completion tokens to score.

    Attributes:
        input_ids: (S, L) token ids (0 after a sequence's end).
        position_ids: (S, L) positions: 0.. over the prompt, the prompt's length.. again for every completion.
        allowed: (S, 1, L, L) bool, True where a query position may attend to a key position.
        predict: (n,) index into the flattened (S * L) positions of the one that predicts each target.
        targets: (n,) the completion tokens.
        rows: (n,) the micro-batch row of each target.
        cols: (n,) the column of each target in its row's completion.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    allowed: torch.Tensor
    predict: torch.Tensor
    targets: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor


def segments(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> list[tuple[int, int]]:
    """(start, stop) of each run of consecutive rows whose prompts (the tokens under the mask) are equal."""
    out: list[tuple[int, int]] = []
    prev: list[int] | None = None
    for i in range(int(prompt_ids.shape[0])):
        toks = prompt_ids[i][prompt_mask[i].bool()].tolist()
        if prev is not None and toks == prev:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
        prev = toks
    return out


def layout(
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    lengths: torch.Tensor,
    runs: list[tuple[int, int]] | None = None,
) -> Packed:
    """Pack rows with equal prompts; ``lengths`` (B,) are the completions' real lengths, ``runs`` the rows'
    :func:`segments` when the caller has them already.

    Every prompt must have at least one token (its last one predicts the completion's first).
    """
    seqs: list[tuple[list[int], list[int], list[int]]] = []  # per sequence: ids, positions, segment ids
    predict: list[tuple[int, int]] = []  # (sequence, position) per target
    targets: list[int] = []
    rows: list[int] = []
    cols: list[int] = []
    lens = [int(x) for x in lengths.tolist()]
    for a, b in runs if runs is not None else segments(prompt_ids, prompt_mask):
        prompt = prompt_ids[a][prompt_mask[a].bool()].tolist()
        p = len(prompt)
        if p == 0:
            raise ValueError(f"row {a}: an empty prompt cannot be packed (nothing predicts the first token)")
        s = len(seqs)
        ids, pos, seg = list(prompt), list(range(p)), [0] * p
        for j, row in enumerate(range(a, b)):
            comp = completion_ids[row, : lens[row]].tolist()
            start = len(ids)
            for t, tok in enumerate(comp):
                predict.append((s, p - 1 if t == 0 else start + t - 1))
                targets.append(tok)
                rows.append(row)
                cols.append(t)
            ids += comp
            pos += range(p, p + len(comp))
            seg += [j + 1] * len(comp)
        seqs.append((ids, pos, seg))
    width = max(len(x[0]) for x in seqs)
    ids_t = torch.zeros((len(seqs), width), dtype=torch.long)
    pos_t = torch.zeros((len(seqs), width), dtype=torch.long)
    seg_t = torch.full((len(seqs), width), -1, dtype=torch.long)  # -1: padding after the sequence's end
    for s, (ids, pos, seg) in enumerate(seqs):
        ids_t[s, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        pos_t[s, : len(pos)] = torch.tensor(pos, dtype=torch.long)
        seg_t[s, : len(seg)] = torch.tensor(seg, dtype=torch.long)
    return Packed(
        input_ids=ids_t,
        position_ids=pos_t,
        allowed=_allowed(seg_t),
        predict=torch.tensor([s * width + i for s, i in predict], dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        rows=torch.tensor(rows, dtype=torch.long),
        cols=torch.tensor(cols, dtype=torch.long),
    )


def _allowed(seg: torch.Tensor) -> torch.Tensor:
    """(S, 1, L, L): causal, and a key counts when it is in the prompt (segment 0) or in the query's own
    completion; padding positions see only themselves (a row with no key at all would give NaN)."""
    width = seg.shape[1]
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    q, k = seg[:, :, None], seg[:, None, :]
    ok = causal[None] & (q >= 0) & (k >= 0) & ((k == 0) | (k == q))
    ok |= torch.eye(width, dtype=torch.bool)[None] & (q < 0)
    return ok[:, None]


def cost_weights(config: Any) -> tuple[float, float]:
    """(FLOPs per token per layer in the linear layers, FLOPs per query-key pair per layer in attention)."""
    h = int(getattr(config, "hidden_size", 0) or 0)
    if not h:
        return 1.0, 0.0
    nh = int(getattr(config, "num_attention_heads", 1) or 1)
    kvh = int(getattr(config, "num_key_value_heads", None) or nh)
    hd = int(getattr(config, "head_dim", None) or h // nh)
    inter = int(getattr(config, "intermediate_size", None) or 4 * h)
    linear = 2.0 * (2 * h * nh * hd + 2 * h * kvh * hd + 3 * h * inter)
    return linear, 4.0 * nh * hd


def pays(
    prompt_lengths: list[int], completion_lengths: list[int], runs: list[tuple[int, int]], weights: tuple[float, float]
) -> bool:
    """Whether the packed layout of these rows costs less than the plain one (padded to the longest prompt and
    completion, as the plain forward pass runs it)."""
    if all(b - a < 2 for a, b in runs):
        return False  # no prompt is shared
    lin, att = weights
    n = len(completion_lengths)
    plain = max(prompt_lengths) + max(completion_lengths)
    packed = max(prompt_lengths[a] + sum(completion_lengths[a:b]) for a, b in runs)
    return len(runs) * (packed * lin + packed**2 * att) < n * (plain * lin + plain**2 * att)


def supported(model: Any) -> bool:
    """Whether ``model``'s attention takes a ready 4D mask, and the mask is all there is to it (no sliding
    window, which a ready mask would override)."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "_attn_implementation", None) not in MASKED_ATTENTION:
        return False
    return not (getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True))


def choose(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    lengths: torch.Tensor,
    *,
    force: bool,
    gap: Callable[[list[tuple[int, int]]], float],
) -> list[tuple[int, int]] | None:
    """The rows' :func:`segments` when this micro-batch is to be packed (the model supports it, a prompt is
    shared, and it :func:`pays`, or ``force``), else None. A model sharded with FSDP packs only when forced.

    The first time a model would pack, ``gap(runs)`` (the largest log-prob difference between the packed and the plain
    pass on this micro-batch) must be within 1e-3 (0.05 under autocast): an architecture that builds positions or
    masks of its own (ALiBi, a sliding window) fails that and is never packed, with a warning. The verdict is kept
    on the model. A sharded model is not checked (the check's extra forward passes are collectives, and another
    rank's micro-batch may not call for them), so it packs only when forced.
    """
    if not supported(model) or model.__dict__.get(_CHECKED) is False:
        return None
    runs = segments(prompt_ids, prompt_mask)
    p_len, c_len = [int(x) for x in prompt_mask.sum(1).tolist()], [int(x) for x in lengths.tolist()]
    if all(b - a < 2 for a, b in runs) or min(p_len) == 0:
        return None
    if not force and not pays(p_len, c_len, runs, cost_weights(model.config)):
        return None
    if model.__dict__.get(_CHECKED) is None:
        if SHARDED_FORWARD in model.__dict__:
            return runs if force else None  # the check's extra passes are collectives other ranks might not run
        device = next(model.parameters()).device.type
        tol = 0.05 if torch.is_autocast_enabled(device) else 1e-3
        try:
            diff = gap(runs)
        except Exception as e:  # noqa: BLE001 - any failure of the packed pass means: do not pack this model
            log.warning("shared-prompt packing is off for %s: the packed pass failed (%s)", type(model).__name__, e)
            diff = float("inf")
        ok = diff <= tol
        if not ok and diff != float("inf"):
            log.warning(
                "shared-prompt packing is off for %s: its packed log-probs differ from the plain pass by %.3g "
                "(more than %g); its attention or positions do not follow the 4D mask",
                type(model).__name__,
                diff,
                tol,
            )
        model.__dict__[_CHECKED] = ok
    return runs if model.__dict__[_CHECKED] else None


def attention_mask_for(model: Any, allowed: torch.Tensor) -> torch.Tensor:
    """``allowed`` as the model's attention takes it: bool for SDPA, additive float (0 or the dtype's minimum) for
    eager attention."""
    if model.config._attn_implementation == "sdpa":
        return allowed
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
