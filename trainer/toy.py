"""A built-in toy verifiable task that trains in seconds on a CPU: write as many of one character as you can.

Parts:
    :func:`char_tokenizer`  a character-level ``PreTrainedTokenizerFast`` (:mod:`harness.char_tokenizer`).
    :func:`tiny_model`      a random-init Qwen2-style causal LM (2 layers, hidden 64, 2 heads of 32 by default, ~77k
                            parameters).
    :func:`toy_samples`     prompts of a few random letters; the task is the same for every prompt.
    ``char_count``          the reward (built in: :mod:`rewards.toy`): count of one character in
                            the completion, divided by ``norm``.

Select it in a run config with ``model.name_or_path: "toy:char"`` and ``data.train: "toy:64"`` (64 prompts).
It is for tests, demos and benchmarks; it says nothing about language ability.
"""

from __future__ import annotations

import random
from typing import Any

from harness.char_tokenizer import CHARS, char_tokenizer
from harness.types import Sample

__all__ = ["CHARS", "char_tokenizer", "tiny_model", "toy_samples", "is_toy_model", "is_toy_data"]


def is_toy_model(name: str) -> bool:
    """True for ``toy:...`` model names."""
    return name.startswith("toy:")


def is_toy_data(source: str | None) -> bool:
    """True for ``toy:N`` data sources."""
    return bool(source) and str(source).startswith("toy:")


def tiny_model(vocab_size: int, *, hidden: int = 64, layers: int = 2, heads: int = 2, seed: int = 0) -> Any:
    """A random-init Qwen2-style causal LM (no download), float32, seeded.

    Two heads of 32 by default: vLLM's CPU attention refuses a head size of 16, and the parameter shapes (so the
    seeded initial weights) are those of four heads of 16.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(cfg)
    finally:
        torch.random.set_rng_state(state)
    return model


def toy_samples(n: int, *, seed: int = 0, prompt_len: int = 4) -> list[Sample]:
    """``n`` prompts of ``prompt_len`` random letters followed by ':'."""
    rng = random.Random(seed)
    letters = "bcdefghijklmnopqrstuvwxyz"
    return [
        Sample(id=f"toy-{i}", prompt="".join(rng.choice(letters) for _ in range(prompt_len)) + ":") for i in range(n)
    ]
