"""The held-out rise between two evaluations of the same prompts, with its paired standard error.

A rise is ``end - start`` of a reward's held-out mean. Its standard error is taken over prompts, which are the
independent units (the ``k`` samples of one prompt are not): each prompt's mean over its samples in the later
evaluation minus the same prompt's mean in the earlier one, then :func:`harness.stats.mean_and_stderr` over those
per-prompt differences (sample standard deviation, ``ddof=1``, over ``sqrt(prompts)``). Pairing by prompt removes
the spread between easy and hard prompts that an unpaired difference of two means would count twice.

Unscored samples are left out of their prompt's mean, as the evaluator does; a prompt with no scored sample in
either evaluation is left out of the rise. This module reads ``samples.jsonl`` files and computes; it runs no model.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.jsonl import read_records
from harness.stats import mean_and_stderr

__all__ = ["Rise", "paired_rise", "prompt_means", "rise_between"]


@dataclass(frozen=True)
class Rise:
    """A held-out rise: the start and end means over the prompts both evaluations scored, and the rise's stderr."""

    start: float
    end: float
    rise: float
    stderr: float | None
    prompts: int

    @property
    def z(self) -> float | None:
        """The rise in standard errors (None without a standard error, inf when it is 0 and the rise is not)."""
        if self.stderr is None:
            return None
        if self.stderr == 0:
            return float("inf") if self.rise else 0.0
        return self.rise / self.stderr


def prompt_means(samples_jsonl: str | Path, reward: str) -> dict[str, float]:
    """Each prompt's mean ``reward`` value over its scored samples in one evaluation's ``samples.jsonl``."""
    values: dict[str, list[float]] = defaultdict(list)
    records, _ = read_records(samples_jsonl)
    for rec in records:
        v = (rec.get("scores", {}).get(reward) or {}).get("value")
        if v is not None:
            values[str(rec["prompt_id"])].append(float(v))
    return {pid: sum(vs) / len(vs) for pid, vs in values.items() if vs}


def paired_rise(before: dict[str, float], after: dict[str, float]) -> Rise:
    """The rise from ``before`` to ``after`` (prompt id -> mean) over the prompts both have.

    >>> r = paired_rise({"a": 0.0, "b": 0.5}, {"a": 0.5, "b": 1.0, "c": 1.0})
    >>> (r.start, r.end, r.rise, r.stderr, r.prompts)
    (0.25, 0.75, 0.5, 0.0, 2)

    Raises:
        ValueError: the two evaluations share no prompt.
    """
    common = sorted(set(before) & set(after))
    if not common:
        raise ValueError("paired_rise: the two evaluations have no scored prompt in common")
    start = sum(before[p] for p in common) / len(common)
    end = sum(after[p] for p in common) / len(common)
    mean, stderr, _ = mean_and_stderr(after[p] - before[p] for p in common)
    assert mean is not None  # common is not empty
    return Rise(start=start, end=end, rise=mean, stderr=stderr, prompts=len(common))


def rise_between(before_dir: str | Path, after_dir: str | Path, reward: str = "math") -> Rise:
    """:func:`paired_rise` of ``reward`` between two evaluation directories (each holding a ``samples.jsonl``)."""
    return paired_rise(
        prompt_means(Path(before_dir) / "samples.jsonl", reward),
        prompt_means(Path(after_dir) / "samples.jsonl", reward),
    )
