"""verl adapter: a grpo-harness reward as verl's ``custom_reward_function``.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` per response (the naive
reward manager) or ``compute_score(data_sources, solution_strs, ground_truths, extra_infos)`` per batch (the
batch reward manager), and takes a float or a dict with a ``"score"`` key whose other keys it logs. Point verl's
``custom_reward_function.path`` at a file holding::

    from rewards.adapters.verl import as_verl_compute_score
    compute_score = as_verl_compute_score({"name": "math"})

Both forms score through :func:`harness.score_batch`, so time limits and crash isolation hold. ``ground_truth``
becomes ``Sample.answer`` (or ``Sample.tests`` with ``ground_truth_field="tests"``), ``data_source`` a column of
that name, the keys of ``extra_info`` further columns (``extra_info["index"]`` the sample id).

verl has no "unscored": every response needs a number. An unscored sample (the reward crashed, timed out, or
the gold is unparseable) gets ``unscored_value`` (default 0.0), and the dict form says so with ``scored: 0.0``
so it can be counted. This module does not import verl.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Mapping, Sequence

from harness.scoring import score_batch
from harness.types import RewardSpec, Score
from rewards.adapters._common import normalize_specs, plain

__all__ = ["as_verl_compute_score", "as_verl_batch_compute_score"]

_RESERVED = frozenset({"id", "prompt", "answer", "tests"})


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


def _output(score: Score, unscored_value: float, return_dict: bool) -> float | dict[str, float]:
    value = score.value if score.value is not None else float(unscored_value)
    if not return_dict:
        return value
    return {"score": value, "scored": 1.0 if score.value is not None else 0.0}


def as_verl_batch_compute_score(
    spec: RewardSpec | Mapping[str, Any] | str,
    *,
    timeout: float | None = None,
    workers: int | None = None,
    unscored_value: float = 0.0,
    return_dict: bool = True,
    ground_truth_field: Literal["answer", "tests"] = "answer",
) -> Callable[..., list[float | dict[str, float]]]:
    """verl's batch form: ``compute_score(data_sources, solution_strs, ground_truths, extra_infos=None)``.

    Args:
        spec: the reward (a spec, a dict or a bare name), validated now.
        timeout: hard wall-clock seconds per reward call (the scoring path's default when None).
        workers: scoring worker processes (default: one per core).
        unscored_value: the number verl gets for an unscored sample.
        return_dict: return ``{"score", "scored"}`` dicts (True) or bare floats.
        ground_truth_field: the Sample field ``ground_truth`` fills: ``answer`` (math) or ``tests`` (code).

    >>> fn = as_verl_batch_compute_score("boxed_present")
    >>> fn(["gsm8k", "gsm8k"], ["\\\\boxed{4}", "4"], ["4", "4"])
    [{'score': 1.0, 'scored': 1.0}, {'score': 0.0, 'scored': 1.0}]
    """
    if ground_truth_field not in ("answer", "tests"):
        raise ValueError(f"ground_truth_field must be 'answer' or 'tests', got {ground_truth_field!r}")
    (resolved,) = normalize_specs([spec])

    def compute_score(
        data_sources: Sequence[Any],
        solution_strs: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Any] | None = None,
        **_: Any,
    ) -> list[float | dict[str, float]]:
        n = len(solution_strs)
        extras = list(extra_infos) if extra_infos is not None else [None] * n
        if not len(data_sources) == len(ground_truths) == len(extras) == n:
            raise ValueError(
                f"verl batch lengths differ: {len(data_sources)} data_sources, {n} solution_strs, "
                f"{len(ground_truths)} ground_truths, {len(extras)} extra_infos"
            )
        rows = [_row(i, data_sources[i], ground_truths[i], extras[i], ground_truth_field) for i in range(n)]
        result = score_batch(rows, list(solution_strs), [resolved], timeout=timeout, workers=workers)
        return [_output(s, unscored_value, return_dict) for s in result.scores[resolved.name]]

    compute_score.__name__ = resolved.name
    return compute_score


def as_verl_compute_score(
    spec: RewardSpec | Mapping[str, Any] | str,
    *,
    timeout: float | None = None,
    workers: int | None = None,
    unscored_value: float = 0.0,
    return_dict: bool = True,
    ground_truth_field: Literal["answer", "tests"] = "answer",
) -> Callable[..., float | dict[str, float]]:
    """verl's per-response form: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

    Arguments as for :func:`as_verl_batch_compute_score`.

    >>> compute_score = as_verl_compute_score("think_answer_format", return_dict=False)
    >>> compute_score("r1", "<think>4</think><answer>4</answer>", "4", {"index": 3})
    1.0
    """
    batch = as_verl_batch_compute_score(
        spec,
        timeout=timeout,
        workers=workers,
        unscored_value=unscored_value,
        return_dict=return_dict,
        ground_truth_field=ground_truth_field,
    )

    def compute_score(
        data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
    ) -> float | dict[str, float]:
        return batch([data_source], [solution_str], [ground_truth], [extra_info])[0]

    compute_score.__name__ = batch.__name__
    return compute_score
