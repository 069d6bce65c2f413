"""Reward plugins that misbehave on purpose, for the scoring path's fault-injection tests.

``test_faulty``'s faults fire only for their trigger completion, so a batch mixes faulty and healthy samples;
``test_hang`` and ``test_slow_build`` hang on every call, ``test_env`` ends its worker only for ``exit``.
"""

from __future__ import annotations

import ctypes
import os
import time

from harness import Score, reward

__all__: list[str] = []


@reward("test_faulty", reads=())
def test_faulty(*, scale: float = 1.0):
    """Value = scale * len(completion); completions named after a fault trigger it."""
    if scale <= 0:
        raise ValueError("scale must be positive")

    def score(sample, completion: str) -> Score | float:
        if completion == "raise":
            raise ZeroDivisionError("plugin bug")
        if completion == "loop":
            while True:
                pass
        if completion == "sleep":
            time.sleep(3600)
        if completion == "exit":
            os._exit(7)
        if completion == "segfault":
            ctypes.string_at(0)
        if completion == "membomb":
            hog = []
            while True:
                hog.append(bytearray(64 * 1024 * 1024))
        if completion == "sysexit":
            raise SystemExit(0)
        if completion == "float":
            return 0.25  # plain floats are accepted
        return Score(value=scale * len(completion), answer=completion)

    return score


@reward("test_counter", cacheable=True, reads=())
def test_counter():
    """Value = len(completion); ``info`` carries the worker's pid and the time, so tests can see whether a result
    came from the cache (a cached Score repeats them)."""

    def score(sample, completion: str) -> Score:
        return Score(value=float(len(completion)), info={"pid": os.getpid(), "t": time.time()})

    return score


@reward("test_hang", reads=(), cacheable=False)
def test_hang():
    """Never returns: every call sleeps far past any limit."""

    def score(sample, completion: str) -> Score:
        time.sleep(3600)
        return Score(value=0.0)

    return score


@reward("test_slow_build", reads=(), cacheable=False)
def test_slow_build(*, build_s: float = 1.5):
    """Takes ``build_s`` to build in a scoring worker (not in the parent's load check); every call hangs."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        time.sleep(build_s)

    def score(sample, completion: str) -> Score:
        time.sleep(3600)
        return Score(value=0.0)

    return score


@reward("test_env", reads=(), cacheable=False)
def test_env():
    """Reports GRPO_HARNESS_TEST_ENV as the worker sees it; ``exit`` ends the worker."""

    def score(sample, completion: str) -> Score:
        if completion == "exit":
            os._exit(3)
        return Score(value=1.0, info={"value": os.environ.get("GRPO_HARNESS_TEST_ENV")})

    return score
