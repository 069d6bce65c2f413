"""``char_count_slow``: the toy task's ``char_count`` reward, run in a scoring worker after a sleep.

A plugin of the benchmarks and tests (``plugins: [benchmarks/slow_reward.py]`` or ``--plugin``), not a built-in:
it stands in for a costly verifier when measuring how much reward time the trainer hides behind its own work.
"""

from __future__ import annotations

import time

from harness import Sample, Score, reward
from harness.registry import ScoreFn
from rewards.toy import char_count


@reward("char_count_slow", isolation="process", reads=(), cacheable=False)
def char_count_slow(*, char: str = "a", norm: float = 1.0, delay_s: float = 0.01) -> ScoreFn:
    """``char_count`` after sleeping ``delay_s`` seconds, in a scoring worker process."""
    inner = char_count(char=char, norm=norm)

    def score(sample: Sample, completion: str) -> Score | float | None:
        time.sleep(delay_s)
        return inner(sample, completion)

    return score
