"""Overlap between held-out prompts and training prompts: exact matches and shared word 13-grams.

Text is normalized before comparing: lowercased, split into word tokens (``\\w+``, so punctuation and whitespace
differences do not hide a copy). A held-out prompt is

* an **exact** overlap when its normalized token sequence equals a training prompt's, and
* an **n-gram** overlap when it shares at least one ``n``-token window (default 13, as in the GPT-3 paper's
  contamination study) with any training prompt. Prompts shorter than ``n`` tokens can only overlap exactly.

For chat prompts only the non-system messages count: a system prompt shared by every row is not contamination.

This module reports overlap; it does not decide what to do about it (the evaluator turns it into a warning or,
with ``--fail-on-overlap``, an error) and it does not look at answers or completions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.types import Sample

__all__ = [
    "DEFAULT_NGRAM",
    "tokens",
    "contamination_text",
    "ContaminationIndex",
    "ContaminationReport",
    "check_contamination",
]

DEFAULT_NGRAM = 13
_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lowercased word tokens. ``tokens("Hello, World!")`` is ``['hello', 'world']``."""
    return _WORD.findall(text.lower())


def contamination_text(sample: Sample) -> str:
    """The text of a sample's prompt that is compared: system messages are left out of chat prompts."""
    if isinstance(sample.prompt, str):
        return sample.prompt
    return "\n".join(str(m.get("content", "")) for m in sample.prompt if m.get("role") != "system")


def _key(toks: Sequence[str]) -> bytes:
    return hashlib.blake2b("\x1f".join(toks).encode("utf-8"), digest_size=12).digest()


@dataclass
class ContaminationIndex:
    """Hashes of the training prompts' full texts and n-grams, mapped to the first training id that has them."""

    n: int = DEFAULT_NGRAM
    exact: dict[bytes, str] = field(default_factory=dict)
    grams: dict[bytes, str] = field(default_factory=dict)
    size: int = 0

    @classmethod
    def build(cls, train: Iterable[Sample], n: int = DEFAULT_NGRAM) -> ContaminationIndex:
        """Index every training prompt (``n`` >= 1)."""
        if n < 1:
            raise ValueError(f"n-gram size must be >= 1, got {n}")
        idx = cls(n=n)
        for s in train:
            idx.add(s)
        return idx

    def add(self, sample: Sample) -> None:
        toks = tokens(contamination_text(sample))
        self.size += 1
        if not toks:
            return
        self.exact.setdefault(_key(toks), sample.id)
        for i in range(len(toks) - self.n + 1):
            self.grams.setdefault(_key(toks[i : i + self.n]), sample.id)


@dataclass
class ContaminationReport:
    """What :func:`check_contamination` found. ``examples`` holds up to ``max_examples`` overlaps."""

    n: int
    heldout: int
    train: int
    exact: int = 0
    ngram: int = 0
    short: int = 0
    exact_ids: list[str] = field(default_factory=list)
    ngram_ids: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def overlap(self) -> bool:
        """True when any held-out prompt overlaps a training prompt (exactly or by an n-gram)."""
        return bool(self.exact or self.ngram)

    def summary(self) -> str:
        """One line for logs and the console."""
        return (
            f"contamination: {self.exact}/{self.heldout} held-out prompts exactly in the training set, "
            f"{self.ngram}/{self.heldout} share a {self.n}-gram with it ({self.train} training prompts)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for results.json."""
        return {
            "n": self.n,
            "heldout_prompts": self.heldout,
            "train_prompts": self.train,
            "exact": self.exact,
            "ngram": self.ngram,
            "shorter_than_n": self.short,
            "exact_ids": self.exact_ids,
            "ngram_ids": self.ngram_ids,
            "examples": self.examples,
        }


def check_contamination(
    heldout: Iterable[Sample],
    train: Iterable[Sample] | ContaminationIndex,
    *,
    n: int = DEFAULT_NGRAM,
    max_examples: int = 5,
) -> ContaminationReport:
    """Count held-out prompts that appear in, or share an ``n``-gram with, the training prompts.

    A held-out prompt that is an exact overlap is not counted again as an n-gram overlap.

    >>> tr = [Sample(id="t1", prompt="What is the capital of France? Answer in one word please now ok")]
    >>> ho = [Sample(id="h1", prompt="what is the CAPITAL of france?  answer in one word please now ok"),
    ...       Sample(id="h2", prompt="Say: what is the capital of France? Answer in one word please now ok!"),
    ...       Sample(id="h3", prompt="What is 2+2?")]
    >>> r = check_contamination(ho, tr)
    >>> (r.exact, r.ngram, r.exact_ids, r.ngram_ids)
    (1, 1, ['h1'], ['h2'])
    """
    index = train if isinstance(train, ContaminationIndex) else ContaminationIndex.build(train, n)
    n = index.n
    held = list(heldout)
    report = ContaminationReport(n=n, heldout=len(held), train=index.size)
    for s in held:
        toks = tokens(contamination_text(s))
        if len(toks) < n:
            report.short += 1
        hit = index.exact.get(_key(toks)) if toks else None
        if hit is not None:
            report.exact += 1
            report.exact_ids.append(s.id)
            if len(report.examples) < max_examples:
                report.examples.append(
                    {"kind": "exact", "heldout_id": s.id, "train_id": hit, "text": " ".join(toks)[:200]}
                )
            continue
        for i in range(len(toks) - n + 1):
            gram = toks[i : i + n]
            hit = index.grams.get(_key(gram))
            if hit is not None:
                report.ngram += 1
                report.ngram_ids.append(s.id)
                if len(report.examples) < max_examples:
                    report.examples.append(
                        {"kind": f"{n}-gram", "heldout_id": s.id, "train_id": hit, "text": " ".join(gram)}
                    )
                break
    return report
