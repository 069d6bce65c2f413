"""Rewards for the evaluator tests, importable by name in this process and in the scoring workers.

They judge the output of a random-init character-level model, so they look at characters, not meaning.
"""

from __future__ import annotations

import re
import time

from harness import Sample, Score, reward


@reward("evals_contains_answer")
def contains_answer():
    """1 when the gold answer occurs in the completion; the vote (Score.answer) is the completion's first digit."""

    def score(sample: Sample, completion: str) -> Score:
        m = re.search(r"\d", completion)
        if m is None:
            return Score(value=0.0, status="no_answer")
        return Score(value=1.0 if str(sample.answer) in completion else 0.0, answer=m.group(0))

    return score


@reward("evals_length", reads=())
def length(*, norm: float = 100.0):
    """Completion length / norm (a log-only reward in the tests)."""

    def score(sample: Sample, completion: str) -> Score:
        return Score(value=len(completion) / norm)

    return score


@reward("evals_slow", reads=(), cacheable=False)
def slow(*, delay: float = 0.2):
    """Sleeps ``delay`` seconds, then 1.0: makes an evaluation slow enough to kill halfway."""

    def score(sample: Sample, completion: str) -> Score:
        time.sleep(delay)
        return Score(value=1.0)

    return score
