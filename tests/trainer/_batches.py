"""Rollout batches for the trainer tests, laid out as a rollout lays them out (prompts left-padded, completions
right-padded with pad id 0), so every test builds a :class:`RolloutBatch` one way."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trainer.rollout.base import RolloutBatch, left_pad, right_pad

__all__ = ["PAD_ID", "batch_of", "rollout_batch", "random_rollout_batch"]

PAD_ID = 0


def batch_of(
    p_ids: torch.Tensor,
    p_mask: torch.Tensor,
    c_ids: torch.Tensor,
    c_mask: torch.Tensor,
    truncated: Sequence[bool] | None = None,
    texts: Sequence[str] | None = None,
) -> RolloutBatch:
    """A batch of padded tensors; by default nothing truncated and empty texts."""
    n = int(c_ids.shape[0])
    flags = torch.tensor(list(truncated) if truncated is not None else [False] * n, dtype=torch.bool)
    return RolloutBatch(p_ids, p_mask, c_ids, c_mask, flags, list(texts) if texts is not None else [""] * n)


def rollout_batch(
    prompts: Sequence[Sequence[int] | torch.Tensor],
    completions: Sequence[Sequence[int] | torch.Tensor],
    truncated: Sequence[bool] | None = None,
    texts: Sequence[str] | None = None,
) -> RolloutBatch:
    """A batch from token lists, one prompt per completion (repeat a prompt for its group)."""
    p_ids, p_mask = left_pad([torch.as_tensor(p) for p in prompts], PAD_ID)
    c_ids, c_mask = right_pad([torch.as_tensor(c) for c in completions], PAD_ID)
    return batch_of(p_ids, p_mask, c_ids, c_mask, truncated, texts)


def random_rollout_batch(
    vocab: int, lengths: Sequence[int], prompt_lengths: Sequence[int] | None = None, seed: int = 0
) -> RolloutBatch:
    """Seeded random ids in ``[2, vocab)``: completions of ``lengths`` tokens, prompts of 3-5 tokens by default."""
    g = torch.Generator().manual_seed(seed)
    prompt_lengths = prompt_lengths or [3 + i % 3 for i in range(len(lengths))]
    prompts = [torch.randint(2, vocab, (n,), generator=g) for n in prompt_lengths]
    return rollout_batch(prompts, [torch.randint(2, vocab, (n,), generator=g) for n in lengths])
