"""The arithmetic of a training step, counted from the model config and the tokens the model actually processed,
and the machine's matmul peak, so a step time can be read as a multiple of its floor (step FLOPs / peak FLOP/s).

:class:`FlopCounter` records every forward of a causal LM: calls of its input-embedding module (the transformers
forward, TRL's generation and our update) and calls of our lean decoder (:mod:`trainer.rollout.fast_decode`,
which reads the weights directly). A token costs ``2 * matmul_params`` FLOPs in a forward and three times that
under autograd (forward + backward); attention adds ``4 * layers * hidden * context`` per token (causal: half the
square for a full forward). Padding is counted (it is processed); gradient-checkpointing recomputation is not (the
usual model-FLOPs convention), nor are norms, rotary embeddings, softmax, sampling and the optimizer step.

:func:`matmul_peak` is the best of a few runs of a 1024x576 @ 576x1536 matmul (SmolLM2's MLP shape), in float32 and
in bfloat16, with the thread count in force. On a loaded machine it reads low, which makes the floor
look nearer than it is on an idle one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["FlopCounter", "matmul_params", "matmul_peak"]


def matmul_params(config: Any) -> int:
    """Weights that take part in a matmul per token: attention and MLP projections of every layer, and the head."""
    d, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    inter = getattr(config, "intermediate_size", None) or 4 * d
    attn = d * heads * head_dim * 2 + d * kv * head_dim * 2  # q, o and k, v
    mlp = 3 * d * inter  # gate, up, down (SwiGLU)
    return layers * (attn + mlp) + d * vocab


@dataclass
class FlopCounter:
    """FLOPs of every forward of one model, split into under-autograd (update) and no-grad (rollout, old policy)."""

    config: Any
    train_flops: float = 0.0
    infer_flops: float = 0.0
    train_tokens: int = 0
    infer_tokens: int = 0
    _ctx: int = 0
    _handles: list[Any] = field(default_factory=list)

    def record(self, batch: int, length: int, grad: bool) -> None:
        """One forward over ``batch`` rows of ``length`` new tokens (``length`` 1 continues a cached context)."""
        cfg = self.config
        per_token = 2 * matmul_params(cfg)
        att = 4 * cfg.num_hidden_layers * cfg.hidden_size
        if length > 1:
            self._ctx = length
            flops = batch * length * per_token + att * batch * length * length / 2
        else:
            self._ctx += 1
            flops = batch * (per_token + att * self._ctx)
        if grad:
            self.train_flops += 3 * flops
            self.train_tokens += batch * length
        else:
            self.infer_flops += flops
            self.infer_tokens += batch * length

    @property
    def total(self) -> float:
        return self.train_flops + self.infer_flops

    def install(self) -> FlopCounter:
        """Count every input-embedding call of a model with this vocabulary, and our lean decoder's steps."""
        vocab = self.config.vocab_size

        def on_embed(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
            if isinstance(module, torch.nn.Embedding) and module.num_embeddings == vocab and args:
                ids = args[0]
                if ids.dim() == 2:
                    self.record(ids.shape[0], ids.shape[1], torch.is_grad_enabled())

        self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(on_embed))
        try:
            from trainer.rollout.fast_decode import LeanDecoder
        except ImportError:  # TRL's child does not need it
            return self
        prefill, step = LeanDecoder.prefill, LeanDecoder.step

        def counted_prefill(dec: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            self.record(ids.shape[0], ids.shape[1], False)
            return prefill(dec, ids, mask)

        def counted_step(dec: Any, tok: torch.Tensor) -> torch.Tensor:
            self.record(tok.shape[0], 1, False)
            return step(dec, tok)

        LeanDecoder.prefill, LeanDecoder.step = counted_prefill, counted_step  # type: ignore[method-assign]
        return self


def _best_seconds(fn: Any, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_peak(reps: int = 20) -> dict[str, float]:
    """FLOP/s of a 1024x576 @ 576x1536 matmul in float32 and in bfloat16 (best of ``reps``)."""
    a, b = torch.randn(1024, 576), torch.randn(576, 1536)
    a16, b16 = a.bfloat16(), b.bfloat16()
    flops = 2 * 1024 * 576 * 1536
    return {
        "fp32": flops / _best_seconds(lambda: a @ b, reps),
        "bf16": flops / _best_seconds(lambda: a16 @ b16, reps),
    }
