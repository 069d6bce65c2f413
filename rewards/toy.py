"""The ``char_count`` reward of the trainer's built-in toy task: how often one character occurs in the completion.

A built-in reward like the others, so any process (a scoring worker, `harness eval`, `harness score`) resolves
it by name; kept apart from :mod:`trainer.toy` so that registering it never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.registry import ScoreFn, reward
from harness.types import Sample, Score

__all__ = ["char_count", "char_count_slow"]


@reward("char_count", isolation="inline", reads=())
def char_count(*, char: str = "a", norm: float = 1.0) -> Callable[[Sample, str], Score]:
    """Count of ``char`` in the completion divided by ``norm`` (toy task).

    >>> from harness import get_reward
    >>> get_reward("char_count", norm=4.0)({"prompt": "x:"}, "aaba").value
    0.75
    """
    if len(char) != 1:
        raise ValueError(f"char must be one character, got {char!r}")

    def score(sample: Sample, completion: str) -> Score:
        return Score(value=completion.count(char) / norm, answer=str(completion.count(char)))

    return score


@reward("char_count_slow", isolation="process", reads=(), cacheable=False)
def char_count_slow(*, char: str = "a", norm: float = 1.0, delay_s: float = 0.01) -> ScoreFn:
    """``char_count`` run in a scoring worker process after sleeping ``delay_s`` (stands in for a costly verifier).

    Used to measure how much reward time the trainer hides behind its own work.
    """
    import time

    inner = char_count(char=char, norm=norm)

    def score(sample: Sample, completion: str) -> Score | float | None:
        time.sleep(delay_s)
        return inner(sample, completion)

    return score
