"""A pool of warm scoring workers with a hard wall-clock limit per call, enforced by killing the worker.

One dispatcher thread owns the workers. It hands each idle worker a small chunk of tasks, reads results as they
come, and watches two things: the time the worker has spent on the task at the head of its chunk (past the
deadline: SIGKILL, ``Score(None, "timeout")``, a fresh worker, the rest of the chunk re-queued) and the worker's
process sentinel (a crash, ``os._exit`` or the OOM killer: ``Score(None, "error")`` for the running task only).
Tasks from any number of jobs share the pool, so the trainer can score one batch while it generates the next.

The limit is the limit: a call's clock starts when its plugin is built, and building is a phase of its own that
the worker reports (``"built"``). The first build of a plugin in a pool may take up to ``build_grace_s`` (a
tokenizer, a sandbox); once one build has finished, later builds of that plugin are bounded by a few times the
measured time, and once a build has run out its grace, later builds get none. Every worker that replaces a
killed one builds the plugins the pool has already built *before* it takes a task, and after the first
replacement the pool keeps one warm spare, so a plugin that hangs on every call costs its limit per call plus
the kill, not a worker start and a build grace.

The task and plugin records are :mod:`harness.scoring._task`. This module knows nothing of caching, weights or
totals (see :mod:`harness.scoring._session`).
"""

from __future__ import annotations

import atexit
import collections
import itertools
import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from typing import Any, Literal

from harness.errors import ScoringError
from harness.registry import BUILTIN_MODULES, default_registry
from harness.scoring._task import KnownPlugin, Task, TaskPool
from harness.scoring._worker import worker_main

__all__ = ["KnownPlugin", "Task", "TaskPool", "WorkerPool", "default_pool", "shutdown_default_pool"]

log = logging.getLogger(__name__)

_CHUNK_MAX = 16
#: Modules the fork server imports once, so that a new worker starts warm (the registry imports the rewards).
_PRELOAD = ("harness.scoring._worker", "harness.registry", *BUILTIN_MODULES)
_START_TIMEOUT_S = 120.0
#: Seconds the first build of a plugin in a pool may take (a tokenizer, a sandbox); never added to a call's limit.
BUILD_GRACE_S = 60.0
#: A later build of a plugin may take this many times the measured first build, plus ``_REBUILD_SLACK_S``.
_REBUILD_FACTOR = 3.0
_REBUILD_SLACK_S = 2.0
#: The dispatcher looks at its deadlines at least this often (seconds of real time).
_POLL_S = 0.5


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    ready: bool = False
    warming: bool = False  # building the pool's known plugins before its first task
    started: float = 0.0  # the pool's clock when the process started (or began warming)
    inflight: collections.deque[Task] = field(default_factory=collections.deque)
    head_since: float = 0.0
    building: bool = False  # the head task's plugin is being built; its call clock has not started
    built: set = field(default_factory=set)  # (name, params_key) of plugins this worker has built
    nplugins: int = 0  # how many of the registry's user plugins this worker has been told to import


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


StartMethod = Literal["forkserver", "spawn", "fork"]


def _context(method: StartMethod) -> ForkServerContext | SpawnContext | ForkContext:
    """The multiprocessing context of ``method``, typed as the concrete context (they have ``Process``)."""
    if method == "forkserver":
        return mp.get_context("forkserver")
    return mp.get_context("spawn") if method == "spawn" else mp.get_context("fork")


class WorkerPool:
    """``workers`` warm processes serving :class:`Task` s; see the module docstring."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        memory_limit_mb: int | None = 8192,
        start_method: StartMethod = "forkserver",
        build_grace_s: float = BUILD_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``clock`` reads seconds for every limit and latency (tests pass a clock they move by hand)."""
        self.size = max(1, workers or os.cpu_count() or 1)
        self._clock = clock
        self.build_grace_s = build_grace_s
        self.memory_limit_mb = memory_limit_mb
        if start_method == "forkserver" and _in_forked_child:
            start_method = "spawn"  # the parent's fork-server state came along with the fork and is not ours to use
        self._ctx = _context(start_method)
        if start_method == "forkserver":  # a replacement worker is a fork of a warm process: milliseconds, not seconds
            self._ctx.set_forkserver_preload(list(_PRELOAD))
        self._queue: collections.deque[Task] = collections.deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._workers: list[_Worker] = []
        self._spare: _Worker | None = None
        self._ids = itertools.count(1)
        self._closed = False
        self.restarts = 0
        self._known: dict[tuple[str, str], KnownPlugin] = {}  # by (name, params_key)
        self._grace_spent: set[tuple[str, str]] = set()  # plugins whose first build ran out its grace
        self._thread = threading.Thread(target=self._run, name="grpo-harness-scoring", daemon=True)
        self._thread.start()

    # -- public -----------------------------------------------------------------------------------------
    def submit(self, tasks: list[Task]) -> None:
        """Queue ``tasks``; each one's ``done(task, score_dict | None, seconds, (kind, reason) | None)`` runs once."""
        if self._closed:
            raise ScoringError("the scoring pool is closed")
        with self._lock:
            for t in tasks:
                t.tid = next(self._ids)
                self._queue.append(t)
        self._wake()

    def close(self) -> None:
        """Stop the dispatcher and every worker; queued tasks are failed."""
        if self._closed:
            return
        self._closed = True
        self._wake()
        self._thread.join(timeout=10)
        for w in self._all():
            self._kill(w)
        self._fail_all("the scoring pool was closed")
        self._workers.clear()
        self._spare = None

    def build_limit(self, key: tuple[str, str], timeout: float) -> float:
        """Seconds a worker may spend building plugin ``key`` before the call's own clock starts.

        The first build in this pool gets ``build_grace_s``; once a build has finished, later ones get a few
        times the measured time (at most the grace); once a first build ran out its grace, later ones get
        nothing beyond the call's ``timeout``.
        """
        known = self._known.get(key)
        if known is not None:
            return min(self.build_grace_s, _REBUILD_FACTOR * known.build_s + _REBUILD_SLACK_S)
        return timeout if key in self._grace_spent else self.build_grace_s

    # -- dispatcher -------------------------------------------------------------------------------------
    def _all(self) -> list[_Worker]:
        return self._workers + ([self._spare] if self._spare is not None else [])

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"x")
        except OSError:
            pass

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        plugins = tuple(default_registry().plugins)  # user plugins (--plugin): every worker imports them too
        args = (child, self.memory_limit_mb, plugins, dict(os.environ))  # the environment of now, as spawn would
        proc = self._ctx.Process(target=worker_main, args=args, daemon=True)
        proc.start()
        child.close()
        return _Worker(proc=proc, conn=parent, nplugins=len(plugins), started=self._clock())

    def _kill(self, w: _Worker) -> None:
        try:
            if w.proc.is_alive():
                os.kill(w.proc.pid, signal.SIGKILL)
            w.proc.join(timeout=5)
        except (OSError, ValueError, AssertionError):
            pass
        try:
            w.conn.close()
        except OSError:
            pass

    def _replace(self, w: _Worker, failure: str | None, kind: str = "crash") -> None:
        """Fail ``w``'s running task with ``(kind, failure)``, requeue the rest of its chunk, start a new worker."""
        if kind == "crash":
            w.proc.join(timeout=0.5)  # let a dying worker finish exiting so its exit code is known
        self._kill(w)
        if failure is None:
            failure = _describe_exit(w.proc.exitcode)
        if w is self._spare:  # a spare that died while warming: just start another
            self._spare = self._spawn()
            return
        self.restarts += 1
        if w.inflight:
            head = w.inflight.popleft()
            if w.building and kind == "timeout" and head.key not in self._known:
                self._grace_spent.add(head.key)
            head.done(head, None, self._clock() - w.head_since, (kind, failure))
        with self._lock:
            self._queue.extendleft(reversed(w.inflight))
        # a worker that was killed once may well be killed again: keep one warm spare from now on
        new, self._spare = (self._spare or self._spawn()), self._spawn()
        self._workers[self._workers.index(w)] = new

    def _start_head(self, w: _Worker) -> None:
        w.head_since = self._clock()
        w.building = bool(w.inflight) and w.inflight[0].key not in w.built

    def _assign(self) -> None:
        for w in self._workers:
            if not w.ready or w.inflight:
                continue
            with self._lock:
                if not self._queue:
                    return
                n = max(1, min(_CHUNK_MAX, len(self._queue) // self.size))
                chunk = [self._queue.popleft() for _ in range(min(n, len(self._queue)))]
            try:
                plugins = default_registry().plugins
                if len(plugins) > w.nplugins:  # added (--plugin, plugins:) after this worker started
                    w.conn.send(("plugins", plugins[w.nplugins :]))
                    w.nplugins = len(plugins)
                w.conn.send(("tasks", [t.wire() for t in chunk]))
            except (OSError, ValueError) as e:
                w.inflight.extend(chunk)
                self._replace(w, f"could not send to worker: {e}")
                continue
            w.inflight.extend(chunk)
            self._start_head(w)

    def _on_ready(self, w: _Worker) -> None:
        """A worker started (or finished warming): build the plugins the pool knows first, then take tasks."""
        todo = [k for k in self._known if k not in w.built]
        if w.warming or not todo:  # a plugin learned while it warmed is built with its first call
            w.ready, w.warming = True, False
            return
        try:
            w.conn.send(("build", [self._known[k].wire() for k in todo]))
        except (OSError, ValueError):
            return  # its sentinel shows the death next
        w.warming, w.started = True, self._clock()

    def _on_message(self, w: _Worker) -> None:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):
            self._replace(w, None)
            return
        if msg[0] == "ready":
            w.built.update(tuple(k) for k in (msg[2] if len(msg) > 2 else ()))
            self._on_ready(w)
            return
        if msg[0] == "built":  # the head's plugin is built: its call clock starts now
            _, tid, seconds = msg
            if w.inflight and w.inflight[0].tid == tid:
                t = w.inflight[0]
                w.built.add(t.key)
                if t.key not in self._known:
                    self._known[t.key] = KnownPlugin(t.name, t.module, t.params, t.params_key, float(seconds))
                w.building, w.head_since = False, self._clock()
            return
        _, tid, score, seconds = msg
        if w.inflight and w.inflight[0].tid == tid:
            t = w.inflight.popleft()
            t.done(t, score, seconds, None)
        self._start_head(w)

    def _check_deadlines(self) -> float:
        now, wait_s = self._clock(), _POLL_S  # the poll also notices a clock that tests move by hand
        for w in self._all():
            if not w.ready:
                limit = _START_TIMEOUT_S + (self.build_grace_s if w.warming else 0.0)
                if now - w.started > limit:
                    raise ScoringError(f"a scoring worker did not start within {limit:.0f} s")
                continue
            if w.inflight:
                head = w.inflight[0]
                limit = self.build_limit(head.key, head.timeout) if w.building else head.timeout
                left = limit - (now - w.head_since)
                if left <= 0 and w.building:
                    self._replace(
                        w, f"reward {head.name!r} took more than {limit:g} s to build; worker killed", "timeout"
                    )
                elif left <= 0:
                    self._replace(
                        w,
                        f"reward {head.name!r} ran past its {head.timeout:g} s wall-clock limit; worker killed",
                        "timeout",
                    )
                else:
                    wait_s = min(wait_s, left)
        return max(wait_s, 0.001)

    def _run(self) -> None:
        try:
            self._workers = [self._spawn() for _ in range(self.size)]
            while not self._closed:
                self._assign()
                timeout = self._check_deadlines()
                by_obj: dict[Any, _Worker] = {}
                for w in self._all():
                    by_obj[w.conn] = w
                    by_obj[w.proc.sentinel] = w
                ready = wait([self._wake_r, *by_obj], timeout=timeout)
                for r in ready:
                    if r is self._wake_r:
                        while self._wake_r.poll():
                            self._wake_r.recv_bytes()
                        continue
                    w = by_obj[r]
                    if w not in self._all():
                        continue  # replaced while handling an earlier event
                    if r is w.conn or w.conn.poll():
                        while w in self._all() and w.conn.poll():
                            self._on_message(w)
                    elif not w.proc.is_alive():
                        self._replace(w, None)
        except BaseException as e:  # the dispatcher must never die silently: fail everything it holds
            log.error("scoring dispatcher stopped: %s: %s", type(e).__name__, e, exc_info=True)
            self._closed = True
            self._fail_all(f"scoring pool failed: {type(e).__name__}: {e}")

    def _fail_all(self, reason: str) -> None:
        pending: list[Task] = []
        for w in self._workers:
            pending.extend(w.inflight)
            w.inflight.clear()
        with self._lock:
            pending.extend(self._queue)
            self._queue.clear()
        for t in pending:
            t.done(t, None, 0.0, ("crash", reason))


_DEFAULT: dict[tuple, WorkerPool] = {}
_in_forked_child = False
_DEFAULT_LOCK = threading.Lock()


def default_pool(workers: int | None = None, memory_limit_mb: int | None = 8192) -> WorkerPool:
    """The process-wide pool for a given size, started on first use and stopped at exit."""
    key = (max(1, workers or os.cpu_count() or 1), memory_limit_mb)
    with _DEFAULT_LOCK:
        pool = _DEFAULT.get(key)
        if pool is None or pool._closed:
            pool = _DEFAULT[key] = WorkerPool(key[0], memory_limit_mb=memory_limit_mb)
        return pool


def _forget_inherited_pools() -> None:
    """In a forked child: the parent's pools arrive without their dispatcher threads, so the child starts its own."""
    global _DEFAULT_LOCK, _in_forked_child
    _in_forked_child = True
    _DEFAULT.clear()
    _DEFAULT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_inherited_pools)


@atexit.register
def shutdown_default_pool() -> None:
    """Stop every default pool (also registered with atexit)."""
    with _DEFAULT_LOCK:
        for pool in _DEFAULT.values():
            pool.close()
        _DEFAULT.clear()
