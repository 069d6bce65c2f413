"""Transformers rollout backend: batched sampling with the policy model itself, on CPU or GPU.

The decode loop is written out (prefill once, then one token per forward with a KV cache) instead of calling
``model.generate``: for the small models this backend serves, ``generate``'s per-token machinery costs more than
the model. Llama/Qwen2-architecture models decode through :class:`trainer.rollout.fast_decode.LeanDecoder`
(the same math as plain tensor ops on the live weights); others through the model's own forward and cache. It
supports temperature and top-p and stops when every row has emitted EOS. Weights are shared with the trainer,
so :meth:`HFRollout.sync_weights` is a no-op.

Not covered: beam search, repetition penalties, stop strings, speculative decoding.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch

from trainer.memory import trim_heap
from trainer.rollout.base import RolloutBatch, SamplingConfig, left_pad, right_pad
from trainer.rollout.fast_decode import LeanDecoder, supports

__all__ = ["HFRollout", "sample_next", "position_ids_from_mask"]

log = logging.getLogger(__name__)


def position_ids_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """(B, L) attention mask -> (B, L) positions counting real tokens only (left padding gets 0)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_next(logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None) -> torch.Tensor:
    """(B, V) last-position logits -> (B,) sampled token ids under temperature and top-p.

    Draws with the exponential-race form of categorical sampling, argmax(p / E) with E ~ Exp(1), which picks
    index i with probability p_i like ``torch.multinomial`` at a fraction of its cost for small batches.
    """
    x = logits.float()
    if sampling.temperature != 1.0:
        x = x / sampling.temperature
    probs = torch.softmax(x, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < sampling.top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p * keep)
    return (probs / torch.empty_like(probs).exponential_(generator=generator)).argmax(dim=-1)


class HFRollout:
    """Sample from a transformers causal LM with its own KV cache.

    Args:
        model: the policy (shared with the trainer).
        tokenizer: its tokenizer; needs an EOS token.
        max_prompt_length: prompts longer than this are cut from the left (their end is kept).
        generator: the torch RNG used for sampling (the trainer saves its state in checkpoints).
        lean: use :class:`LeanDecoder` when the architecture allows (False: always the transformers forward).
        bf16: sample under bfloat16 autocast (weights stay float32; the lean decoder multiplies with bfloat16
            copies made once per call).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_prompt_length: int,
        generator: torch.Generator | None = None,
        lean: bool = True,
        bf16: bool = False,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.generator = generator
        self.lean = lean and supports(model)
        self.bf16 = bf16
        self.eos_id = tokenizer.eos_token_id
        if self.eos_id is None:
            raise ValueError("the tokenizer has no eos_token; set one so completions can end")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        # transformers 5 renamed past_key_values to cache; older releases know only the old name
        self._cache_kw = "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"

    def encode_prompts(self, prompts: Sequence[str]) -> list[list[int]]:
        """Token ids of each prompt, keeping the last ``max_prompt_length`` tokens."""
        out = []
        for p in prompts:
            ids = self.tokenizer(p, add_special_tokens=False)["input_ids"]
            out.append(list(ids)[-self.max_prompt_length :])
        return out

    def sync_weights(self) -> None:
        """No-op: the rollout uses the training model's own weights."""

    def release_memory(self) -> None:
        """The KV cache and weight copies of a generate call are freed when it returns; on the CPU, hand the heap
        memory they leave free back to the system (:func:`trainer.memory.trim_heap`)."""
        if next(self.model.parameters()).device.type == "cpu":
            trim_heap()

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], n: int, sampling: SamplingConfig) -> RolloutBatch:
        """Sample ``n`` completions per prompt; rows are group-major."""
        encoded = [ids for ids in self.encode_prompts(prompts) for _ in range(n)]
        prompt_ids, prompt_mask = left_pad(encoded, self.pad_id)
        rows = self._decode(prompt_ids, prompt_mask, sampling, n)
        truncated = torch.tensor([len(r) >= sampling.max_new_tokens and r[-1] != self.eos_id for r in rows])
        completion_ids, completion_mask = right_pad(rows, self.pad_id)
        texts = self.tokenizer.batch_decode(
            [r[:-1] if r and r[-1] == self.eos_id else r for r in rows], skip_special_tokens=True
        )
        return RolloutBatch(prompt_ids, prompt_mask, completion_ids, completion_mask, truncated, texts)

    def _decode(
        self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, sampling: SamplingConfig, n: int = 1
    ) -> list[list[int]]:
        """Sample the rows; ``n`` > 1 says rows come in adjacent groups of ``n`` with the same prompt."""
        was_training = self.model.training and not self.lean  # the lean path has no dropout to switch off
        if was_training:
            self.model.eval()
        device = next(self.model.parameters()).device
        ids, attn = prompt_ids.to(device), prompt_mask.to(device)
        b = ids.shape[0]
        amp = torch.autocast(device.type, dtype=torch.bfloat16) if self.bf16 else nullcontext()
        with amp:
            tokens = self._sample_loop(ids, attn, sampling, n)
        if was_training:
            self.model.train()
        steps = torch.stack(tokens, dim=1).cpu() if tokens else torch.zeros((b, 0), dtype=torch.long)
        return [_cut_at_eos(steps[i].tolist(), self.eos_id) for i in range(b)]

    def _sample_loop(
        self, ids: torch.Tensor, attn: torch.Tensor, sampling: SamplingConfig, n: int = 1
    ) -> list[torch.Tensor]:
        b, device = ids.shape[0], ids.device
        step_fn, logits = self._start(ids, attn, sampling.max_new_tokens, n)
        done = torch.zeros(b, dtype=torch.bool, device=device)
        tokens: list[torch.Tensor] = []
        gen = self.generator if device.type == "cpu" else None
        for t in range(sampling.max_new_tokens):
            tok = sample_next(logits, sampling, gen)
            tokens.append(tok)  # tokens after a row's EOS are cut in _decode
            done |= tok == self.eos_id
            if t == sampling.max_new_tokens - 1 or (t % 4 == 3 and bool(done.all())):
                break
            logits = step_fn(tok)
        return tokens

    def _start(self, ids: torch.Tensor, attn: torch.Tensor, max_new: int, n: int = 1) -> tuple[Any, torch.Tensor]:
        """Prefill (the lean decoder: once per group of ``n`` rows with one prompt); returns (a function from the
        last tokens to the next logits, the first logits)."""
        if self.lean:
            dtype = torch.bfloat16 if self.bf16 else None
            shared = n > 1 and ids.shape[0] % n == 0
            if shared:  # rows i*n .. i*n+n-1 share a prompt (group-major); check rather than trust
                u_ids, u_attn = ids[::n], attn[::n]
                shared = bool(
                    (ids == u_ids.repeat_interleave(n, 0)).all() and (attn == u_attn.repeat_interleave(n, 0)).all()
                )
            if not shared:
                u_ids, u_attn, n = ids, attn, 1
            dec = LeanDecoder(self.model, u_ids.shape[0], ids.shape[1] + max_new, cache_dtype=dtype, matmul_dtype=dtype)
            first = dec.prefill(u_ids, u_attn)
            dec.repeat_rows(n)
            return dec.step, first.repeat_interleave(n, dim=0)
        pos = position_ids_from_mask(attn)
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1)
        state = {"cache": self._cache_of(out), "attn": attn, "pos": pos[:, -1:] + 1}

        def step(tok: torch.Tensor) -> torch.Tensor:
            a = state["attn"] = torch.cat([state["attn"], torch.ones_like(state["attn"][:, :1])], dim=1)
            o = self.model(
                input_ids=tok[:, None],
                attention_mask=a,
                position_ids=state["pos"],
                use_cache=True,
                **{self._cache_kw: state["cache"]},
            )
            state["cache"], state["pos"] = self._cache_of(o), state["pos"] + 1
            return o.logits[:, -1]

        return step, out.logits[:, -1]

    def _cache_of(self, out: Any) -> Any:
        return getattr(out, "cache", None) if self._cache_kw == "cache" else out.past_key_values


def _cut_at_eos(row: list[int], eos_id: int) -> list[int]:
    return row[: row.index(eos_id) + 1] if eos_id in row else row
