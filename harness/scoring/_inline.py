"""Inline plugins on threads, without blocking the caller: one thread pool per reward, one deadline watcher.

``submit`` hands a call to the reward's own pool and returns at once, so a slow ``inline`` reward (an LLM judge
waiting on the network) neither holds up the rest of the batch nor other rewards. Each reward's pool is as wide
as its score function's ``max_concurrency`` attribute (default :data:`DEFAULT_THREADS`). A call's limit starts
when it starts running, not while it waits for a thread; one watcher thread ends calls that run past their
limit by reporting a timeout. Threads cannot be killed, so a stuck call's thread is abandoned (it keeps its
pool slot); that is why only plugins whose cost is bounded may run inline.

This module does not cache, build plugins, or run ``process`` plugins (see :mod:`harness.scoring._session`).
"""

from __future__ import annotations

import concurrent.futures as cf
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["InlineRunner", "DEFAULT_THREADS"]

DEFAULT_THREADS = 4
#: The deadline watcher looks at its clock at least this often (seconds of real time).
_POLL_S = 0.5
#: done(score dict or None, seconds, failure (kind, reason) or None), called exactly once per call.
Done = Callable[[Any, float, "tuple[str, str] | None"], None]


class _Call:
    __slots__ = ("done", "finished", "lock", "t0", "open", "clock")

    def __init__(self, done: Done, open_calls: set[_Call], clock: Callable[[], float]) -> None:
        self.done, self.finished, self.lock, self.open = done, False, threading.Lock(), open_calls
        self.clock = clock
        self.t0: float | None = None  # None until the call starts running

    def finish(self, score: Any, failure: tuple[str, str] | None) -> None:
        with self.lock:
            if self.finished:
                return
            self.finished = True
            self.open.discard(self)
        self.done(score, self.clock() - self.t0 if self.t0 is not None else 0.0, failure)


class InlineRunner:
    """Run ``fn(sample, completion)`` for inline rewards on per-reward thread pools under a wall-clock limit."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.perf_counter) -> None:
        """``clock`` reads seconds for limits and latencies (tests pass a clock they move by hand)."""
        self.timeout = timeout
        self._clock = clock
        self._pools: dict[str, cf.ThreadPoolExecutor] = {}
        self._heap: list[tuple[float, int, _Call, str]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._watcher: threading.Thread | None = None
        self._closed = False
        self._open: set[_Call] = set()

    def submit(self, name: str, fn: Callable[..., Any], width: int, sample: Any, completion: str, done: Done) -> None:
        """Start ``fn`` on reward ``name``'s pool; ``done`` gets ``fn``'s result as a dict (``model_dump``)."""
        pool = self._pools.get(name)
        if pool is None:
            pool = self._pools[name] = cf.ThreadPoolExecutor(max(1, width), thread_name_prefix=f"grpo-harness-{name}")
        call = _Call(done, self._open, self._clock)
        self._open.add(call)
        reason = f"reward {name!r} ran past its {self.timeout:g} s limit (thread abandoned)"
        pool.submit(self._run, call, fn, sample, completion, reason)

    def _run(self, call: _Call, fn: Callable[..., Any], sample: Any, completion: str, reason: str) -> None:
        call.t0 = self._clock()
        self._watch(call, call.t0 + self.timeout, reason)
        try:
            out = fn(sample, completion)
        except BaseException as e:  # RewardFn already turns plugin exceptions into Scores; this is a last guard
            call.finish(None, ("crash", f"{type(e).__name__}: {e}"))
            raise
        call.finish(out.model_dump(), None)

    def _watch(self, call: _Call, deadline: float, reason: str) -> None:
        with self._cv:
            heapq.heappush(self._heap, (deadline, next(self._seq), call, reason))
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._loop, name="grpo-harness-inline-deadlines", daemon=True)
                self._watcher.start()
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._closed and (not self._heap or self._heap[0][0] > self._clock()):
                    # at least every _POLL_S: a clock moved by hand does not notify
                    wait = min(_POLL_S, self._heap[0][0] - self._clock()) if self._heap else None
                    self._cv.wait(wait)
                if self._closed:
                    return
                _, _, call, reason = heapq.heappop(self._heap)
            call.finish(None, ("timeout", reason))  # a no-op when the call already finished

    def close(self) -> None:
        """Stop the watcher, cancel queued calls, and report every open call as ended by the close."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
        for call in list(self._open):  # queued (cancelled) and running calls report now: no batch waits forever
            call.finish(None, ("crash", "the scoring session was closed before this call finished"))
