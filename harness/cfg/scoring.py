"""The ``scoring`` section of a run config (owned by harness.scoring): where reward calls run.

``backend: local`` (the default) runs them in this machine's worker pool; ``backend: ray`` sends them to Ray actors
(see ``docs/RAY.md``). The per-call time limit and the worker count stay where they were (``trainer.score_timeout``,
``trainer.score_workers``, ``eval.score_timeout``); this section only chooses the place.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ScoringSection"]


class ScoringSection(BaseModel):
    """Which scoring backend runs the reward calls, and how a Ray cluster is reached."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["local", "ray"] = Field("local", description="local: this machine's worker pool; ray: actors")
    ray_address: str | None = Field(
        None,
        description="ray only: none starts a local Ray instance for the command; 'auto' joins the running "
        "cluster; HOST:PORT joins that one",
    )
    actors_per_node: int | None = Field(None, ge=1, description="ray only: scoring actors per node (default: its CPUs)")
