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

__all__ = [
    "SamplingParams",
    "PromptRequest",
    "Generation",
    "Backend",
    "FinishReason",
    "prompt_seed",
    "cut_at_stop",
]

FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class SamplingParams:
    """How completions are sampled. ``temperature == 0`` means greedy decoding.

    ``stop``: strings that end a completion; the completion is cut before the first one (which is not kept), as
    lm-evaluation-harness's ``until`` and the OpenAI API's ``stop`` do.
    """

    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 1024
    seed: int = 0
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for results.json; ``stop`` only when there are stop strings (so evaluations made before
        stop strings existed keep their identity and resume)."""
        out = asdict(self)
        if self.stop:
            out["stop"] = list(self.stop)
        else:
            del out["stop"]
        return out


@dataclass(frozen=True)
class PromptRequest:
    """One prompt to sample from: its id, the prompt (text or chat messages) and its seed."""

    id: str
    prompt: str | list[dict[str, Any]]
    seed: int


@dataclass(frozen=True)
class Generation:
    """One completion. ``finish_reason`` is ``"length"`` when it hit ``max_new_tokens``.

    ``error``: why nothing could be generated for this prompt (a prompt longer than the model's context); the
    runner then leaves the completion unscored (status ``bad_input``) with this reason, and the evaluation goes on.
    Such a generation has finish reason ``"error"`` and no text (:meth:`refused`).
    """

    text: str
    finish_reason: FinishReason = "stop"
    tokens: int | None = None
    error: str | None = None

    @classmethod
    def refused(cls, reason: str) -> Generation:
        """No completion for this prompt, and why."""
        return cls("", "error", 0, reason)


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


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the earliest occurrence of any stop string (not kept), and whether one was found.

    >>> cut_at_stop("a = 1\\ndef g():", ["\\ndef ", "\\nclass "])
    ('a = 1', True)
    >>> cut_at_stop("42", ["Question:"])
    ('42', False)
    """
    hits = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(hits)], True) if hits else (text, False)


def prompt_seed(run_seed: int, prompt_id: str) -> int:
    """A 31-bit seed for one prompt, fixed by the run seed and the prompt id.

    >>> prompt_seed(0, "a") == prompt_seed(0, "a") != prompt_seed(1, "a")
    True
    """
    h = hashlib.sha256(f"{run_seed}\x1f{prompt_id}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF
