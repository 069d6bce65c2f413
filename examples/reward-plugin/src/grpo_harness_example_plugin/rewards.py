"""``keyword_bonus``: a small bonus for each distinct keyword a completion uses.

It is an example of the plugin contract, not a recommended reward: keyword bonuses are easy to game. It reads only
the completion, and its cost is linear in the completion length, so it may run inline.
"""

from __future__ import annotations

from harness import Sample, Score, reward
from harness.errors import RewardParameterError

__all__ = ["keyword_bonus"]


@reward("keyword_bonus", isolation="inline", reads=())
def keyword_bonus(
    *,
    keywords: tuple[str, ...] = ("therefore", "because"),
    bonus: float = 0.1,
    case_sensitive: bool = False,
):
    """``bonus`` times the number of distinct ``keywords`` found in the completion; ``info`` lists them.

    >>> from harness import get_reward
    >>> fn = get_reward("keyword_bonus", bonus=0.5)
    >>> s = fn({}, "Because 2+2=4, therefore the answer is 4.")
    >>> s.value, s.info["found"]
    (1.0, ['therefore', 'because'])
    """
    words = [keywords] if isinstance(keywords, str) else list(keywords)
    if not words or not all(isinstance(k, str) and k for k in words):
        raise RewardParameterError(f"keyword_bonus: keywords must be non-empty strings, got {keywords!r}")
    needles = words if case_sensitive else [k.lower() for k in words]

    def score(sample: Sample, completion: str) -> Score:
        text = completion if case_sensitive else completion.lower()
        found = [k for k in dict.fromkeys(needles) if k in text]
        return Score(value=bonus * len(found), info={"found": found})

    return score
