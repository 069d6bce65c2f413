"""The scoring worker: a warm process that builds reward plugins once and scores tasks sent over a pipe.

It runs in its own process so that a plugin that hangs, segfaults, calls ``os._exit`` or eats all memory takes
down only this worker; the pool (:mod:`harness.scoring._pool`) kills it at the deadline and starts another.
Inside, a plugin exception becomes ``Score(None, "error")``. The worker enforces nothing about time itself; it
reports when a plugin is built, so that the pool can keep build time off a call's clock.
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


def _build_one(fns: dict, name: str, module: str, params: dict, params_key: str) -> dict | None:
    """Build a plugin into ``fns``; None when built, else the error Score (as a dict) that its call returns."""
    from harness.registry import build_reward
    from harness.types import Score

    try:
        fns[(name, params_key)] = build_reward(name, params, module)
        return None
    except MemoryError:
        score = Score.unscored("error", f"reward {name!r} ran out of memory (MemoryError)", exception="MemoryError")
    except BaseException as e:  # SystemExit from sys.exit() in a factory, registry errors: this sample only
        if isinstance(e, KeyboardInterrupt):
            raise
        score = Score.unscored("error", f"reward {name!r} raised {type(e).__name__}: {e}", exception=type(e).__name__)
    return score.model_dump()


def _score_one(fn: Any, name: str, sample: dict, completion: str) -> dict:
    from harness.types import Score

    try:
        score = fn(sample, completion)
    except MemoryError:
        score = Score.unscored("error", f"reward {name!r} ran out of memory (MemoryError)", exception="MemoryError")
    except BaseException as e:  # SystemExit from sys.exit() in a plugin: this sample only
        if isinstance(e, KeyboardInterrupt):
            raise
        score = Score.unscored("error", f"reward {name!r} raised {type(e).__name__}: {e}", exception=type(e).__name__)
    d = score.model_dump()
    d["info"] = _safe_info(d["info"])
    return d


def _add_plugins(plugins: tuple[str, ...] | list[str]) -> None:
    """Import the user plugins the parent imported; a failure shows up as the error of each task that needs them."""
    if not plugins:
        return
    from harness.errors import HarnessError
    from harness.plugins import add_plugins

    try:
        add_plugins(plugins)
    except HarnessError:
        pass


def _preload() -> None:
    """Import the built-in and plugin reward modules before saying ready, so no call's clock pays for them."""
    from harness.registry import list_rewards

    try:
        list_rewards()
    except Exception:  # a broken reward module shows up again, per task, as that task's error
        pass


def _run_task(conn: Connection, fns: dict, task: tuple) -> None:
    """Build the task's plugin if needed (then say ``built``, which starts the call's clock) and score it."""
    tid, name, module, params, params_key, sample, completion = task
    fn = fns.get((name, params_key))
    if fn is None:
        t0 = time.perf_counter()
        failed = _build_one(fns, name, module, params, params_key)
        if failed is not None:
            conn.send(("done", tid, failed, time.perf_counter() - t0))
            return
        conn.send(("built", tid, time.perf_counter() - t0))
        fn = fns[(name, params_key)]
    t0 = time.perf_counter()
    out = _score_one(fn, name, sample, completion)
    conn.send(("done", tid, out, time.perf_counter() - t0))


def worker_main(
    conn: Connection, memory_limit_mb: int | None, plugins: tuple[str, ...] = (), environ: dict[str, str] | None = None
) -> None:
    """Serve the pool until the pipe closes.

    Messages in: ``("tasks", [(tid, name, module, params, params_key, sample, completion), ...])`` and
    ``("build", [(name, module, params, params_key), ...])`` (build these before any task) and ``("plugins",
    [module_or_file, ...])`` (import these user plugins). Messages out:
    ``("ready", pid, built_keys)``, ``("built", tid, seconds)`` when a task's plugin is built, ``("done", tid,
    score_dict, seconds)``. ``plugins`` are the user plugins the parent's registry imports (``--plugin``);
    ``environ`` is the parent's environment when the worker started (a fork server's own may be older).
    """
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _limit_memory(memory_limit_mb)
    fns: dict = {}
    _add_plugins(plugins)
    _preload()
    conn.send(("ready", os.getpid(), []))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        try:
            if msg[0] == "plugins":
                _add_plugins(msg[1])
                continue
            if msg[0] == "build":
                for name, module, params, params_key in msg[1]:
                    _build_one(fns, name, module, params, params_key)
                conn.send(("ready", os.getpid(), list(fns)))
                continue
            for task in msg[1]:
                _run_task(conn, fns, task)
        except (BrokenPipeError, OSError):
            return
