"""verl adapter: a grpo-harness reward as verl's custom reward function (checked against verl 0.9.1).

verl imports a file named by ``reward.custom_reward_function.path`` and takes the object named by
``reward.custom_reward_function.name`` from it (0.9.1 reads these keys; the old top-level
``custom_reward_function.*`` is read only by verl's fully-async entry point, and ``main_ppo`` silently falls back
to verl's own scorers). Such a file holds::

    from rewards.adapters.verl import as_verl_compute_score
    compute_score = as_verl_compute_score({"name": "math"})

verl's two contracts:

* per response, ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``: what
  0.9.1's trainer calls through its reward-loop managers (``naive``, ``dapo``, ``gdpo``, ``rate_limited``), what
  the legacy ``naive``/``dapo``/``prime`` managers call and what ``verl/trainer/main_eval.py`` calls;
* per batch, ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=, **kwargs)``: called
  only by the legacy ``BatchRewardManager`` (``verl.workers.reward_manager``, name ``batch``), which 0.9.1's
  trainer no longer offers. The batch form here also answers per-response calls, so it works under 0.9.1's
  trainer too, but there verl hands it one response at a time.

Both return :class:`VerlScore` (``{"score": value, "scored": 1.0 | 0.0}``): a dict, so the managers log its keys
in ``reward_extra_info``, that also acts as its score in arithmetic, so ``np.mean`` over them (``main_eval.py``)
works. ``return_dict=False`` gives plain floats, which the ``prime`` manager needs.

The callables are instances of module-level classes holding the spec and options, so they pickle by reference
(``prime`` sends them to a process pool; Ray ships them to workers). Scoring goes through the scoring path's
worker pool with its hard time limits; a forked process (``prime``'s pool) gets a pool of its own, one worker by
default and started on first use, since a forked child inherits the parent's pool without its dispatcher thread.

verl has no "unscored": every response needs a number. An unscored sample (the reward crashed, timed out, or
the gold is unparseable) gets ``unscored_value`` (default 0.0), and ``scored: 0.0`` says so, so it can be
counted. ``ground_truth`` becomes ``Sample.answer`` (or ``Sample.tests`` with ``ground_truth_field="tests"``),
``data_source`` a column of that name, the keys of ``extra_info`` further columns (``extra_info["index"]`` the
sample id). Keyword arguments verl adds (``reward_router_address``, ``reward_kwargs`` entries) are ignored. This
module does not import verl.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from harness.scoring import ScoringSession, WorkerPool, default_pool
from harness.types import RewardSpec, Score
from rewards.adapters._common import normalize_specs, plain

__all__ = [
    "as_verl_compute_score",
    "as_verl_batch_compute_score",
    "VerlComputeScore",
    "VerlBatchComputeScore",
    "VerlScore",
]

_RESERVED = frozenset({"id", "prompt", "answer", "tests"})
_IMPORT_PID = os.getpid()


class VerlScore(dict):
    """``{"score": float, "scored": 1.0 | 0.0}`` that is also a number: ``float(s)``, ``s + t``, ``s / n``.

    verl's managers take a dict and log every key; offline scripts such as ``main_eval.py`` average the returns
    with ``np.mean``, which needs numbers. This is both.

    >>> a, b = VerlScore(score=1.0, scored=1.0), VerlScore(score=0.0, scored=0.0)
    >>> (a + b) / 2, sum([a, b]), float(a)
    (0.5, 1.0, 1.0)
    """

    __slots__ = ()

    def __float__(self) -> float:
        return float(self["score"])

    def __add__(self, other: Any) -> float:
        return float(self) + float(other)

    def __radd__(self, other: Any) -> float:
        return float(other) + float(self)

    def __sub__(self, other: Any) -> float:
        return float(self) - float(other)

    def __rsub__(self, other: Any) -> float:
        return float(other) - float(self)

    def __mul__(self, other: Any) -> float:
        return float(self) * float(other)

    def __rmul__(self, other: Any) -> float:
        return float(other) * float(self)

    def __truediv__(self, other: Any) -> float:
        return float(self) / float(other)


def _row(i: int, data_source: Any, ground_truth: Any, extra_info: Any, field: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    extra = plain(extra_info)
    if isinstance(extra, Mapping):
        row.update({str(k): plain(v) for k, v in extra.items() if k not in _RESERVED})
        if isinstance(extra.get("prompt"), (str, list)):
            row["prompt"] = extra["prompt"]
        index = extra.get("index")
        row["id"] = str(plain(index)) if index is not None else str(i)
    else:
        row["id"] = str(i)
    row["data_source"] = plain(data_source)
    row[field] = plain(ground_truth)
    return row


def _pool(workers: int | None) -> WorkerPool | None:
    """None (the process-wide default pool) in the importing process; a small pool of its own in a forked child."""
    if os.getpid() == _IMPORT_PID:
        return None
    return default_pool(max(1, workers or 1))


class _VerlScorer:
    """The spec and options shared by both forms; picklable (a spec and plain values)."""

    def __init__(
        self,
        spec: RewardSpec | Mapping[str, Any] | str,
        *,
        timeout: float | None = None,
        workers: int | None = None,
        unscored_value: float = 0.0,
        return_dict: bool = True,
        ground_truth_field: Literal["answer", "tests"] = "answer",
    ) -> None:
        if ground_truth_field not in ("answer", "tests"):
            raise ValueError(f"ground_truth_field must be 'answer' or 'tests', got {ground_truth_field!r}")
        (self.spec,) = normalize_specs([spec])
        self.timeout, self.workers = timeout, workers
        self.unscored_value, self.return_dict = float(unscored_value), return_dict
        self.ground_truth_field = ground_truth_field
        self.__name__ = self.spec.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r})"

    def _output(self, score: Score) -> float | VerlScore:
        value = score.value if score.value is not None else self.unscored_value
        if not self.return_dict:
            return value
        return VerlScore(score=value, scored=1.0 if score.value is not None else 0.0)

    def _score(
        self, data_sources: Sequence[Any], solution_strs: Sequence[Any], ground_truths: Sequence[Any], extra_infos: Any
    ) -> list[float | VerlScore]:
        n = len(solution_strs)
        extras = list(extra_infos) if extra_infos is not None else [None] * n
        if not len(data_sources) == len(ground_truths) == len(extras) == n:
            raise ValueError(
                f"verl batch lengths differ: {len(data_sources)} data_sources, {n} solution_strs, "
                f"{len(ground_truths)} ground_truths, {len(extras)} extra_infos"
            )
        rows = [_row(i, data_sources[i], ground_truths[i], extras[i], self.ground_truth_field) for i in range(n)]
        pool = _pool(self.workers)
        with ScoringSession([self.spec], timeout=self.timeout, workers=self.workers, pool=pool) as session:
            result = session.score(rows, list(solution_strs))
        return [self._output(s) for s in result.scores[self.spec.name]]


class VerlComputeScore(_VerlScorer):
    """verl's per-response ``compute_score``; build it with :func:`as_verl_compute_score`."""

    def __call__(
        self, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, **_: Any
    ) -> float | VerlScore:
        return self._score([data_source], [solution_str], [ground_truth], [extra_info])[0]


class VerlBatchComputeScore(_VerlScorer):
    """verl's batch ``compute_score`` that also answers per-response calls; see :func:`as_verl_batch_compute_score`."""

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | VerlScore] | float | VerlScore:
        per_response = "solution_str" in kwargs or (len(args) > 1 and isinstance(args[1], str))
        names = ("data_source", "solution_str", "ground_truth", "extra_info")
        if not per_response:
            names = ("data_sources", "solution_strs", "ground_truths", "extra_infos")
        if len(args) > len(names):
            raise TypeError(f"compute_score takes at most {len(names)} positional arguments, got {len(args)}")
        got = dict(zip(names, args, strict=False))  # fewer positional arguments than names is allowed
        for name in names:
            if name in kwargs:
                if name in got:
                    raise TypeError(f"compute_score got multiple values for {name!r}")
                got[name] = kwargs[name]
        missing = [name for name in names[:3] if name not in got]
        if missing:
            raise TypeError(f"compute_score is missing {', '.join(missing)} (verl's {names[:3]})")
        if per_response:
            one = [got["data_source"]], [got["solution_str"]], [got["ground_truth"]], [got.get("extra_info")]
            return self._score(*one)[0]
        return self._score(got["data_sources"], got["solution_strs"], got["ground_truths"], got.get("extra_infos"))


def as_verl_batch_compute_score(
    spec: RewardSpec | Mapping[str, Any] | str,
    *,
    timeout: float | None = None,
    workers: int | None = None,
    unscored_value: float = 0.0,
    return_dict: bool = True,
    ground_truth_field: Literal["answer", "tests"] = "answer",
) -> VerlBatchComputeScore:
    """verl's batch form: ``compute_score(data_sources, solution_strs, ground_truths, extra_infos=None)``.

    Only verl's legacy ``BatchRewardManager`` calls the batch form, scoring a whole batch in one call. Under verl
    0.9.1's trainer, whose managers call per response, this object scores each response as
    :func:`as_verl_compute_score` would.

    Args:
        spec: the reward (a spec, a dict or a bare name), validated now.
        timeout: hard wall-clock seconds per reward call (the scoring path's default when None).
        workers: scoring worker processes (default: one per core; one in a forked child).
        unscored_value: the number verl gets for an unscored sample.
        return_dict: return :class:`VerlScore` dicts (True) or bare floats.
        ground_truth_field: the Sample field ``ground_truth`` fills: ``answer`` (math) or ``tests`` (code).

    >>> fn = as_verl_batch_compute_score("boxed_present")
    >>> fn(["gsm8k", "gsm8k"], ["\\\\boxed{4}", "4"], ["4", "4"])
    [{'score': 1.0, 'scored': 1.0}, {'score': 0.0, 'scored': 1.0}]
    """
    return VerlBatchComputeScore(
        spec,
        timeout=timeout,
        workers=workers,
        unscored_value=unscored_value,
        return_dict=return_dict,
        ground_truth_field=ground_truth_field,
    )


def as_verl_compute_score(
    spec: RewardSpec | Mapping[str, Any] | str,
    *,
    timeout: float | None = None,
    workers: int | None = None,
    unscored_value: float = 0.0,
    return_dict: bool = True,
    ground_truth_field: Literal["answer", "tests"] = "answer",
) -> VerlComputeScore:
    """verl's per-response form: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

    Arguments as for :func:`as_verl_batch_compute_score`.

    >>> compute_score = as_verl_compute_score("think_answer_format", return_dict=False)
    >>> compute_score("r1", "<think>4</think><answer>4</answer>", "4", {"index": 3})
    1.0
    """
    return VerlComputeScore(
        spec,
        timeout=timeout,
        workers=workers,
        unscored_value=unscored_value,
        return_dict=return_dict,
        ground_truth_field=ground_truth_field,
    )
