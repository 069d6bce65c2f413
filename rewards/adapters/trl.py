"""TRL adapter: grpo-harness rewards as ``GRPOTrainer(reward_funcs=...)`` callables.

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=..., **columns)`` and expects
one ``float | None`` per completion (``None``: not applicable; TRL turns it into NaN and its nan-aware means skip
it). Here every function is a :class:`TrlRewardFunc` whose ``__name__`` is the reward name, so TRL logs
``rewards/<name>/mean``. Scoring goes through :func:`harness.score_batch` (worker processes, hard time limits),
so a reward that raises or hangs leaves that completion ``None`` instead of aborting the run.

The functions from one :func:`as_trl_reward_funcs` call share a one-batch memo: the first one TRL calls scores
every spec in a single :func:`harness.score_batch` (all rewards in parallel), the others read the memo. Dataset
columns (``answer``, ``tests``, any other) become :class:`harness.Sample` fields; TRL's own keyword arguments
(``trainer_state``, ``log_extra``, ``log_metric``, ``environments``) are not columns and are left out.

Weights: TRL applies ``GRPOConfig(reward_weights=...)``; :func:`trl_reward_weights` gives them from the specs.
Note that TRL's total is a ``nansum`` over rewards, so an unscored reward adds nothing to that completion's total
(only a completion with every reward unscored gets no total); the per-reward means skip it. This module does not
import TRL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.scoring import BatchResult, score_batch
from harness.types import RewardSpec
from rewards.adapters._common import completion_text, normalize_specs, plain

__all__ = ["as_trl_reward_funcs", "trl_reward_weights", "TrlRewardFunc"]

log = logging.getLogger(__name__)

#: Keyword arguments TRL passes that are not dataset columns.
TRL_NON_COLUMNS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})


class _SharedBatch:
    """Scores a TRL batch once for every spec and remembers the last batch."""

    def __init__(self, specs: list[RewardSpec], timeout: float | None, workers: int | None, cache: bool | int) -> None:
        self.specs = specs
        self.timeout, self.workers, self.cache = timeout, workers, cache
        self._lock = threading.Lock()
        self._last: tuple[str, BatchResult] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        state["_last"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def score(self, prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Any]) -> BatchResult:
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"TRL passed {len(prompts)} prompts for {n} completions")
        cols = _columns(columns, n)
        samples = [_sample_row(i, prompts[i], cols) for i in range(n)]
        texts = [completion_text(c) for c in completions]
        key = _fingerprint(samples, texts)
        with self._lock:
            if self._last is not None and self._last[0] == key:
                return self._last[1]
            result = score_batch(
                samples, texts, self.specs, timeout=self.timeout, workers=self.workers, cache=self.cache
            )
            self._last = (key, result)
            return result


def _columns(kwargs: Mapping[str, Any], n: int) -> dict[str, list[Any]]:
    """The per-completion dataset columns among TRL's keyword arguments."""
    cols = {}
    for k, v in kwargs.items():
        if k in TRL_NON_COLUMNS:
            continue
        v = plain(v)
        if isinstance(v, (list, tuple)) and len(v) == n:
            cols[k] = list(v)
        else:
            log.debug("TRL keyword %r is not a per-completion column; not passed to rewards", k)
    return cols


def _sample_row(i: int, prompt: Any, cols: Mapping[str, list[Any]]) -> dict[str, Any]:
    row = {k: plain(v[i]) for k, v in cols.items()}
    row["prompt"] = prompt
    row["id"] = str(row["id"]) if row.get("id") is not None else str(i)
    return row


def _fingerprint(samples: list[dict[str, Any]], texts: list[Any]) -> str:
    payload = json.dumps([samples, texts], sort_keys=True, default=repr)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


class TrlRewardFunc:
    """One reward with TRL's reward-function contract; ``__name__`` is the reward name.

    Call it as TRL does: ``f(prompts, completions, completion_ids=None, **columns) -> list[float | None]``.
    If TRL passes ``log_metric``, it also logs ``rewards/<name>/unscored_frac``.
    """

    def __init__(self, spec: RewardSpec, shared: _SharedBatch) -> None:
        self.spec = spec
        self.__name__ = spec.name
        self.__qualname__ = spec.name
        self._shared = shared

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        result = self._shared.score(prompts, completions, columns)
        values = result.values(self.spec.name)
        log_metric: Callable[[str, float], None] | None = columns.get("log_metric")
        if callable(log_metric) and values:
            unscored = sum(v is None for v in values) / len(values)
            log_metric(f"rewards/{self.spec.name}/unscored_frac", unscored)
        return values

    def __repr__(self) -> str:
        return f"TrlRewardFunc({self.spec.name!r}, params={self.spec.params!r})"


def as_trl_reward_funcs(
    specs: Sequence[RewardSpec | Mapping[str, Any] | str],
    *,
    timeout: float | None = None,
    workers: int | None = None,
    cache: bool | int = True,
) -> list[TrlRewardFunc]:
    """TRL reward functions for ``specs``, in order; pass them as ``GRPOTrainer(reward_funcs=...)``.

    Args:
        specs: reward specs (or dicts, or bare names); validated now, so a typo fails before training starts.
        timeout: hard wall-clock seconds per reward call (the scoring path's default when None).
        workers: scoring worker processes (default: one per core).
        cache: the scoring path's result cache (True: shared; int: private of that size; False: off).

    >>> fns = as_trl_reward_funcs(["boxed_present", {"name": "tag_count", "params": {"tags": ["answer"]}}])
    >>> [f.__name__ for f in fns]
    ['boxed_present', 'tag_count']
    >>> fns[0](prompts=["2+2?", "2+2?"], completions=[[{"role": "assistant", "content": "\\\\boxed{4}"}], "four"])
    [1.0, 0.0]
    """
    resolved = normalize_specs(specs)
    shared = _SharedBatch(resolved, timeout, workers, cache)
    return [TrlRewardFunc(s, shared) for s in resolved]


def trl_reward_weights(specs: Sequence[RewardSpec | Mapping[str, Any] | str]) -> list[float]:
    """The spec weights, for ``GRPOConfig(reward_weights=...)`` (weight 0: logged, not trained on).

    >>> trl_reward_weights([{"name": "boxed_present", "weight": 0.5}, "tag_count"])
    [0.5, 1.0]
    """
    return [s.weight for s in normalize_specs(specs)]
