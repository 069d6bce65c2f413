"""How the Ray driver reaches a cluster, and the records it keeps of its actors and their calls in flight.

Importing Ray with a clear error when it is missing, failing at once on a ``HOST:PORT`` nothing listens on, and
the registry's user plugins packed for shipment to nodes that lack the files; beside them the two plain records
(:class:`_Actor`, :class:`_Call`) the driver's dispatcher keeps. This module starts no actor and dispatches no
call (:mod:`harness.scoring._ray` does), and it imports Ray only when :func:`_import_ray` is called.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ScoringError
from harness.registry import default_registry
from harness.scoring._ray_actor import PluginShipment
from harness.scoring._task import Task

__all__ = ["RAY_MISSING"]

RAY_MISSING = "scoring.backend ray needs the ray package on this machine and on every node: pip install ray"


@dataclass
class _Call:
    ref: Any
    tasks: list[Task]
    deadline: float


@dataclass
class _Actor:
    handle: Any
    node: str
    node_id: str
    calls: list[_Call] = field(default_factory=list)
    alive: bool = True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ScoringError(f"{RAY_MISSING} ({e})") from None
    return ray


def _check_reachable(address: str) -> None:
    """Fail at once on a ``HOST:PORT`` nothing listens on (Ray itself retries for minutes before it gives up)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms: Ray's own errors are quick
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as e:
        raise ScoringError(f"scoring.backend ray: nothing answers at the Ray address {address!r}: {e}") from None


def _shipment() -> list[PluginShipment]:
    """The registry's user plugins, a ``.py`` file with its text so that a node without the file can import it."""
    out: list[PluginShipment] = []
    for spec in default_registry().plugins:
        path = Path(spec)
        out.append((spec, path.read_text(encoding="utf-8") if spec.endswith(".py") and path.is_file() else None))
    return out
