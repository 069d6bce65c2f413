"""Errors of the held-out evaluator, in the project's one hierarchy (:class:`harness.errors.HarnessError`).

Bad model output is never an error here: it is scored (and a truncated completion is counted, not raised).
"""

from __future__ import annotations

from harness.errors import HarnessError

__all__ = ["EvalError", "BackendError", "ContaminationError", "ResumeError"]


class EvalError(HarnessError):
    """The evaluation cannot run as asked (no rewards, no data, no checkpoint)."""


class BackendError(EvalError):
    """A generation backend cannot load its model or reach its server; the message says which and how to fix it."""


class ContaminationError(EvalError):
    """Held-out prompts overlap the training prompts and ``fail_on_overlap`` was asked for."""


class ResumeError(EvalError):
    """An output directory holds results made with other settings; resuming would mix two evaluations."""
