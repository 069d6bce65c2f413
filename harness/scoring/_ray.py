"""The Ray scoring backend: the local pool's :class:`Task` interface, with calls run by actors on a Ray cluster.

:class:`RayPool` has the two methods a :class:`~harness.scoring.ScoringSession` uses of a pool (``submit`` and
``close``), so the session's cache, inline rewards, statuses and telemetry are the same on both backends. Each
actor (:mod:`harness.scoring._ray_actor`) wraps a one-worker local pool, which keeps the per-call hard kill, the
crash isolation and the unscored-not-zero semantics of the local pool on every node.

Placement: ``actors_per_node`` actors on every alive node with CPUs (default: the node's CPU count), pinned to
the node and reserving no CPU of Ray's own accounting, so the placement is exactly the setting; beside them one
sandbox host per node, whose one sandbox server runs every code call of the node's actors and whose isolation level
is reported per node (``nodes`` and a log line); a host that dies on a live node is started again, at the same relay
path, before the dispatcher's next step (the calls it held are ``sandbox_error``). Back-pressure:
``submit`` only queues and returns; one dispatcher thread keeps at most ``inflight_per_actor`` chunks on each actor.
A node or actor lost mid-batch fails the calls it held with ``("crash", "... lost ...")`` (``Score(None,
"error")``), the actor is replaced when its node is still alive, and the rest of the batch goes on elsewhere. A
call that does not come back within a generous bound (its tasks' limits plus the build grace) is failed the same
way and its actor killed, so no batch waits forever on a node that vanished without a word.

Ray is imported only here and only when a :class:`RayPool` is made; the local path never imports it.
This module does not run rewards (the actors' worker processes do) and does not cache (the session does).
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
from typing import Any

from harness.errors import ScoringError
from harness.scoring._pool import _CHUNK_MAX, BUILD_GRACE_S
from harness.scoring._ray_actor import SandboxHost, ScoringActor, node_label
from harness.scoring._ray_link import RAY_MISSING, _Actor, _Call, _check_reachable, _import_ray, _shipment
from harness.scoring._task import Task

__all__ = ["RayPool", "ray_pool", "shutdown_ray_pools", "RAY_MISSING"]

log = logging.getLogger(__name__)

#: Seconds the actors get to start and report (workers import the rewards; a node may be slow).
_START_TIMEOUT_S = 180.0
#: Slack on top of a call's own limits before the driver gives up on the actor that holds it.
_CALL_SLACK_S = 60.0
#: The dispatcher's poll of in-flight calls (seconds).
_POLL_S = 0.05
#: Replacements of one node's actors that fail in a row before the node is given up.
_MAX_REPLACE_FAILURES = 3


class RayPool:
    """Reward calls on Ray actors; see the module docstring.

    Args:
        address: ``None`` starts a local Ray instance (stopped by :meth:`close`); ``"auto"`` or ``HOST:PORT``
            joins a running cluster. When this process already called ``ray.init``, that instance is used.
        actors_per_node: scoring actors on each node (default: the node's CPUs).
        memory_limit_mb: address-space limit of each actor's worker process.
        inflight_per_actor: chunks queued on one actor at once (2 hides the round trip).
        num_cpus: CPUs of a local instance this pool starts (default: this machine's).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors_per_node: int | None = None,
        memory_limit_mb: int | None = 8192,
        inflight_per_actor: int = 2,
        num_cpus: int | None = None,
    ) -> None:
        self.ray = ray = _import_ray()
        self._own_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            if address in (None, "", "local"):
                kwargs.update(address="local", num_cpus=num_cpus, _node_ip_address="127.0.0.1")
                kwargs["object_store_memory"] = 200 * 1024 * 1024  # scoring moves kilobytes; keep /dev/shm free
            else:
                kwargs["address"] = address
                _check_reachable(address)
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = f"the Ray cluster at {address!r}" if kwargs["address"] != "local" else "a local Ray instance"
                raise ScoringError(f"scoring.backend ray: could not start or reach {where}: {e}") from None
            self._own_ray = True
        self.actors_per_node = actors_per_node
        self.memory_limit_mb = memory_limit_mb
        self.inflight_per_actor = max(1, inflight_per_actor)
        self._remote = ray.remote(ScoringActor)
        self._queue: collections.deque[Task] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._replace_failures: collections.Counter[str] = collections.Counter()
        self.nodes: dict[str, dict[str, Any]] = {}  # node label -> info, isolation and actor count
        self.lost_calls = 0
        self._hosts: dict[str, Any] = {}  # node id -> its sandbox host actor
        self._watches: dict[str, Any] = {}  # node id -> its host's open watch call (ends when the host dies)
        self.host_restarts = 0
        self._actors: list[_Actor] = []
        try:
            self._actors = self._start_actors()
        except BaseException:
            self._kill_actors()
            self._stop_ray()
            raise
        self._thread = threading.Thread(target=self._run, name="grpo-harness-ray-scoring", daemon=True)
        self._thread.start()
        # registered after Ray's own exit handler, so it runs first: a call after ray.shutdown would start a new Ray
        atexit.register(self.close)

    # -- start ----------------------------------------------------------------------------------------------
    def _placed(self, node_id: str) -> dict[str, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}

    def _new_actor(self, node_id: str, node: str) -> Any:
        relay = self.nodes.get(node, {}).get("relay")
        return self._remote.options(
            max_concurrency=self.inflight_per_actor + 2,  # run() calls, plus info while they run
            **self._placed(node_id),
        ).remote(node, relay, _shipment(), 1, self.memory_limit_mb)

    def _start_actors(self) -> list[_Actor]:
        ray = self.ray
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise ScoringError("the Ray cluster has no alive node with CPUs to score on")
        labels = {n["NodeID"]: node_label(n.get("NodeManagerAddress", "?"), n["NodeID"]) for n in nodes}
        self._start_hosts(labels)
        handles = []
        for n in nodes:
            count = self.actors_per_node or max(1, int(n["Resources"]["CPU"]))
            handles += [(self._new_actor(n["NodeID"], labels[n["NodeID"]]), n["NodeID"]) for _ in range(count)]
        try:
            infos = ray.get([h.info.remote() for h, _ in handles], timeout=_START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self._actors = [_Actor(h, "", nid) for h, nid in handles]  # for the clean-up
            raise ScoringError(f"Ray scoring actors did not start within {_START_TIMEOUT_S:.0f} s") from None
        actors = [_Actor(h, i["node"], nid) for (h, nid), i in zip(handles, infos, strict=True)]
        errors = sorted({i["plugin_error"] for i in infos if i["plugin_error"]})
        if errors:
            self._actors = actors  # for the clean-up
            raise ScoringError("; ".join(errors))
        for a, i in zip(actors, infos, strict=True):
            entry = self.nodes[a.node]
            entry.setdefault("hostname", i["hostname"])
            entry["actors"] = entry.get("actors", 0) + 1
        for label, node in self.nodes.items():
            log.info(
                "scoring node %s (%s): %d actors, one sandbox server, isolation %s (missing: %s)",
                label,
                node.get("hostname", "?"),
                node.get("actors", 0),
                node["isolation"] or f"unavailable ({node.get('error')})",
                ", ".join(node["isolation_missing"]) or "none",
            )
        return actors

    def _start_hosts(self, labels: dict[str, str]) -> None:
        """One sandbox host per node: its server, its relay socket and its isolation report (see the actor module)."""
        self._hosts = {nid: self._new_host(nid, label) for nid, label in labels.items()}
        try:
            reports = self.ray.get([h.start.remote() for h in self._hosts.values()], timeout=_START_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            raise ScoringError(f"Ray sandbox hosts did not start within {_START_TIMEOUT_S:.0f} s") from None
        for nid, rep in zip(self._hosts, reports, strict=True):
            self._host_started(nid, rep)

    def _new_host(self, node_id: str, label: str) -> Any:
        return self.ray.remote(SandboxHost).options(max_concurrency=2, **self._placed(node_id)).remote(label)

    def _host_started(self, node_id: str, rep: dict[str, Any]) -> None:
        """Record a host's report on its node and keep its :meth:`SandboxHost.watch` call open."""
        self.nodes.setdefault(rep["node"], {}).update(
            node_id=node_id,
            relay=rep["relay"],
            sandbox_host_pid=rep["pid"],
            isolation=rep["level"],
            isolation_missing=rep["missing"],
            error=rep.get("error"),
        )
        self._watches[node_id] = self._hosts[node_id].watch.remote()

    def _check_hosts(self) -> None:
        """Start a new sandbox host, at the same relay path, on each live node whose host died (its watch call
        ended): the node's actors keep their path, and their workers reconnect on their next code call."""
        if not self._watches:
            return
        ended, _ = self.ray.wait(list(self._watches.values()), num_returns=len(self._watches), timeout=0)
        for ref in ended:
            node_id = next(n for n, r in self._watches.items() if r == ref)
            del self._watches[node_id]
            label = next(lb for lb, info in self.nodes.items() if info["node_id"] == node_id)
            if node_id not in {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}:
                continue  # gone with its node; so are the node's actors
            self._restart_host(node_id, label)

    def _restart_host(self, node_id: str, label: str) -> None:
        relay = self.nodes[label]["relay"]
        for attempt in range(1, _MAX_REPLACE_FAILURES + 1):
            log.warning("sandbox host on scoring node %s died; starting a new one at %s", label, relay)
            self._hosts[node_id] = host = self._new_host(node_id, label)
            try:
                rep = self.ray.get(host.start.remote(relay), timeout=_START_TIMEOUT_S)
            except (self.ray.exceptions.RayError, self.ray.exceptions.GetTimeoutError) as e:
                log.warning("sandbox host on node %s failed to start (attempt %d): %s", label, attempt, e)
                try:
                    self.ray.kill(host)
                except Exception:  # noqa: BLE001 - it may be gone already
                    pass
                continue
            self.host_restarts += 1
            self._host_started(node_id, rep)
            return
        log.error("sandbox host on node %s did not start again: its code calls are sandbox_error", label)

    # -- public ---------------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Live actors (the width of the pool)."""
        return sum(a.alive for a in self._actors)

    def submit(self, tasks: list[Task]) -> None:
        """Queue ``tasks`` and return at once; each one's ``done`` runs once, on the dispatcher thread."""
        if self._closed:
            raise ScoringError("the Ray scoring pool is closed")
        with self._lock:
            self._queue.extend(tasks)
        self._wake.set()

    def close(self) -> None:
        """Stop the dispatcher and the actors; fail what is queued; stop Ray when this pool started it."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=10)
        for a in self._actors:
            self._fail_calls(a, "the Ray scoring pool was closed")
        self._kill_actors()
        with self._lock:
            queued = list(self._queue)
            self._queue.clear()
        for t in queued:
            t.done(t, None, 0.0, ("crash", "the Ray scoring pool was closed"))
        self._stop_ray()

    def _kill_actors(self) -> None:
        if not self.ray.is_initialized():
            return
        for handle in [*(a.handle for a in self._actors), *self._hosts.values()]:
            try:
                self.ray.kill(handle)
            except Exception:  # noqa: BLE001 - an actor of a lost node may already be gone
                pass

    def _stop_ray(self) -> None:
        if self._own_ray:
            self._own_ray = False
            self.ray.shutdown()

    # -- dispatcher ---------------------------------------------------------------------------------------------
    def _assign(self) -> None:
        live = [a for a in self._actors if a.alive]
        for a in live:
            while len(a.calls) < self.inflight_per_actor:
                with self._lock:
                    if not self._queue:
                        return
                    n = max(1, min(_CHUNK_MAX, len(self._queue) // (len(live) * self.inflight_per_actor)))
                    chunk = [self._queue.popleft() for _ in range(min(n, len(self._queue)))]
                wires = [(t.name, t.module, t.params, t.params_key, t.sample, t.completion, t.timeout) for t in chunk]
                ahead = sum(len(c.tasks) for c in a.calls) + len(chunk)
                bound = ahead * (max(t.timeout for t in chunk) + 5.0) + BUILD_GRACE_S + _CALL_SLACK_S
                a.calls.append(_Call(a.handle.run.remote(wires, _shipment()), chunk, time.monotonic() + bound))

    def _fail_calls(self, a: _Actor, reason: str) -> None:
        for call in a.calls:
            for t in call.tasks:
                t.node = a.node
                t.done(t, None, 0.0, ("crash", reason))
                self.lost_calls += 1
        a.calls.clear()

    def _lose(self, a: _Actor, reason: str) -> None:
        """Fail everything ``a`` holds with ``reason``; replace it when its node is still alive."""
        if not a.alive:
            return
        a.alive = False
        log.warning("scoring actor on node %s lost: %s", a.node, reason)
        self._fail_calls(a, f"scoring node {a.node} lost during the call: {reason}")
        try:
            self.ray.kill(a.handle)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        if a.node_id in alive and self._replace_failures[a.node_id] < _MAX_REPLACE_FAILURES:
            self._replace_failures[a.node_id] += 1
            self._actors.append(_Actor(self._new_actor(a.node_id, a.node), a.node, a.node_id))
        self._actors = [x for x in self._actors if x.alive]

    def _collect(self, ref: Any) -> None:
        for a in self._actors:
            for call in a.calls:
                if call.ref == ref:
                    a.calls.remove(call)
                    self._finish(a, call)
                    return

    def _finish(self, a: _Actor, call: _Call) -> None:
        try:
            outcomes = self.ray.get(call.ref)
        except self.ray.exceptions.RayError as e:
            a.calls.insert(0, call)
            self._lose(a, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return
        self._replace_failures[a.node_id] = 0
        for t, (score, seconds, failure) in zip(call.tasks, outcomes, strict=True):
            t.node = a.node
            t.done(t, score, seconds, failure)

    def _step(self) -> None:
        if not self.ray.is_initialized():  # shut down under us (its exit handler): never let a call start a new one
            raise ScoringError("Ray was shut down while the scoring pool was open")
        self._check_hosts()
        self._assign()
        refs = [c.ref for a in self._actors for c in a.calls]
        if not refs:
            self._wake.clear()  # before looking at the queue: a submit after this look sets it again
            with self._lock:
                queued = bool(self._queue)
            if queued and not any(a.alive for a in self._actors):
                self._fail_queued("no scoring actor is left on the Ray cluster")
            elif not queued:
                self._wake.wait(0.5)
            return
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=_POLL_S)
        for ref in ready:
            self._collect(ref)
        now = time.monotonic()
        for a in list(self._actors):
            if a.calls and now > a.calls[0].deadline:
                self._lose(a, "it did not answer in time (node unreachable?)")

    def _fail_queued(self, reason: str) -> None:
        with self._lock:
            queued = list(self._queue)
            self._queue.clear()
        for t in queued:
            t.done(t, None, 0.0, ("crash", reason))

    def _run(self) -> None:
        try:
            while not self._closed:
                self._step()
        except BaseException as e:  # the dispatcher must never die silently: fail everything it holds
            log.error("Ray scoring dispatcher stopped: %s: %s", type(e).__name__, e, exc_info=True)
            self._closed = True
            for a in self._actors:
                self._fail_calls(a, f"Ray scoring failed: {type(e).__name__}: {e}")
            self._fail_queued(f"Ray scoring failed: {type(e).__name__}: {e}")


_POOLS: dict[tuple, RayPool] = {}
_POOLS_LOCK = threading.Lock()


def ray_pool(
    address: str | None = None, *, actors_per_node: int | None = None, memory_limit_mb: int | None = 8192
) -> RayPool:
    """The process-wide :class:`RayPool` for these settings, started on first use and stopped at exit."""
    key = (address or None, actors_per_node, memory_limit_mb, os.getpid())
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool._closed:
            pool = _POOLS[key] = RayPool(address, actors_per_node=actors_per_node, memory_limit_mb=memory_limit_mb)
        return pool


@atexit.register
def shutdown_ray_pools() -> None:
    """Stop every process-wide Ray pool (and the local Ray instances they started); registered with atexit."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()
