"""The `trainer` section of a run config (owned by the GRPO trainer)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["TrainerSection"]


class TrainerSection(BaseModel):
    """GRPO trainer settings; see trainer/ for their meaning."""

    model_config = ConfigDict(extra="forbid")
