"""The rollout interface: turn prompt texts into G sampled completions each, as token ids the trainer can score.

Two backends implement it: :class:`trainer.rollout.hf.HFRollout` (transformers, CPU or GPU) and
:class:`trainer.rollout.vllm.VLLMRollout` (vLLM, colocated on the GPU). The trainer never looks inside a backend;
it calls :meth:`Rollout.generate`, :meth:`Rollout.release_memory` before the update and, after each optimizer
step, :meth:`Rollout.sync_weights`.

This module holds the contract and the shared helpers (left padding); it does not sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["SamplingConfig", "RolloutBatch", "Rollout", "left_pad", "right_pad"]


@dataclass(frozen=True)
class SamplingConfig:
    """How completions are sampled.

    Attributes:
        max_new_tokens: completion length cap; a completion that reaches it without EOS is *truncated*.
        temperature: softmax temperature (the trainer's log-probs use the same temperature).
        top_p: nucleus sampling mass (1.0: off).
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass
class RolloutBatch:
    """G completions for each of a list of prompts, group-major (the G completions of a prompt are adjacent).

    Attributes:
        prompt_ids: (B, P) left-padded prompt ids, B = prompts * G.
        prompt_mask: (B, P) 1 on real prompt tokens.
        completion_ids: (B, T) right-padded completion ids (EOS included when sampled).
        completion_mask: (B, T) 1 on completion tokens up to and including EOS.
        truncated: (B,) True when the completion hit max_new_tokens without EOS.
        texts: B decoded completions, special tokens removed.
        sampler_logp: (B, T) the sampling engine's log-probs of the completion tokens (0 on padding), when the
            backend reports them (vLLM); the update uses them for the off-policy correction.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    truncated: torch.Tensor
    texts: list[str]
    sampler_logp: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.completion_ids.shape[0])

    @property
    def completion_lengths(self) -> torch.Tensor:
        """(B,) number of completion tokens."""
        return self.completion_mask.sum(dim=1)

    def select(self, index: torch.Tensor) -> RolloutBatch:
        """The rows in ``index`` (a 1-D long tensor), in that order."""
        idx = index.tolist()
        return RolloutBatch(
            self.prompt_ids[index],
            self.prompt_mask[index],
            self.completion_ids[index],
            self.completion_mask[index],
            self.truncated[index],
            [self.texts[i] for i in idx],
            self.sampler_logp[index] if self.sampler_logp is not None else None,
        )

    @staticmethod
    def concat(batches: Sequence[RolloutBatch], pad_id: int) -> RolloutBatch:
        """Join batches, re-padding prompts on the left and completions on the right."""
        if len(batches) == 1:
            return batches[0]
        p_ids, p_mask = left_pad([r for b in batches for r in _rows(b.prompt_ids, b.prompt_mask)], pad_id)
        c_ids, c_mask = right_pad([r for b in batches for r in _rows(b.completion_ids, b.completion_mask)], pad_id)
        lp = None
        sampler_logps = [b.sampler_logp for b in batches if b.sampler_logp is not None]
        if len(sampler_logps) == len(batches):
            lp = torch.zeros(c_ids.shape, dtype=torch.float32)
            rows = [r for b, logp in zip(batches, sampler_logps, strict=True) for r in _rows(logp, b.completion_mask)]
            for i, r in enumerate(rows):
                lp[i, : len(r)] = r
        texts = [t for b in batches for t in b.texts]
        return RolloutBatch(p_ids, p_mask, c_ids, c_mask, torch.cat([b.truncated for b in batches]), texts, lp)


def _rows(ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    return [ids[i][mask[i].bool()] for i in range(ids.shape[0])]


def _pad(rows: Sequence[torch.Tensor | list[int]], pad_id: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    tensors = [torch.as_tensor(r, dtype=torch.long) for r in rows]
    width = max((len(r) for r in tensors), default=0)
    ids = torch.full((len(tensors), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(tensors), width), dtype=torch.long)
    for i, r in enumerate(tensors):
        if len(r):
            cols = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, cols] = r
            mask[i, cols] = 1
    return ids, mask


def left_pad(rows: Sequence[torch.Tensor | list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad 1-D id sequences into ((N, L) ids, (N, L) mask)."""
    return _pad(rows, pad_id, left=True)


def right_pad(rows: Sequence[torch.Tensor | list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-D id sequences into ((N, L) ids, (N, L) mask)."""
    return _pad(rows, pad_id, left=False)


class Rollout(Protocol):
    """What the trainer needs from a generation backend."""

    def generate(self, prompts: Sequence[str], n: int, sampling: SamplingConfig) -> RolloutBatch:
        """Sample ``n`` completions for each prompt text; rows are group-major."""
        ...

    def release_memory(self) -> None:
        """Give back the device memory the backend holds until :meth:`sync_weights` (called before the update)."""
        ...

    def sync_weights(self) -> None:
        """Make the next :meth:`generate` use the policy's current weights (a no-op when they are shared)."""
        ...

    @property
    def pad_id(self) -> int:
        """The token id that pads prompts (left) and completions (right) in the batches it returns."""
        ...
