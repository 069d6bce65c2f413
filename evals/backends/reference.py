"""The ``reference`` backend: no model; every completion is the data set's own reference solution.

``harness eval --task humaneval --backend reference`` scores HumanEval's canonical solutions through the whole
evaluation path (prompts, the sandbox, metrics, the table): a check of the task and the scoring, not of a model,
that should read pass@1 = 1. The completion of a prompt is the first non-empty column among ``columns``
(``canonical_solution``, then ``solution``, then ``answer``); a prompt with none of them gets an empty completion
with finish reason ``error``, so it shows as failed rather than passing by accident.

It reads the loaded samples only; it runs nothing and imports no model library.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evals.backends.base import Generation, PromptRequest, SamplingParams
from harness.types import Sample

__all__ = ["ReferenceBackend", "REFERENCE_COLUMNS"]

#: The columns a reference completion is taken from, in order of preference.
REFERENCE_COLUMNS = ("canonical_solution", "solution", "answer")


def _reference(sample: Sample, columns: Sequence[str]) -> str | None:
    cols = sample.columns
    for c in columns:
        v = cols.get(c)
        if isinstance(v, str) and v.strip():
            return v
        if v is not None and not isinstance(v, (str, dict, list)):
            return str(v)
    return None


class ReferenceBackend:
    """Answer each prompt with its sample's reference solution.

    Args:
        samples: the loaded samples (their ids match the requests').
        columns: where to look for the reference, in order.
    """

    name = "reference"

    def __init__(self, samples: Iterable[Sample], columns: Sequence[str] = REFERENCE_COLUMNS) -> None:
        self.columns = tuple(columns)
        self.references = {s.id: _reference(s, self.columns) for s in samples}

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """The reference ``k`` times per request (no stop strings or token limit apply: it is not generated)."""
        out = []
        for r in requests:
            ref = self.references.get(r.id)
            gen = Generation(ref, "stop", None) if ref is not None else Generation("", "error", 0)
            out.append([gen] * k)
        return out

    def describe(self) -> dict[str, Any]:
        """The backend name and the columns read."""
        missing = sum(v is None for v in self.references.values())
        return {"backend": self.name, "model": None, "columns": list(self.columns), "missing": missing}

    def close(self) -> None:
        """Nothing to release."""
