"""The contract every generation backend meets: k completions per prompt, with a finish reason and a seed.

A backend turns :class:`PromptRequest` objects (a prompt as text or chat messages, plus the seed of that prompt)
into ``k`` :class:`Generation` objects each. The runner derives every prompt's seed from the run seed and the
prompt id (:func:`prompt_seed`), so a prompt gets the same seed whatever batch or resume it is generated in.

This module holds data types and the protocol only; it imports no model library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["SamplingParams", "PromptRequest", "Generation", "Backend", "FinishReason", "prompt_seed"]

FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class SamplingParams:
    """How completions are sampled. ``temperature == 0`` means greedy decoding."""

    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 1024
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for results.json."""
        return asdict(self)


@dataclass(frozen=True)
class PromptRequest:
    """One prompt to sample from: its id, the prompt (text or chat messages) and its seed."""

    id: str
    prompt: str | list[dict[str, Any]]
    seed: int


@dataclass(frozen=True)
class Generation:
    """One completion. ``finish_reason`` is ``"length"`` when it hit ``max_new_tokens``."""

    text: str
    finish_reason: FinishReason = "stop"
    tokens: int | None = None


@runtime_checkable
class Backend(Protocol):
    """What the runner needs from a backend."""

    name: str

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions for every request, in request order."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record about the backend in results.json (model, server, dtype...)."""
        ...

    def close(self) -> None:
        """Release the model or connections."""
        ...


def prompt_seed(run_seed: int, prompt_id: str) -> int:
    """A 31-bit seed for one prompt, fixed by the run seed and the prompt id.

    >>> prompt_seed(0, "a") == prompt_seed(0, "a") != prompt_seed(1, "a")
    True
    """
    h = hashlib.sha256(f"{run_seed}\x1f{prompt_id}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF
