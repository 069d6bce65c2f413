"""The demo's built-in verifiable task: one-digit addition answered in ``\\boxed{}``, and its warm-up model.

The prompts are ``"a+b="`` for ``a, b`` in 0..9: 100 problems, split into training and held-out problems that share
no prompt. The gold answer is the sum; the ``math`` reward takes a boxed or a bare number, and an empty answer
(nothing, or ``\\boxed{}``) scores 0.

The warm-up is a short supervised pass over the *training* problems only, on a random-init tiny Qwen2-style
model built from a config (no download), with noisy habits in its targets: half of them are left blank (the
model stops, or writes an empty box), a tenth are off by one, and half are boxed. The model leaves the warm-up
knowing many sums, including held-out ones it generalizes to, and often not committing to any: at the held-out
sampling temperature the blank habit wins on most prompts. Committing to an answer is a habit of the whole model,
not of one prompt, so what GRPO teaches on the training prompts shows on the held-out ones; the sums it never saw
stay as right or wrong as the warm-up left them. It says nothing about language ability.

Measured over seeds and thread counts by ``benchmarks/demo_seeds.py`` (docs/DEMO.md). Two
designs that did not hold up there: off-by-one noise alone (GRPO sharpened the training sums and the held-out
score fell) and a learning rate of 1e-3 or more (the tiny model overfits its 70 training prompts).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEMO_CHARS", "Split", "make_split", "write_split", "demo_tokenizer", "warmup_model"]

#: Every character the task needs; the tokenizer has one token per character plus <pad>, <eos>, <unk>.
DEMO_CHARS = "0123456789+=\\{}boxed ."


@dataclass(frozen=True)
class Split:
    """Training and held-out problems as ``(a, b)`` pairs; no pair is in both."""

    train: list[tuple[int, int]]
    heldout: list[tuple[int, int]]


def make_split(heldout_fraction: float = 0.3, seed: int = 0) -> Split:
    """All 100 one-digit additions, shuffled with ``seed`` and split."""
    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(seed).shuffle(pairs)
    n_held = max(1, int(round(len(pairs) * heldout_fraction)))
    return Split(train=sorted(pairs[n_held:]), heldout=sorted(pairs[:n_held]))


def _rows(pairs: list[tuple[int, int]], prefix: str) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{a}+{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in pairs]


def write_split(split: Split, directory: Path) -> tuple[Path, Path]:
    """Write ``train.jsonl`` and ``heldout.jsonl`` (fields id, prompt, answer) and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / "train.jsonl", directory / "heldout.jsonl"
    for path, rows in zip(paths, (_rows(split.train, "train"), _rows(split.heldout, "heldout")), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


def demo_tokenizer() -> Any:
    """A character-level ``PreTrainedTokenizerFast`` over :data:`DEMO_CHARS` (saves and loads like any other)."""
    from harness.char_tokenizer import char_tokenizer

    return char_tokenizer(chars=DEMO_CHARS)


def _target(value: int | None, boxed: bool) -> str:
    text = "" if value is None else str(value)
    return f"\\boxed{{{text}}}" if boxed else text


def warmup_model(
    split: Split,
    out_dir: Path,
    *,
    steps: int = 300,
    boxed_fraction: float = 0.5,
    wrong_fraction: float = 0.1,
    blank_fraction: float = 0.5,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
) -> Path:
    """Train a random-init tiny model on the training problems, save it with its tokenizer, return the directory.

    Of the targets, ``blank_fraction`` are empty (no number), ``wrong_fraction`` are off by one and the rest are
    the sum; ``boxed_fraction`` of them are written in ``\\boxed{}``. Leaving the answer blank is the habit GRPO
    unlearns, on held-out problems too.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from harness.threads import apply_threads

    tok = demo_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    apply_threads("auto", model, "cpu", what="demo warm-up threads")
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    bar = tqdm(range(steps), desc="warm-up (supervised)", unit="step", disable=not progress)
    for _ in bar:
        batch = []
        for _ in range(batch_size):
            a, b = rng.choice(split.train)
            p = tok.encode(f"{a}+{b}=")
            u = rng.random()
            value: int | None = a + b + (rng.choice((-1, 1)) if u < wrong_fraction else 0)
            if u >= 1 - blank_fraction:
                value = None
            c = tok.encode(_target(value, rng.random() < boxed_fraction)) + [tok.eos_token_id]
            batch.append((p, c))
        width = max(len(p) + len(c) for p, c in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, c) in enumerate(batch):  # (B, T): prompt tokens are not trained on
            ids[i, : len(p) + len(c)] = torch.tensor(p + c)
            labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
            mask[i, : len(p) + len(c)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir
