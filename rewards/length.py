"""Length shaping: ``overlong``, DAPO's soft overlong punishment.

DAPO (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", eq. 13) punishes a
response of length ``L`` with a maximum ``L_max`` and a soft punishment window ``L_cache``::

    R(L) = 0                              if L <= L_max - L_cache
    R(L) = ((L_max - L_cache) - L) / L_cache  if L_max - L_cache < L <= L_max
    R(L) = -1                             if L > L_max

It is added to the task reward (give it weight 1 next to a correctness reward). Lengths are counted in tokens
when a tokenizer is configured (a local directory or an already-cached model name, loaded with
``transformers.AutoTokenizer``, never downloaded), else in characters; ``info["unit"]`` says which.

What this module does not do: filter truncated samples out of the loss (DAPO's "overlong filtering" is a
trainer decision, not a reward), or read token ids from the trainer (it tokenizes the completion text again).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from harness.errors import RewardParameterError
from harness.registry import reward
from harness.types import Sample, Score

__all__ = ["overlong", "soft_overlong_penalty", "load_local_tokenizer"]

log = logging.getLogger(__name__)


def soft_overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    """DAPO's soft overlong punishment for a response of ``length`` units (pure).

    >>> soft_overlong_penalty(80, max_length=100, cache_length=20)
    0.0
    >>> soft_overlong_penalty(90, max_length=100, cache_length=20)
    -0.5
    >>> soft_overlong_penalty(101, max_length=100, cache_length=20)
    -1.0
    """
    if length > max_length:
        return -1.0
    threshold = max_length - cache_length
    if length <= threshold:
        return 0.0
    return (threshold - length) / cache_length


@functools.lru_cache(maxsize=4)
def load_local_tokenizer(name_or_path: str) -> Any:
    """Load a tokenizer from a local directory or the local model cache (no network), cached per process.

    Raises:
        RewardParameterError: when transformers is missing or the tokenizer is not available locally.
    """
    try:
        from transformers import AutoTokenizer
    except ImportError as e:  # pragma: no cover - transformers is in the train extras
        raise RewardParameterError(f"overlong: tokenizer={name_or_path!r} needs transformers ({e})") from None
    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except Exception as e:  # transformers raises OSError, ValueError, ... depending on what is missing
        raise RewardParameterError(
            f"overlong: cannot load tokenizer {name_or_path!r} from local files "
            f"(a directory with tokenizer files, or a model already in the local cache): {type(e).__name__}: {e}"
        ) from None


@reward("overlong", isolation="inline", reads=())
def overlong(*, max_length: int = 20480, cache_length: int = 4096, tokenizer: str | None = None):
    """DAPO soft overlong punishment in ``[-1, 0]``; defaults are the paper's (20480 max, 4096 cache).

    Counted in tokens when ``tokenizer`` names a local tokenizer, else in characters (``info["unit"]``).

    >>> from harness import get_reward
    >>> fn = get_reward("overlong", max_length=10, cache_length=4)
    >>> fn({}, "123456").value, fn({}, "12345678").value, fn({}, "x" * 11).value
    (0.0, -0.5, -1.0)
    >>> fn({}, "12345678").info
    {'unit': 'chars', 'length': 8, 'max_length': 10, 'cache_length': 4}
    """
    for label, v in (("max_length", max_length), ("cache_length", cache_length)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise RewardParameterError(f"overlong: {label} must be an integer, got {v!r}")
    if max_length <= 0 or not 0 < cache_length <= max_length:
        raise RewardParameterError(
            f"overlong: need max_length > 0 and 0 < cache_length <= max_length, "
            f"got max_length={max_length}, cache_length={cache_length}"
        )
    tok = load_local_tokenizer(tokenizer) if tokenizer else None
    unit = "tokens" if tok is not None else "chars"

    def score(sample: Sample, completion: str) -> Score:
        if tok is not None:
            length = len(tok.encode(completion, add_special_tokens=False))
        else:
            length = len(completion)
        value = soft_overlong_penalty(length, max_length, cache_length)
        info = {"unit": unit, "length": length, "max_length": max_length, "cache_length": cache_length}
        return Score(value=value, info=info)

    return score
