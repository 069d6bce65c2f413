"""A lean sampling loop for Llama/Qwen2-architecture models, reading the model's own weights.

For small models the per-token cost of a transformers forward pass is mostly Python around the math (decorators,
output records, mask building, cache objects). This module runs the same math as plain tensor operations over a
preallocated KV cache: RMSNorm, q/k/v projections (with biases where the model has them), rotary embeddings
taken from the model's own rotary module (so every rope variant it supports is honoured), grouped-query
``scaled_dot_product_attention``, SwiGLU MLP, tied or untied head. The weights are the live parameters, so
after an optimizer step the next call samples from the updated policy with no copy.

:func:`supports` says whether a model qualifies (LlamaForCausalLM or Qwen2ForCausalLM, SiLU, no sliding window,
no peft wrapper); :class:`trainer.rollout.hf.HFRollout` falls back to the transformers forward otherwise.
A test checks its greedy output and logits against transformers. Not covered: other architectures, sliding
windows, quantized weights.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["supports", "LeanDecoder"]

_ARCHS = ("LlamaForCausalLM", "Qwen2ForCausalLM")


def supports(model: Any) -> bool:
    """True when :class:`LeanDecoder` computes exactly what this model's forward computes."""
    if type(model).__name__ not in _ARCHS:
        return False
    cfg = model.config
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "use_sliding_window", False):
        return False
    if getattr(cfg, "mlp_bias", False) or getattr(model, "hf_quantizer", None) is not None:
        return False
    layer = model.model.layers[0]
    return all(hasattr(layer.self_attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    if dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return w * x.to(dtype)


def _rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as one complex product; ``x``'s head dims are interleaved (see :func:`_interleave`)."""
    shape, dtype = x.shape, x.dtype
    xc = torch.view_as_complex(x.float().reshape(*shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).reshape(shape).to(dtype)


def _interleave(hd: int) -> torch.Tensor:
    """The permutation of a head's dims that puts rotate_half's pairs (i, i + hd/2) next to each other.

    Applied to the q and k projections alike it leaves every q.k product unchanged.
    """
    h = hd // 2
    return torch.stack([torch.arange(h), torch.arange(h) + h], dim=1).reshape(-1)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Grouped-query attention of a q already scaled by 1/sqrt(head_dim); one query position is done with two
    matmuls (cheaper than SDPA's CPU kernel at these sizes)."""
    if q.shape[2] > 1 or q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0, enable_gqa=q.shape[1] != k.shape[1])
    if q.shape[1] != k.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s.float(), dim=-1).to(v.dtype), v)


def _fuse(linears: list[Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One (weight, bias) for several nn.Linear over the same input, outputs concatenated in order."""
    w = torch.cat([lin.weight for lin in linears], dim=0)
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        return w, None
    return w, torch.cat(
        [
            b if b is not None else torch.zeros(lin.weight.shape[0], dtype=w.dtype, device=w.device)
            for b, lin in zip(biases, linears, strict=True)
        ]
    )


def _fuse_qkv(attn: Any, nh: int, kvh: int, hd: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """q/k/v as one projection, with q and k head dims interleaved and q pre-scaled by 1/sqrt(head_dim)."""
    w, b = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
    perm = _interleave(hd).to(w.device)
    rows = torch.cat(
        [perm + hd * h for h in range(nh + kvh)] + [torch.arange(kvh * hd, device=w.device) + (nh + kvh) * hd]
    )
    scale = torch.ones(w.shape[0], dtype=w.dtype, device=w.device)
    scale[: nh * hd] = hd**-0.5
    w = w[rows] * scale[:, None]
    return w, (b[rows] * scale if b is not None else None)


class _Layer:
    """One decoder layer's tensors, looked up once per decoder (module attribute access is slow per token)."""

    def __init__(
        self, layer: Any, k: torch.Tensor, v: torch.Tensor, nh: int, kvh: int, hd: int, dtype: torch.dtype | None
    ) -> None:
        a, mlp = layer.self_attn, layer.mlp
        self.ln1, self.ln2 = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        qkv_w, self.qkv_b = _fuse_qkv(a, nh, kvh, hd)
        # matmul weights cast once per decoder (under autocast a cast per token would cost more than the matmul)
        self.qkv_w, self.o_w, self.o_b = _cast(qkv_w, dtype), _cast(a.o_proj.weight, dtype), a.o_proj.bias
        self.gate_up_w = _cast(_fuse([mlp.gate_proj, mlp.up_proj])[0], dtype)
        self.down_w = _cast(mlp.down_proj.weight, dtype)
        self.k, self.v = k, v  # (B, kv heads, max_len, hd) views of the decoder's cache


def _cast(w: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return w if dtype is None or w.dtype == dtype else w.to(dtype)


class LeanDecoder:
    """Prefill and one-token decode steps over a static KV cache.

    Args:
        model: a model for which :func:`supports` is True.
        batch: rows to decode.
        max_len: prompt width + max new tokens.
        cache_dtype: dtype of the KV cache (default: the weights'); bfloat16 under bf16 autocast.
        matmul_dtype: dtype of the copies of the matmul weights the decoder multiplies with (default: the weights
            themselves); bfloat16 under bf16 autocast, where it saves a cast of every weight at every token.
    """

    def __init__(
        self,
        model: Any,
        batch: int,
        max_len: int,
        cache_dtype: torch.dtype | None = None,
        matmul_dtype: torch.dtype | None = None,
    ) -> None:
        self.m, cfg = model, model.config
        self.eps = cfg.rms_norm_eps
        self.nh, self.kvh = cfg.num_attention_heads, cfg.num_key_value_heads
        self.hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.nh
        p = next(model.parameters())
        n_layers = len(model.model.layers)
        self.k = torch.zeros(
            (n_layers, batch, self.kvh, max_len, self.hd), dtype=cache_dtype or p.dtype, device=p.device
        )
        self.v = torch.zeros_like(self.k)
        self.key_ok = torch.zeros((batch, max_len), dtype=torch.bool, device=p.device)
        pos = torch.arange(max_len, device=p.device)[None]
        cos, sin = model.model.rotary_emb(self.k[0, :1, 0].to(p.dtype), pos)  # (1, max_len, hd), halves repeated
        h = self.hd // 2
        self.freqs = torch.complex(cos[0, :, :h].float(), sin[0, :, :h].float())  # (max_len, hd/2)
        self.len = 0
        # q/k/v and gate/up fused into one matmul each; rebuilt per decoder, i.e. per generate call, so the
        # concatenated copies always hold the current weights
        with torch.no_grad():
            self.layers = [
                _Layer(lyr, self.k[i], self.v[i], self.nh, self.kvh, self.hd, matmul_dtype)
                for i, lyr in enumerate(model.model.layers)
            ]
            self.head_w = _cast(model.lm_head.weight, matmul_dtype)
        self.embed, self.norm_w = model.model.embed_tokens.weight, model.model.norm.weight
        self.head_b = getattr(model.lm_head, "bias", None)

    def _layers(self, x: torch.Tensor, pos: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        s, e = self.len, self.len + t
        if pos is None:  # no padding: every row's positions are its cache slots s..e-1
            freqs = self.freqs[s:e][None, None]  # (1, 1, t, hd/2)
        else:
            freqs = self.freqs[pos][:, None]  # (B, 1, t, hd/2)
        nh, nq, hd, eps, dtype = self.nh, self.nh + self.kvh, self.hd, self.eps, self.k.dtype
        for ly in self.layers:
            h = _rms(x, ly.ln1, eps)
            qkv = (
                F.linear(h, ly.qkv_w, ly.qkv_b).view(b, t, nq + self.kvh, hd).transpose(1, 2).to(dtype)
            )  # (B, heads, t, hd)
            qk = _rotate(qkv[:, :nq], freqs)  # q and k heads rotated together
            ly.k[:, :, s:e] = qk[:, nh:]
            ly.v[:, :, s:e] = qkv[:, nq:]
            o = _attention(qk[:, :nh], ly.k[:, :, :e], ly.v[:, :, :e], mask)
            x = x + F.linear(o.transpose(1, 2).reshape(b, t, -1), ly.o_w, ly.o_b).to(x.dtype)
            gate, up = F.linear(_rms(x, ly.ln2, eps), ly.gate_up_w).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, ly.down_w).to(x.dtype)
        self.len = e
        return x

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(_rms(x[:, -1], self.norm_w, self.eps), self.head_w, self.head_b)

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, P) left-padded ids and mask -> (B, V) logits of the next token."""
        b, t = ids.shape
        self.key_ok[:, :t] = mask.bool()
        self.padded = not bool(mask.all())
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        self._next_pos = pos[:, -1] + 1
        causal = torch.ones((t, t), dtype=torch.bool, device=ids.device).tril()
        eye = torch.eye(t, dtype=torch.bool, device=ids.device)
        attn = (causal[None] & self.key_ok[:, None, :t]) | eye[None]  # padded rows see themselves: no NaN
        x = self.embed[ids]
        if self.padded:
            return self._head(self._layers(x, pos, attn[:, None]))
        return self._head(self._layers(x, None, causal))

    @torch.no_grad()
    def repeat_rows(self, n: int) -> None:
        """After a prefill: every row becomes ``n`` adjacent rows (row i -> rows i*n .. i*n+n-1), cache included.

        A group's completions share their prompt, so the prompt is prefilled once per group and copied, instead of
        once per completion (for SmolLM2's prompts and 24 tokens that prefill was most of the sampling FLOPs).
        """
        if n == 1:
            return
        self.k = self.k.repeat_interleave(n, dim=1)
        self.v = self.v.repeat_interleave(n, dim=1)
        self.key_ok = self.key_ok.repeat_interleave(n, dim=0)
        self._next_pos = self._next_pos.repeat_interleave(n, dim=0)
        for i, ly in enumerate(self.layers):
            ly.k, ly.v = self.k[i], self.v[i]

    @torch.no_grad()
    def step(self, tok: torch.Tensor) -> torch.Tensor:
        """(B,) the last sampled tokens -> (B, V) logits of the next token."""
        attn = pos = None  # no padding: every key counts and positions equal cache slots
        if self.padded:
            self.key_ok[:, self.len] = True
            attn = self.key_ok[:, None, None, : self.len + 1]
            pos = self._next_pos[:, None]
            self._next_pos = self._next_pos + 1
        x = self.embed[tok][:, None]
        return self._head(self._layers(x, pos, attn))
