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
tokens, and the plain layout is kept; :func:`supported` says whether a model's attention takes a 4D mask, and
:func:`choose` packs a micro-batch only when its packed length is within the model's attention windows and has
matched the plain pass: every packed length beyond those already checked is checked again (:class:`PackState`).

Not covered: attention implementations without 4D masks (flash-attention 2, flex, paged): those models always run
the plain layout. Rows of a micro-batch share a prompt only when they are consecutive and their prompt tokens are
equal (the rollout lays each group out that way); nothing else is deduplicated.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Packed",
    "PackState",
    "segments",
    "layout",
    "cost_weights",
    "pays",
    "packed_length",
    "supported",
    "windows",
    "choose",
    "attention_mask_for",
]

log = logging.getLogger(__name__)

#: Attention implementations whose mask argument may be a ready 4D mask (bool for SDPA, additive for eager).
MASKED_ATTENTION = ("sdpa", "eager")


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
    packed = packed_length(prompt_lengths, completion_lengths, runs)
    return len(runs) * (packed * lin + packed**2 * att) < n * (plain * lin + plain**2 * att)


def supported(model: Any) -> bool:
    """Whether ``model``'s attention takes a ready 4D mask (SDPA or eager). Windows are a matter of length: see
    :func:`windows`."""
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_attn_implementation", None) in MASKED_ATTENTION


def windows(config: Any) -> list[int]:
    """Every attention window ``config`` declares and uses: sliding (``sliding_window``, unless switched off or no
    layer slides), local (GPT-Neo's ``window_size`` on ``local`` layers), chunked (Llama4's
    ``attention_chunk_size``). A packed sequence no longer than each of them is attended as its plain rows are:
    neither the window (if the model applies it by position in the packed sequence) nor our mask (if it replaces the
    window) can then drop a key the plain pass keeps. Windows a config does not declare are caught by
    :func:`choose`'s per-length check.
    """
    found: list[int] = []
    kinds = [str(k) for k in (getattr(config, "layer_types", None) or [])]
    kinds += [str(k) for k in (getattr(config, "attention_layers", None) or [])]
    sliding = getattr(config, "sliding_window", None)
    if isinstance(sliding, int) and sliding > 0 and getattr(config, "use_sliding_window", True) is not False:
        if not kinds or any("sliding" in k or "local" in k for k in kinds):
            found.append(sliding)
    local = getattr(config, "window_size", None)
    if isinstance(local, int) and local > 0 and any("local" in k for k in kinds):
        found.append(local)
    chunked = getattr(config, "attention_chunk_size", None)
    if isinstance(chunked, int) and chunked > 0 and (not kinds or any("chunk" in k for k in kinds)):
        found.append(chunked)
    return found


@dataclass
class PackState:
    """Which packed lengths have matched one model's plain pass, per autocast mode (``"float32"``, ``"bfloat16"``).

    ``checked[mode]``: packed sequences up to this many positions matched; ``failed[mode]``: the shortest length
    that did not (no packing at or beyond it; 0 when the first check failed: a model that does not follow the mask
    at one length is not tried at others). Lengths between the two are checked when they first occur.
    """

    checked: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)

    def verdict(self, mode: str, length: int) -> bool | None:
        """True: packs; False: runs plain; None: not yet known, check it."""
        if length >= self.failed.get(mode, math.inf):
            return False
        return True if length <= self.checked.get(mode, 0) else None

    def record(self, mode: str, length: int, ok: bool) -> None:
        """Record a check of ``length``; a failure before any length has matched ends packing in ``mode``."""
        if ok:
            self.checked[mode] = max(self.checked.get(mode, 0), length)
        else:
            self.failed[mode] = min(self.failed.get(mode, length), length) if self.checked.get(mode) else 0


#: A packed pass matches when its distance to the float32 plain pass is within this factor of the plain pass's
#: own distance (0 without autocast), plus ``GAP_FLOOR`` nats.
GAP_FACTOR = 2.0
GAP_FLOOR = 1e-3


def packed_length(prompt_lengths: list[int], completion_lengths: list[int], runs: list[tuple[int, int]]) -> int:
    """Positions of the longest packed sequence of these rows."""
    return max(prompt_lengths[a] + sum(completion_lengths[a:b]) for a, b in runs)


def choose(
    model: Any,
    state: PackState,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    lengths: torch.Tensor,
    *,
    force: bool,
    sharded: bool = False,
    gap: Callable[[list[tuple[int, int]]], tuple[float, float]],
) -> list[tuple[int, int]] | None:
    """The rows' :func:`segments` when this micro-batch is to be packed, else None.

    It is packed when the model's attention takes a 4D mask, a prompt is shared, it :func:`pays` (or ``force``),
    the packed length is within every one of the model's :func:`windows`, and that length has matched the plain
    pass (``state``). A length beyond those already checked is checked on this micro-batch: ``gap(runs)`` gives
    (packed, plain) largest distances to the float32 plain pass; the packed pass matches when its distance is at
    most ``GAP_FACTOR`` times the plain pass's own (bf16 autocast) plus ``GAP_FLOOR``. A model sharded with FSDP
    (``sharded``) is not checked (the check's extra forward passes are collectives another rank may not run): it
    packs only when forced, and only within its windows.
    """
    if not supported(model):
        return None
    runs = segments(prompt_ids, prompt_mask)
    p_len, c_len = [int(x) for x in prompt_mask.sum(1).tolist()], [int(x) for x in lengths.tolist()]
    if all(b - a < 2 for a, b in runs) or min(p_len) == 0:
        return None
    if not force and not pays(p_len, c_len, runs, cost_weights(model.config)):
        return None
    length = packed_length(p_len, c_len, runs)
    if length > min(windows(model.config), default=length):
        return None
    if sharded:
        return runs if force else None
    device = next(model.parameters()).device.type
    mode = (
        str(torch.get_autocast_dtype(device)).removeprefix("torch.") if torch.is_autocast_enabled(device) else "float32"
    )
    known = state.verdict(mode, length)
    if known is None:
        known = _check(model, mode, length, runs, gap)
        state.record(mode, length, known)
    return runs if known else None


def _check(
    model: Any,
    mode: str,
    length: int,
    runs: list[tuple[int, int]],
    gap: Callable[[list[tuple[int, int]]], tuple[float, float]],
) -> bool:
    """Whether the packed pass of ``runs`` matches the plain one (see :func:`choose`), with a warning when not."""
    name = type(model).__name__
    try:
        packed, plain = gap(runs)
    except Exception as e:  # noqa: BLE001 - any failure of the packed pass means: do not pack at this length
        log.warning(
            "shared-prompt packing is off for %s from %d positions: the packed pass failed (%s)", name, length, e
        )
        return False
    tol = GAP_FACTOR * plain + GAP_FLOOR
    if packed <= tol:
        log.debug(
            "%s: packed sequences of %d positions match the plain pass (%.3g, tolerance %.3g)",
            name,
            length,
            packed,
            tol,
        )
        return True
    log.warning(
        "shared-prompt packing is off for %s from %d positions (%s): its packed log-probs are %.3g from the float32 "
        "plain pass (the plain %s pass: %.3g; tolerance %.3g); its attention or positions do not follow the 4D mask",
        name,
        length,
        mode,
        packed,
        mode,
        plain,
        tol,
    )
    return False


def attention_mask_for(model: Any, allowed: torch.Tensor) -> torch.Tensor:
    """``allowed`` as the model's attention takes it: bool for SDPA, additive float (0 or the dtype's minimum) for
    eager attention."""
    if model.config._attn_implementation == "sdpa":
        return allowed
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
