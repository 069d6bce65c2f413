"""What a model's own forward does around its output head, found by probing it, so our chunked head matches it.

The trainer computes log-probs from the backbone's last hidden states through the output head, chunk by chunk
(:mod:`trainer.logprobs`), not through the model's ``forward``. Whatever that forward does between the backbone
and the logits (Granite divides the logits by ``logits_scaling``, Cohere multiplies them by ``logit_scale``,
Gemma2 soft-caps them with a tanh, MiniCPM3 scales the hidden states before the head) must be done by us too.
No list of attribute names is kept for that: :func:`probe_logit_map` runs the model's own forward once on a short
probe input with hooks on the backbone and the head, and derives a :class:`~trainer.logprobs.LogitMap`:

1. the head's input against the backbone's output: equal, or a scalar multiple of it (``input_scale``);
2. the head's output ``x`` against the forward's logits ``y``, over a range of ``|x|`` from 1e-3 to 1e4 (the
   head's input is multiplied per position, so the map is seen far beyond a random-init model's small logits):
   a scale ``a`` from the smallest row (where any tanh cap is linear) and a cap ``c`` solved from the largest
   element, ``y = c * tanh(a * x / c)``;
3. the derived map is checked on every probed row, in log-softmax (a constant shift of a row is harmless).

A model whose forward does anything else (a per-token bias after the head, a norm outside the backbone, a head
never called) is refused with :class:`UnsupportedModelError`, naming its model type and what did not match.

:class:`PolicyForward` holds one model with its probed map and its :class:`trainer.packing.PackState`: the state
the update keeps about a model lives there, not on the model.

Not covered: maps outside the family above (they are refused, not approximated).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.errors import ConfigError
from trainer.logprobs import LogitMap, is_sharded, split_model
from trainer.packing import PackState

__all__ = ["UnsupportedModelError", "probe_logit_map", "PolicyForward"]

#: Probe length (positions); the head's output magnitude is spread over 1e-3 .. 1e4 across them.
PROBE_LEN = 16
PROBE_RANGE = (1e-3, 1e4)


class UnsupportedModelError(ConfigError):
    """The trainer cannot compute this model's own log-probs; the message names the model type and why."""


def _model_type(model: Any) -> str:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    mt = getattr(getattr(base, "config", None), "model_type", None)
    return f"{mt} ({type(base).__name__})" if mt else type(base).__name__


@dataclass
class _Seen:
    hidden: torch.Tensor | None = None  # the backbone's last hidden states (1, L, H)
    head_in: torch.Tensor | None = None  # what the head received (1, L, H), before any amplification
    head_out: torch.Tensor | None = None  # what the head returned (1, L, V)
    eps: float = 0.0  # machine epsilon of the head's output dtype


@contextlib.contextmanager
def _hooks(body: Any, head: Any, seen: _Seen, amplify: torch.Tensor | None) -> Iterator[None]:
    """Record the backbone's output and the head's input/output; multiply the head's input by ``amplify`` (L,)."""

    def on_body(_m: Any, _a: Any, out: Any) -> None:
        hs = getattr(out, "last_hidden_state", None)
        seen.hidden = (hs if hs is not None else out[0]).detach().float()

    def before_head(_m: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        seen.head_in = args[0].detach().float()
        if amplify is None:
            return None
        return (args[0] * amplify.to(args[0].dtype)[:, None], *args[1:])

    def on_head(_m: Any, _a: Any, out: torch.Tensor) -> None:
        seen.head_out = out.detach().float()
        seen.eps = torch.finfo(out.dtype).eps

    handles = [
        body.register_forward_hook(on_body),
        head.register_forward_pre_hook(before_head),
        head.register_forward_hook(on_head),
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _run(model: Any, ids: torch.Tensor, amplify: torch.Tensor | None) -> tuple[_Seen, torch.Tensor]:
    body, head = split_model(model)
    seen = _Seen()
    with _hooks(body, head, seen, amplify), torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.detach().float()
    return seen, logits


def probe_logit_map(model: Any) -> LogitMap:
    """The :class:`LogitMap` of ``model``'s own forward (see the module docstring); raises
    :class:`UnsupportedModelError` when its logits are not a map of that family of its head's output.

    Runs two forward passes of ``PROBE_LEN`` tokens in eval mode, without autocast (the mode is restored).
    """
    name = _model_type(model)
    _, head = split_model(model)
    vocab = int(getattr(head, "out_features", 0) or getattr(model.config, "vocab_size", 0) or 2)
    device = next(model.parameters()).device
    ids = torch.randint(0, vocab, (1, PROBE_LEN), generator=torch.Generator().manual_seed(0)).to(device)
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(device.type, enabled=False):
            seen, y0 = _run(model, ids, None)
            if seen.hidden is None or seen.head_in is None or seen.head_out is None:
                raise UnsupportedModelError(
                    f"{name}: its forward does not run the decoder and the output head the trainer calls "
                    "(get_decoder() / get_output_embeddings()); its log-probs cannot be computed chunk by chunk"
                )
            input_scale = _input_scale(name, seen.hidden, seen.head_in)
            x0 = seen.head_out
            target = torch.logspace(math.log10(PROBE_RANGE[0]), math.log10(PROBE_RANGE[1]), PROBE_LEN)
            amplify = (target.to(device) / x0[0].abs().amax(-1).clamp_min(1e-12)).float()
            seen1, y1 = _run(model, ids, amplify)
    finally:
        model.train(was_training)
    assert seen1.head_out is not None
    x1 = seen1.head_out
    if x0.shape != y0.shape:
        raise UnsupportedModelError(
            f"{name}: its logits {tuple(y0.shape)} are not the output head's {tuple(x0.shape)}; not supported"
        )
    scale, cap = _fit(x1[0].double(), y1[0].double(), seen1.eps)
    found = LogitMap(input_scale=input_scale, scale=scale, softcap=cap)
    _verify(name, found, [(x0[0], y0[0]), (x1[0], y1[0])], seen.eps)
    return found


def _input_scale(name: str, hidden: torch.Tensor, head_in: torch.Tensor) -> float:
    """``s`` with ``head_in == s * hidden`` (1.0 when equal); refuses any other transform."""
    if hidden.shape != head_in.shape:
        raise UnsupportedModelError(
            f"{name}: the output head receives {tuple(head_in.shape)}, not the decoder's last hidden states "
            f"{tuple(hidden.shape)}; not supported"
        )
    if torch.equal(hidden, head_in):
        return 1.0
    s = float((head_in * hidden).sum() / (hidden * hidden).sum().clamp_min(1e-30))
    off = float((head_in - s * hidden).abs().max())
    if off > 1e-5 * (1.0 + float(head_in.abs().max())):
        raise UnsupportedModelError(
            f"{name}: the forward transforms the decoder's hidden states before the output head by more than a "
            f"scale (off by {off:.3g} after the best scale {s:.4g}); not supported"
        )
    return s


def _fit(x: torch.Tensor, y: torch.Tensor, eps: float) -> tuple[float, float | None]:
    """(a, c) of ``y = c * tanh(a * x / c)`` (c None: ``y = a * x``) from rows of growing ``|x|`` (float64); ``a``
    within a few roundings of 1 (``eps`` of the logits' dtype, e.g. a bf16 forward under FSDP) is 1."""
    small = x[0] - x[0].mean()
    a = float((small * (y[0] - y[0].mean())).sum() / (small * small).sum().clamp_min(1e-300))
    if abs(a - 1.0) <= max(1e-6, 2 * eps):
        a = 1.0
    i = int(x[-1].abs().argmax())
    ax, yy = abs(a * float(x[-1, i])), abs(float(y[-1, i]))
    if yy == 0.0 or yy >= ax * (1.0 - 1e-5):
        return a, None  # linear over the whole probed range (or no cap fits: the check refuses it)
    lo, hi = yy, 1e12  # c * tanh(ax / c) grows with c, from yy's lower bound (saturation) to ax
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mid * math.tanh(ax / mid) < yy else (lo, mid)
    return a, math.sqrt(lo * hi)


def _verify(name: str, found: LogitMap, rows: list[tuple[torch.Tensor, torch.Tensor]], eps: float) -> None:
    """Refuse unless ``found`` maps every probed head output to the forward's log-softmax, within 100 roundings
    of the logits' dtype at each row's magnitude (float32: 1.2e-5 * (1 + max |logit|))."""
    for x, y in rows:
        want = torch.log_softmax(y.double(), -1)
        got = torch.log_softmax(found.apply(x.double()), -1)
        d = (got - want).abs().amax(-1)  # (L,)
        bound = 100 * eps * (1.0 + y.abs().amax(-1).double())
        if bool((d > bound).any()):
            x0, y0 = rows[0]
            plain = torch.log_softmax(x0.double(), -1) - torch.log_softmax(y0.double(), -1)
            raise UnsupportedModelError(
                f"{name}: the forward transforms the output head's logits in a way the trainer's head does not "
                f"reproduce: the head's own log-probs are {float(plain.abs().max()):.3g} nats from the forward's on "
                "a probe, and no scale or tanh cap of its output (or scale of its input) explains that; "
                "not supported"
            )


@dataclass
class PolicyForward:
    """A model the update computes log-probs of, with what was learned about it: the map around its head
    (probed once, :func:`probe_logit_map`) and which packed shapes match its plain pass (:class:`PackState`).

    Build it with :meth:`of` where the model is loaded; the loop keeps one for the policy and one for the
    reference model.
    """

    model: Any
    logit_map: LogitMap
    packing: PackState = field(default_factory=PackState)

    @property
    def sharded(self) -> bool:
        """Whether the model is sharded with FSDP2 (then packing is not checked: see :func:`trainer.packing.choose`)."""
        return is_sharded(self.model)

    @classmethod
    def of(cls, model: Any) -> PolicyForward:
        """Probe ``model`` (raises :class:`UnsupportedModelError` when its logits cannot be matched)."""
        return cls(model, probe_logit_map(model))
