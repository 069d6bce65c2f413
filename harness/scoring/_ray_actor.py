"""The Ray actor that scores: a one-process local worker pool on a cluster node, driven by :mod:`._ray`.

Each actor owns a :class:`~harness.scoring._pool.WorkerPool` (one warm worker by default), so a call on a node has
exactly the local pool's semantics: the same hard wall-clock kill per call, the same crash isolation, the same
build grace, the same ``(score, seconds, failure)`` triple. The actor itself runs no plugin code; a plugin that
hangs or crashes takes down the actor's worker process, never the actor.

User plugins reach the actor as a list of ``(spec, source)``: a module name is imported by name (its package must be
installed on the node); a ``.py`` file travels as its text and is written to a private directory on the node when
the node does not hold the same file at the same path. A plugin that fails to import is reported by :meth:`info`
with the node's name, so the driver can refuse to start.

:class:`SandboxHost` is the node's one sandbox server: a warm :class:`sandbox.Sandbox` behind a relay socket
(:mod:`sandbox._relay`) whose path the node's scoring actors hand to their workers, so every code call on the node
runs in that one server and the node's isolation level is the one it reports.

This module imports nothing of Ray at import time (the driver wraps the class with ``ray.remote``); it does not
place, queue or time out calls across the cluster (see :mod:`harness.scoring._ray`).
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.scoring._pool import WorkerPool
from harness.scoring._task import Task

__all__ = ["ScoringActor", "SandboxHost", "node_label", "PluginShipment"]

#: One user plugin as the driver sends it: the spec its registry holds and, for a ``.py`` file, the file's text.
PluginShipment = tuple[str, "str | None"]
#: What :meth:`ScoringActor.run` returns per task: the local pool's ``(score dict | None, seconds, failure)``.
Outcome = tuple["dict[str, Any] | None", float, "tuple[str, str] | None"]


def node_label(ip: str, node_id: str) -> str:
    """The name a node goes by in logs, errors and spans: its address and the first characters of its Ray id."""
    return f"{ip}#{node_id[:6]}"


def _local_spec(spec: str, source: str | None, into: Path) -> str:
    """The spec to import on this node: the driver's own file when this node holds the same text, else a copy."""
    if source is None:
        return spec
    here = Path(spec)
    try:
        if here.is_file() and here.read_text(encoding="utf-8") == source:
            return spec
    except OSError:
        pass
    copy = into / here.name
    copy.write_text(source, encoding="utf-8")
    return str(copy)


class ScoringActor:
    """A scoring worker on one node (made remote with ``ray.remote`` by the driver)."""

    def __init__(
        self, node: str, relay: str | None, plugins: list[PluginShipment], workers: int, memory_limit_mb: int | None
    ) -> None:
        """``node``: this node's label (:func:`node_label`); ``relay``: the socket of the node's sandbox host."""
        self.node = node
        if relay:  # the worker processes take this environment: their code reward uses the node's one server
            os.environ["GRPO_HARNESS_SANDBOX_RELAY"] = relay
        self._dir = Path(tempfile.mkdtemp(prefix="grpo-harness-plugins-"))
        self._shipped: list[PluginShipment] = []
        self.plugin_error: str | None = None
        self._add_plugins(plugins)
        self._pool = WorkerPool(workers, memory_limit_mb=memory_limit_mb)

    def _add_plugins(self, plugins: list[PluginShipment]) -> None:
        new = [p for p in plugins if p not in self._shipped]
        if not new:
            return
        from harness.errors import HarnessError
        from harness.plugins import add_plugins
        from harness.registry import list_rewards

        for spec, source in new:
            try:
                add_plugins([_local_spec(spec, source, self._dir)])
                list_rewards()  # imports the plugin now (the registry loads once; a later add imports at once)
            except (HarnessError, OSError, ImportError, SyntaxError) as e:
                self.plugin_error = (
                    f"plugin {spec} failed to import on scoring node {self.node} ({socket.gethostname()}): "
                    f"{type(e).__name__}: {e}"
                )
                return
            self._shipped.append((spec, source))

    def info(self) -> dict[str, Any]:
        """Where this actor runs, and the error of a plugin that failed to import here (None when all did)."""
        return {
            "node": self.node,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "plugin_error": self.plugin_error,
        }

    def run(self, wires: list[tuple], plugins: list[PluginShipment]) -> list[Outcome]:
        """Score ``wires`` (``(name, module, params, params_key, sample, completion, timeout)`` each) on this node.

        Returns one ``(score dict | None, seconds, (kind, reason) | None)`` per wire, in order, exactly what the
        local pool reports; never raises for a plugin's failure.
        """
        self._add_plugins(plugins)
        if self.plugin_error is not None:
            return [(None, 0.0, ("crash", self.plugin_error)) for _ in wires]
        out: list[Outcome | None] = [None] * len(wires)
        left = [len(wires)]
        all_done = threading.Event()
        lock = threading.Lock()

        def finisher(i: int) -> Any:
            def done(task: Task, score: dict | None, seconds: float, failure: tuple[str, str] | None) -> None:
                with lock:
                    out[i] = (score, seconds, failure)
                    left[0] -= 1
                    if left[0] == 0:
                        all_done.set()

            return done

        tasks = [
            Task(name, module, params, pkey, sample, completion, float(timeout), finisher(i))
            for i, (name, module, params, pkey, sample, completion, timeout) in enumerate(wires)
        ]
        if not tasks:
            return []
        self._pool.submit(tasks)
        all_done.wait()
        return [o if o is not None else (None, 0.0, ("crash", "no result")) for o in out]

    def ping(self) -> float:
        """The actor's clock (the driver's liveness and round-trip check)."""
        return time.time()

    def close(self) -> None:
        """Stop the actor's worker pool (its workers and their sandbox servers)."""
        self._pool.close()


class SandboxHost:
    """The node's one sandbox server, shared by the node's scoring workers through a relay socket (one per node).

    The driver keeps one :meth:`watch` call open on it, which ends only when the host dies, and starts a new host
    at the same socket path when it does (the actor runs with ``max_concurrency`` 2 for that call).
    """

    def __init__(self, node: str) -> None:
        self.node = node
        self._relay: Any = None

    def start(self, relay: str | None = None) -> dict[str, Any]:
        """Start the relay (at ``relay``, a dead host's socket path, when given) and the server; the socket's path
        and the node's isolation level, missing layers, speed."""
        from sandbox import SandboxError, get_sandbox
        from sandbox._relay import RelayServer

        sandbox = get_sandbox()
        if self._relay is None:
            self._relay = RelayServer(sandbox, relay)
        out: dict[str, Any] = {"node": self.node, "relay": self._relay.path, "pid": os.getpid()}
        try:
            rep = sandbox.isolation()
        except SandboxError as e:  # the relay still answers: every code call then says sandbox_error, with this
            return {**out, "level": None, "missing": [], "error": str(e)}
        return {**out, "level": rep.level, "missing": list(rep.missing), "speed": rep.speed_factor}

    def watch(self) -> None:
        """Never returns while the host lives: the driver learns of its death when this call fails."""
        threading.Event().wait()
