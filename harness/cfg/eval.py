"""The `eval` section of a run config (owned by the held-out evaluator)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["EvalSection"]


class EvalSection(BaseModel):
    """Held-out evaluation settings; see evals/ for their meaning."""

    model_config = ConfigDict(extra="forbid")
