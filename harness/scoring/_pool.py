"""A pool of warm scoring workers with a hard wall-clock limit per call, enforced by killing the worker.

One dispatcher thread owns the workers. It hands each idle worker a small chunk of tasks, reads results as they
come, and watches two things: the time the worker has spent on the task at the head of its chunk (past the
deadline: SIGKILL, ``Score(None, "timeout")``, a fresh worker, the rest of the chunk re-queued) and the worker's
process sentinel (a crash, ``os._exit`` or the OOM killer: ``Score(None, "error")`` for the running task only).
Tasks from any number of jobs share the pool, so the trainer can score one batch while it generates the next.

This module knows nothing of caching, weights or totals (see :mod:`harness.scoring._session`).
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
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

from harness.errors import ScoringError
from harness.scoring._worker import worker_main

__all__ = ["Task", "WorkerPool", "default_pool", "shutdown_default_pool"]

log = logging.getLogger(__name__)

_CHUNK_MAX = 16
_START_TIMEOUT_S = 120.0
#: Extra seconds for the first call of a reward in a worker, which also builds the plugin (a tokenizer, a sandbox).
BUILD_GRACE_S = 60.0


@dataclass
class Task:
    """One reward call: ``name(params)(sample, completion)`` with a wall-clock limit."""

    name: str
    module: str
    params: dict[str, Any]
    params_key: str
    sample: dict[str, Any]
    completion: str
    timeout: float
    done: Callable[[Task, dict[str, Any] | None, float, tuple[str, str] | None], None]
    tid: int = 0

    def wire(self) -> tuple:
        return (self.tid, self.name, self.module, self.params, self.params_key, self.sample, self.completion)


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    ready: bool = False
    started: float = field(default_factory=time.monotonic)
    inflight: collections.deque = field(default_factory=collections.deque)
    head_since: float = 0.0
    built: set = field(default_factory=set)  # (name, params_key) of plugins this worker has built


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


class WorkerPool:
    """``workers`` warm processes serving :class:`Task` s; see the module docstring."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        memory_limit_mb: int | None = 8192,
        start_method: str = "spawn",
        build_grace_s: float = BUILD_GRACE_S,
    ):
        self.size = max(1, workers or os.cpu_count() or 1)
        self.build_grace_s = build_grace_s
        self.memory_limit_mb = memory_limit_mb
        self._ctx = mp.get_context(start_method)
        self._queue: collections.deque[Task] = collections.deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._workers: list[_Worker] = []
        self._ids = itertools.count(1)
        self._closed = False
        self.restarts = 0
        self._thread = threading.Thread(target=self._run, name="grpo-harness-scoring", daemon=True)
        self._thread.start()

    # -- public -----------------------------------------------------------------------------------------
    def submit(self, tasks: list[Task]) -> None:
        """Queue ``tasks``; each one's ``done(task, score_dict | None, seconds, (kind, reason) | None)`` is called once."""
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
        for w in self._workers:
            self._kill(w)
        self._fail_all("the scoring pool was closed")
        self._workers.clear()

    # -- dispatcher -------------------------------------------------------------------------------------
    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"x")
        except OSError:
            pass

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=worker_main, args=(child, self.memory_limit_mb), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc=proc, conn=parent)

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
        self.restarts += 1
        if w.inflight:
            head = w.inflight.popleft()
            head.done(head, None, time.monotonic() - w.head_since, (kind, failure))
        with self._lock:
            self._queue.extendleft(reversed(w.inflight))
        self._workers[self._workers.index(w)] = self._spawn()

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
                w.conn.send(("tasks", [t.wire() for t in chunk]))
            except (OSError, ValueError) as e:
                w.inflight.extend(chunk)
                self._replace(w, f"could not send to worker: {e}")
                continue
            w.inflight.extend(chunk)
            w.head_since = time.monotonic()

    def _on_message(self, w: _Worker) -> None:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):
            self._replace(w, None)
            return
        if msg[0] == "ready":
            w.ready = True
            return
        _, tid, score, seconds = msg
        if w.inflight and w.inflight[0].tid == tid:
            t = w.inflight.popleft()
            w.built.add((t.name, t.params_key))
            t.done(t, score, seconds, None)
        w.head_since = time.monotonic()

    def _check_deadlines(self) -> float:
        now, wait_s = time.monotonic(), 0.5
        for w in list(self._workers):
            if not w.ready:
                if now - w.started > _START_TIMEOUT_S:
                    raise ScoringError(f"a scoring worker did not start within {_START_TIMEOUT_S:.0f} s")
                continue
            if w.inflight:
                head = w.inflight[0]
                grace = 0.0 if (head.name, head.params_key) in w.built else self.build_grace_s
                left = head.timeout + grace - (now - w.head_since)
                if left <= 0:
                    self._replace(w, f"reward {head.name!r} ran past its {head.timeout:g} s wall-clock limit; worker killed", "timeout")
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
                for w in self._workers:
                    by_obj[w.conn] = w
                    by_obj[w.proc.sentinel] = w
                ready = wait([self._wake_r, *by_obj], timeout=timeout)
                for r in ready:
                    if r is self._wake_r:
                        while self._wake_r.poll():
                            self._wake_r.recv_bytes()
                        continue
                    w = by_obj[r]
                    if w not in self._workers:
                        continue  # replaced while handling an earlier event
                    if r is w.conn or w.conn.poll():
                        while w in self._workers and w.conn.poll():
                            self._on_message(w)
                    elif not w.proc.is_alive():
                        self._replace(w, None)
        except BaseException as e:  # the dispatcher must never die silently: fail everything it holds
            log.error("scoring dispatcher stopped: %s: %s", type(e).__name__, e, exc_info=True)
            self._closed = True
            self._fail_all(f"scoring pool failed: {type(e).__name__}: {e}")

    def _fail_all(self, reason: str) -> None:
        pending = []
        for w in self._workers:
            pending.extend(w.inflight)
            w.inflight.clear()
        with self._lock:
            pending.extend(self._queue)
            self._queue.clear()
        for t in pending:
            t.done(t, None, 0.0, ("crash", reason))


_DEFAULT: dict[tuple, WorkerPool] = {}
_DEFAULT_LOCK = threading.Lock()


def default_pool(workers: int | None = None, memory_limit_mb: int | None = 8192) -> WorkerPool:
    """The process-wide pool for a given size, started on first use and stopped at exit."""
    key = (max(1, workers or os.cpu_count() or 1), memory_limit_mb)
    with _DEFAULT_LOCK:
        pool = _DEFAULT.get(key)
        if pool is None or pool._closed:
            pool = _DEFAULT[key] = WorkerPool(key[0], memory_limit_mb=memory_limit_mb)
        return pool


@atexit.register
def shutdown_default_pool() -> None:
    """Stop every default pool (also registered with atexit)."""
    with _DEFAULT_LOCK:
        for pool in _DEFAULT.values():
            pool.close()
        _DEFAULT.clear()
