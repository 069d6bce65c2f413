"""Generated arithmetic word problems for ``harness demo --model smollm2``: one-shot chat prompts, disjoint splits.

Each problem is an addition or a subtraction of numbers up to 20 in a short story ("Mia has 12 shells and gets
7 more. How many shells now?"); the gold answer is the result. Training and held-out problems share no
``(operation, a, b)`` triple, so a held-out problem is never a training problem with another name or object.

Every prompt is a chat: one worked example (a user question and the assistant's reply ``"2 + 3 = 5, so
\\boxed{5}"``), then the problem. SmolLM2-135M-Instruct ignores a format asked for in words (measured: it writes
prose and never boxes) but copies a shown one, so the example teaches the output form, not the arithmetic. The
example is drawn per row from its own pool: training rows get examples whose sum is even, held-out rows examples
whose sum is odd. With questions of at most 12 words, every word 13-gram of a held-out prompt then contains the
example's sum (held-out only) or the problem's triple (held-out only), so the contamination check's 0 overlaps
holds by construction.

This module writes data; it trains and scores nothing.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["word_problem_rows", "write_word_problems"]

_NAMES = ["Mia", "Tom", "Ana", "Leo", "Sara", "Ben", "Ivy", "Max", "Zoe", "Sam"]
_ITEMS = ["apples", "pens", "shells", "cards", "coins", "books", "stamps", "eggs", "cups", "rocks"]
_LIMIT = 20


def _question(op: str, a: int, b: int, name: str, items: str) -> str:
    if op == "+":
        return f"{name} has {a} {items} and gets {b} more. How many {items} now?"
    return f"{name} has {a} {items} and gives away {b}. How many {items} are left?"


def _triples() -> list[tuple[str, int, int]]:
    add = [("+", a, b) for a in range(2, _LIMIT + 1) for b in range(2, _LIMIT + 1)]
    sub = [("-", a, b) for a in range(3, _LIMIT + 1) for b in range(1, a)]
    return add + sub


def _example(rng: random.Random, parity: int) -> list[dict[str, str]]:
    """A worked example whose sum has the given parity (0: training rows, 1: held-out rows)."""
    while True:
        x, y = rng.randint(1, 9), rng.randint(1, 9)
        if (x + y) % 2 == parity:
            break
    q = _question("+", x, y, rng.choice(_NAMES), rng.choice(_ITEMS))
    return [
        {"role": "user", "content": q},
        {"role": "assistant", "content": f"{x} + {y} = {x + y}, so \\boxed{{{x + y}}}"},
    ]


def word_problem_rows(n_train: int, n_heldout: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train, heldout)`` rows (id, prompt as chat messages, answer), from disjoint ``(op, a, b)`` triples.

    Raises:
        ValueError: more problems asked for than there are triples.
    """
    triples = _triples()
    if n_train + n_heldout > len(triples):
        raise ValueError(f"word problems: {n_train} + {n_heldout} asked, only {len(triples)} distinct problems")
    rng = random.Random(seed)
    rng.shuffle(triples)
    splits = {"heldout": triples[:n_heldout], "train": triples[n_heldout : n_heldout + n_train]}
    out: dict[str, list[dict[str, Any]]] = {}
    for split, chosen in splits.items():
        parity = 1 if split == "heldout" else 0
        rows = []
        for i, (op, a, b) in enumerate(chosen):
            q = _question(op, a, b, rng.choice(_NAMES), rng.choice(_ITEMS))
            rows.append(
                {
                    "id": f"{split}-{i}",
                    "prompt": [*_example(rng, parity), {"role": "user", "content": q}],
                    "answer": str(a + b if op == "+" else a - b),
                }
            )
        out[split] = rows
    return out["train"], out["heldout"]


def write_word_problems(directory: Path, n_train: int, n_heldout: int, seed: int = 0) -> tuple[Path, Path]:
    """Write ``train.jsonl`` and ``heldout.jsonl`` of :func:`word_problem_rows` and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / "train.jsonl", directory / "heldout.jsonl"
    for path, rows in zip(paths, word_problem_rows(n_train, n_heldout, seed), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths
