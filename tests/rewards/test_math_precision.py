r"""A caller's stated ``precision``: numbers, one of them a decimal, compared after rounding both to N places; each
credit beside the answers the setting must still refuse (docs/MATH.md, "A stated precision")."""

from __future__ import annotations

import pytest

from harness import get_reward
from harness.errors import RewardParameterError
from rewards.math import verify

AT_TWO_PLACES = [
    # a decimal answer for an exact gold, and a decimal gold for an exact answer
    (r"\frac13", r"\boxed{0.33}", 1.0),
    (r"\frac13", r"\boxed{0.3333}", 1.0),
    (r"-\frac13", r"\boxed{-0.33}", 1.0),
    (r"\pi", r"\boxed{3.14}", 1.0),
    ("0.33", r"\boxed{\frac13}", 1.0),
    ("2", r"\boxed{2.004}", 1.0),
    # one reading of every value: a decimal in any notation
    (r"\frac13", r"\boxed{\frac{33}{100}}", 1.0),
    # ...never another value at two places
    ("3.14", r"\boxed{3.15}", 0.0),
    ("3.15", r"\boxed{3.14}", 0.0),
    (r"\frac13", r"\boxed{0.3}", 0.0),
    (r"\frac13", r"\boxed{0.34}", 0.0),
    (r"-\frac13", r"\boxed{0.33}", 0.0),
    (r"\pi", r"\boxed{3.15}", 0.0),
    ("2", r"\boxed{2.006}", 0.0),
    # two exact values are compared exactly: rounding is for the decimal that approximates one
    (r"\frac13", r"\boxed{\frac{\sqrt{11}}{10}}", 0.0),
    (r"\pi", r"\boxed{\frac{22}{7}}", 0.0),
    ("4", r"\boxed{4\sqrt{2}}", 0.0),
    # expressions with variables keep their own rule
    (r"\frac{x}{3}", r"\boxed{0.33x}", 0.0),
    # an exact halfway value rounds to either neighbour, never further
    ("0.125", r"\boxed{0.13}", 1.0),
    ("0.125", r"\boxed{0.12}", 1.0),
    ("0.125", r"\boxed{0.11}", 0.0),
    # entry by entry: lists, matrices, interval ends (and an interval's kind still counts)
    (r"\frac13, \frac23", r"\boxed{0.33, 0.67}", 1.0),
    (r"\frac13, \frac23", r"\boxed{0.33, 0.66}", 0.0),
    (r"\begin{pmatrix}\frac13 \\ \frac23\end{pmatrix}", r"\boxed{\begin{pmatrix}0.33 \\ 0.67\end{pmatrix}}", 1.0),
    (r"\begin{pmatrix}\frac13 \\ \frac23\end{pmatrix}", r"\boxed{\begin{pmatrix}0.33 \\ 0.66\end{pmatrix}}", 0.0),
    (r"(\frac13, \frac23]", r"\boxed{(0.33, 0.67]}", 1.0),
    (r"(\frac13, \frac23]", r"\boxed{[0.33, 0.67]}", 0.0),
    # a value far from 1 keeps its digits: sqrt(2) * 10^6 = 1414213.5623...
    (r"\sqrt{2} \cdot 10^{6}", r"\boxed{1414213.56}", 1.0),
    (r"\sqrt{2} \cdot 10^{6}", r"\boxed{1414213.57}", 0.0),
    # a false chain states two values whatever the precision
    (r"\frac13", r"\boxed{x = 0.33 = \frac13}", 0.0),
]


@pytest.mark.parametrize("gold,completion,expected", AT_TWO_PLACES)
def test_two_places(gold: str, completion: str, expected: float) -> None:
    s = verify(gold, completion, precision=2)
    assert s.value == expected, (gold, completion, s.status, s.info)


@pytest.mark.parametrize(
    "gold,completion",
    [(r"\frac13", r"\boxed{0.33}"), ("2", r"\boxed{2.004}"), (r"\pi", r"\boxed{3.14}"), ("0.125", r"\boxed{0.13}")],
)
def test_without_a_stated_precision_nothing_is_rounded(gold: str, completion: str) -> None:
    assert verify(gold, completion).value == 0.0
    assert verify(gold, completion, precision=2).value == 1.0
    assert verify(gold, completion, precision=3).value == 0.0  # one more place tells them apart


def test_the_places_count() -> None:
    assert verify("3.14", r"\boxed{3.15}", precision=1).value == 1.0  # 3.1 and 3.1 (3.15 is halfway)
    assert verify("12", r"\boxed{12.4}", precision=0).value == 1.0
    assert verify("12", r"\boxed{12.6}", precision=0).value == 0.0
    assert verify(r"\frac13", r"\boxed{0.333}", precision=3).value == 1.0
    assert verify(r"\frac13", r"\boxed{0.334}", precision=3).value == 0.0


def test_the_reason_says_the_rounding_decided() -> None:
    assert verify(r"\frac13", r"\boxed{0.33}", precision=2).info["reason"] == "equal when rounded to 2 decimal places"
    assert verify("2", r"\boxed{2.004}", precision=2).info["reason"] == "equal when rounded to 2 decimal places"
    assert verify(r"\frac12", r"\boxed{0.5}", precision=2).info["reason"] == "equal values"


def test_a_restated_expression_earns_nothing_at_any_precision() -> None:
    prompt = r"Compute $\frac{22}{7}$ to two decimal places."
    assert verify("3.14", r"\boxed{\frac{22}{7}}", precision=2, prompt=prompt).value == 0.0
    assert verify("3.14", r"\boxed{3.14}", precision=2, prompt=prompt).value == 1.0


@pytest.mark.parametrize("bad", [-1, 31, 2.5, "2", True])
def test_a_bad_precision_is_refused_with_its_name(bad: object) -> None:
    with pytest.raises(ValueError, match="precision"):
        verify("1", r"\boxed{1}", precision=bad)  # type: ignore[arg-type]  # the bad value is the point


@pytest.mark.parametrize("bad", [-1, 31, 2.5, "two"])
def test_the_reward_refuses_a_bad_precision_when_it_is_built(bad: object) -> None:
    """Reward parameters come from YAML and the command line: the registry reads ``"2"`` as 2, like any integer
    parameter, and refuses what is no whole number; the range is the reward's own check."""
    with pytest.raises((ValueError, RewardParameterError), match="precision"):
        get_reward("math", precision=bad)


def test_the_reward_takes_the_setting() -> None:
    rounded = get_reward("math", precision=2)
    assert rounded({"answer": r"\frac13"}, r"\boxed{0.33}").value == 1.0
    assert rounded({"answer": "3.14"}, r"\boxed{3.15}").value == 0.0
    assert get_reward("math")({"answer": r"\frac13"}, r"\boxed{0.33}").value == 0.0
