"""Reward plugins for the Ray backend's tests: a call that takes a set time, and one that reports its process.

Imported by name on the test's Ray nodes (the test puts this directory on the nodes' ``PYTHONPATH``, as an
installed package would be).
"""

from __future__ import annotations

import os
import time

from harness import Score, reward

__all__: list[str] = []


@reward("test_ray_sleep", reads=(), cacheable=False)
def test_ray_sleep(*, seconds: float = 1.0):
    """Value 1.0 after ``seconds`` of sleep: long enough to be in flight when a test kills its actor."""

    def score(sample, completion: str) -> Score:
        time.sleep(seconds)
        return Score(value=1.0, info={"pid": os.getpid()})

    return score
