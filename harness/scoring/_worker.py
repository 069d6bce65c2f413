"""The scoring worker: a warm process that builds reward plugins once and scores tasks sent over a pipe.

It runs in its own process so that a plugin that hangs, segfaults, calls ``os._exit`` or eats all memory takes
down only this worker; the pool (:mod:`harness.scoring._pool`) kills it at the deadline and starts another.
Inside, a plugin exception becomes ``Score(None, "error")``. The worker enforces nothing about time itself.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["worker_main"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the loop
        pass


def _limit_memory(memory_limit_mb: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_limit_mb:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = memory_limit_mb * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def _safe_info(info: dict[str, Any]) -> dict[str, Any]:
    import json

    try:
        json.dumps(info)
        return info
    except (TypeError, ValueError):
        return {str(k): v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in info.items()}


def _build(name: str, module: str, params: dict) -> Any:
    import importlib

    from harness.errors import UnknownRewardError
    from harness.registry import get_reward

    try:
        return get_reward(name, **params)
    except UnknownRewardError:
        if module in ("", "__main__", "__mp_main__"):
            raise
        importlib.import_module(module)  # user code that registered the reward in the parent
        return get_reward(name, **params)


def _score_one(fns: dict, task: tuple) -> dict:
    from harness.types import Score

    _, name, module, params, params_key, sample, completion = task
    key = (name, params_key)
    try:
        fn = fns.get(key)
        if fn is None:
            fn = fns[key] = _build(name, module, params)
        score = fn(sample, completion)
    except MemoryError:
        score = Score.unscored("error", f"reward {name!r} ran out of memory (MemoryError)", exception="MemoryError")
    except BaseException as e:  # SystemExit from sys.exit() in a plugin, registry errors: this sample only
        if isinstance(e, KeyboardInterrupt):
            raise
        score = Score.unscored("error", f"reward {name!r} raised {type(e).__name__}: {e}", exception=type(e).__name__)
    d = score.model_dump()
    d["info"] = _safe_info(d["info"])
    return d


def _preload() -> None:
    """Import the built-in and plugin reward modules before saying ready, so no call's clock pays for them."""
    from harness.registry import list_rewards

    try:
        list_rewards()
    except Exception:  # a broken reward module shows up again, per task, as that task's error
        pass


def worker_main(conn: Connection, memory_limit_mb: int | None) -> None:
    """Serve ``("tasks", [(tid, name, module, params, params_key, sample, completion), ...])`` until the pipe closes."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _limit_memory(memory_limit_mb)
    fns: dict = {}
    _preload()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        _, tasks = msg
        for task in tasks:
            t0 = time.perf_counter()
            out = _score_one(fns, task)
            try:
                conn.send(("done", task[0], out, time.perf_counter() - t0))
            except (BrokenPipeError, OSError):
                return
