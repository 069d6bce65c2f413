"""A lean sampling loop for Llama/Qwen2-architecture models, reading the model's own weights.

For small models the per-token cost of a transformers forward pass is mostly Python around the math (decorators,
output records, mask building, cache objects). This module runs the same math as plain tensor operations over a
preallocated KV cache: RMSNorm, q/k/v projections (with biases where the model has them), rotary embeddings
taken from the model's own rotary module (so every rope variant it supports is honoured), grouped-query
``scaled_dot_product_attention`` (for one query position, two matmuls over the cache as it is), SwiGLU MLP,
tied or untied head; bfloat16 weight copies are kept in oneDNN's blocked layout on the CPU (:class:`_Linear`).
The weights are the live parameters (or copies made per generate call), so after an optimizer step the next call
samples from the updated policy.

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
    matmuls (cheaper than SDPA's CPU kernel at these sizes). There the query heads that share a key/value head
    are its rows (``(B, kv heads, heads per kv head, hd)``), so the cached keys and values are read in place, not
    repeated per query head: the same dot products, without copying the cache at every token (in bfloat16 the
    matmul kernel for 3 query rows may round a score's last bit differently than the one for 1 row)."""
    if q.shape[2] > 1 or q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0, enable_gqa=q.shape[1] != k.shape[1])
    b, nh, _, hd = q.shape
    kvh = k.shape[1]
    qg = q.reshape(b, kvh, nh // kvh, hd)  # (B, kvh, rep, hd): query heads h = g * rep + r share kv head g
    s = torch.matmul(qg, k.transpose(-1, -2))  # (B, kvh, rep, L)
    if mask is not None:  # (B, 1, 1, L): every head of a row masks the same keys
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s.float(), dim=-1).to(v.dtype), v).reshape(b, nh, 1, hd)


def _fuse(linears: list[Any], dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One (weight, bias) for several nn.Linear over the same input, outputs concatenated in order; the weights
    cast to ``dtype`` first (the same values as casting the concatenation, with half the bytes concatenated)."""
    w = torch.cat([_cast(lin.weight, dtype) for lin in linears], dim=0)
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
        self,
        layer: Any,
        k: torch.Tensor,
        v: torch.Tensor,
        nh: int,
        kvh: int,
        hd: int,
        dtype: torch.dtype | None,
        prepack: bool = True,
    ) -> None:
        a, mlp = layer.self_attn, layer.mlp
        self.ln1, self.ln2 = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        # matmul weights cast once per decoder (under autocast a cast per token would cost more than the matmul)
        self.qkv = _Linear(*_fuse_qkv(a, nh, kvh, hd), dtype, prepack)
        self.o = _Linear(a.o_proj.weight, a.o_proj.bias, dtype, prepack)
        self.gate_up = _Linear(_fuse([mlp.gate_proj, mlp.up_proj], dtype)[0], None, dtype, prepack)
        self.down = _Linear(mlp.down_proj.weight, None, dtype, prepack)
        self.k, self.v = k, v  # (B, kv heads, max_len, hd) views of the decoder's cache


def _cast(w: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return w if dtype is None or w.dtype == dtype else w.to(dtype)


def _can_prepack(w: torch.Tensor) -> bool:
    """Whether oneDNN can hold ``w`` (bfloat16, on the CPU) in its own blocked layout for matmuls (and is not
    switched off: ``torch.backends.mkldnn.enabled``)."""
    if w.dtype != torch.bfloat16 or w.device.type != "cpu":
        return False
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class _Linear:
    """``x @ w.T + b`` with ``w`` cast once to the decoder's matmul dtype.

    With ``prepack`` and a bfloat16 weight on the CPU, the copy is kept in oneDNN's blocked layout
    (``mkldnn._reorder_linear_weight``) and multiplied by ``mkldnn._linear_pointwise``: ``F.linear`` in bfloat16
    runs the same oneDNN kernel but first reorders the weight on every call, which, with the whole model's weights
    streamed from memory at every token, made it the larger part of a decode step. The results are the same bits
    (the input and bias are cast to bfloat16 as autocast casts them, the bias once here).
    """

    __slots__ = ("w", "b", "packed")

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None, dtype: torch.dtype | None, prepack: bool) -> None:
        w = _cast(w, dtype)
        self.packed = False
        if prepack and _can_prepack(w):
            try:
                self.w = torch.ops.mkldnn._reorder_linear_weight(w.contiguous())
                self.b = b.to(w.dtype) if b is not None else None
                self.packed = True
                return
            except RuntimeError:  # this oneDNN build cannot: the plain bfloat16 copy
                pass
        self.w, self.b = w, b

    @property
    def dtype(self) -> torch.dtype:
        return self.w.dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:  # the input cast as autocast casts it
            return torch.ops.mkldnn._linear_pointwise(x.to(self.w.dtype), self.w, self.b, "none", [], "")
        return F.linear(x, self.w, self.b)


class LeanDecoder:
    """Prefill and one-token decode steps over a static KV cache.

    Args:
        model: a model for which :func:`supports` is True.
        batch: rows to decode.
        max_len: prompt width + max new tokens.
        cache_dtype: dtype of the KV cache (default: the weights'); bfloat16 under bf16 autocast.
        matmul_dtype: dtype of the copies of the matmul weights the decoder multiplies with (default: the weights
            themselves); bfloat16 under bf16 autocast, where it saves a cast of every weight at every token.
        prepack: keep bfloat16 matmul copies on the CPU in oneDNN's blocked layout (:class:`_Linear`; same results).
    """

    def __init__(
        self,
        model: Any,
        batch: int,
        max_len: int,
        cache_dtype: torch.dtype | None = None,
        matmul_dtype: torch.dtype | None = None,
        prepack: bool = True,
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
                _Layer(lyr, self.k[i], self.v[i], self.nh, self.kvh, self.hd, matmul_dtype, prepack)
                for i, lyr in enumerate(model.model.layers)
            ]
            self.head = _Linear(model.lm_head.weight, getattr(model.lm_head, "bias", None), matmul_dtype, prepack)
        self.embed, self.norm_w = model.model.embed_tokens.weight, model.model.norm.weight

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
            qkv = ly.qkv(h).view(b, t, nq + self.kvh, hd).transpose(1, 2).to(dtype)  # (B, heads, t, hd)
            qk = _rotate(qkv[:, :nq], freqs)  # q and k heads rotated together
            ly.k[:, :, s:e] = qk[:, nh:]
            ly.v[:, :, s:e] = qkv[:, nq:]
            o = _attention(qk[:, :nh], ly.k[:, :, :e], ly.v[:, :, :e], mask)
            x = x + ly.o(o.transpose(1, 2).reshape(b, t, -1)).to(x.dtype)
            gate, up = ly.gate_up(_rms(x, ly.ln2, eps)).chunk(2, dim=-1)
            x = x + ly.down(F.silu(gate) * up).to(x.dtype)
        self.len = e
        return x

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(_rms(x[:, -1], self.norm_w, self.eps))

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
