"""Choosing the scoring backend from a run config's ``scoring`` section: the local pool or Ray actors.

:func:`scoring_pool` gives ``None`` for the local backend (a session then takes the process-wide local pool, as it
always did) and the process-wide :class:`~harness.scoring._ray.RayPool` for ``backend: ray``. Ray is imported only
on that branch. This module runs nothing itself.
"""

from __future__ import annotations

from harness.cfg.scoring import ScoringSection
from harness.scoring._task import TaskPool

__all__ = ["scoring_pool"]


def scoring_pool(section: ScoringSection | None, *, memory_limit_mb: int | None = 8192) -> TaskPool | None:
    """The pool ``section`` asks for: ``None`` for ``local`` (the session's default pool), a Ray pool for ``ray``.

    Raises:
        ScoringError: ``ray`` without the ray package, a cluster that cannot be reached, or a plugin that fails to
            import on a node (the message names the node).
    """
    if section is None or section.backend == "local":
        return None
    from harness.scoring._ray import ray_pool

    return ray_pool(section.ray_address, actors_per_node=section.actors_per_node, memory_limit_mb=memory_limit_mb)
