"""The ``char_count`` reward of the trainer's built-in toy task: how often one character occurs in the completion.

A built-in reward like the others, so any process (a scoring worker, `harness eval`, `harness score`) resolves
it by name; kept apart from :mod:`trainer.toy` so that registering it never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.registry import reward
from harness.types import Sample, Score

__all__ = ["char_count"]


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
