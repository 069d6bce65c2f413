r"""``\sum`` and ``\prod`` answers: read, never evaluated, equal when written alike up to the order of factors and
the name of the index; each positive beside the near misses it must refuse."""

from __future__ import annotations

import pytest

from rewards.math import verify

SUMS = [
    (r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", r"$F_n = \sum_{k=0}^{n-1} F_{n-k-1} F_k$", 1.0),
    (r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", r"$F_n = \sum_{i=0}^{n-1} F_{n-i-1} F_i$", 1.0),  # i is the index
    (r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", r"$F_n = \sum_{k=0}^{n-2} F_k F_{n-k-2}$", 0.0),
    (r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", r"$F_n = \sum_{k=1}^{n-1} F_k F_{n-k-1}$", 0.0),
    (r"\sum_{k=1}^{n} k^2", r"\boxed{\sum_{r=1}^{n} r^2}", 1.0),
    (r"\sum_{k=1}^{n} k^2", r"\boxed{\sum_{r=1}^{n} r^3}", 0.0),
    (r"\sum_{k=1}^{n} a_k", r"\boxed{n a_k}", 0.0),  # a_k depends on the index: not a constant term
    (r"\sum_{k=1}^{n} \sum_{r=1}^{k} r", r"\boxed{\sum_{a=1}^{n} \sum_{b=1}^{a} b}", 1.0),
    (r"\sum_{k=1}^{n} \sum_{r=1}^{k} r", r"\boxed{\sum_{a=1}^{n} \sum_{b=1}^{a} a}", 0.0),
    (r"\prod_{k=1}^{n} k", r"\boxed{\prod_{r=1}^{n} r}", 1.0),
    (r"\prod_{k=1}^{n} k", r"\boxed{\sum_{r=1}^{n} r}", 0.0),
    ("55", r"\boxed{\sum_{k=1}^{10} k}", 0.0),  # an unevaluated sum restates, it does not state the value
    ("2 + i", r"\boxed{i + 2}", 1.0),  # outside a sum, i is still the imaginary unit
]


@pytest.mark.parametrize("gold,completion,expected", SUMS)
def test_sums(gold: str, completion: str, expected: float) -> None:
    s = verify(gold, completion)
    assert s.value == expected, (gold, completion, s.status, s.info)


@pytest.mark.parametrize("answer", [r"\sum k", r"\sum_{k}^{n} k", r"\sum_{k=1}^{n}"])
def test_a_malformed_sum_is_a_parse_error(answer: str) -> None:
    assert verify("x", "\\boxed{" + answer + "}").status == "parse_error"


def test_a_huge_sum_is_never_evaluated() -> None:
    """Evaluating it would run for hours; it is compared as written, so this returns at once with a verdict."""
    s = verify("500000000500000000", r"\boxed{\sum_{k=1}^{10^{9}} k}")
    assert s.status == "ok" and s.value == 0.0, s
