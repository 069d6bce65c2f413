r"""The answers docs/MATH.md says we refuse on purpose where Math-Verify's own regression tuples credit them, each
next to the nearby answer that is credited (so the refusal is the rule's, not a reading that fails everything)."""

from __future__ import annotations

import pytest

from rewards.math import verify

REFUSED_AND_CREDITED = [
    # a false chain states two values; a true one states its last
    ("4", r"\boxed{x = 2+2 = 5 = 4}", r"\boxed{x = 2+2 = 4}"),
    (r"\frac13", r"\boxed{x = \frac13 \approx 1.3}", r"\boxed{x = \frac13 \approx 0.33}"),
    # an inequality counts in solved form only
    ("x < 2", r"\boxed{-x > -2}", r"\boxed{x < 2}"),
    ("x < 2", r"\boxed{2x < 4}", r"\boxed{2 > x}"),
    # a rounded decimal is credited only where rounding is asked (below: by the prompt; test_math_precision.py:
    # by the caller's precision, as the suite's tests that pass precision=2)
    (r"\frac13", r"\boxed{0.33}", r"\boxed{0.3333333333333}"),
    # a renamed variable is another answer
    ("f(x)", r"\boxed{f(y)}", r"\boxed{f(x)}"),
]


@pytest.mark.parametrize("gold,refused,credited", REFUSED_AND_CREDITED)
def test_refused_on_purpose(gold: str, refused: str, credited: str) -> None:
    assert verify(gold, refused).value == 0.0, (gold, refused, verify(gold, refused).info)
    assert verify(gold, credited).value == 1.0, (gold, credited, verify(gold, credited).info)


def test_rounding_is_credited_where_the_problem_asks() -> None:
    assert verify(r"\frac13", r"\boxed{0.33}", prompt="Give x to two decimal places.").value == 1.0


def test_an_unanchored_number_needs_lenient_mode() -> None:
    assert verify("7", "Result : 7 $ ok..").status == "no_answer"
    assert verify("7", "Result : 7 $ ok..", strict=False).value == 1.0


def test_a_cut_off_gold_box_is_unscored_not_guessed() -> None:
    s = verify(r"The answer is \boxed{5", r"\boxed{5}")
    assert s.value is None and s.status == "gold_unparseable", s
