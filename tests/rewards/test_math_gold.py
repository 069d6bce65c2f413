r"""How a gold's several boxes and its chains are read (:mod:`rewards.math.gold`), each rule beside the answers it
must still refuse."""

from __future__ import annotations

import pytest

from rewards.math import verify

GOLD_READINGS = [
    # boxes joined by a list are the unordered list of their values...
    (r"\(\boxed{1}\) and \(\boxed{-2}\).", r"\boxed{-2, 1}", 1.0),
    (r"\(\boxed{1}\) and \(\boxed{-2}\).", r"\boxed{1, -2}", 1.0),
    (r"\boxed{1} papers and \boxed{2} bins", r"\boxed{2, 1}", 1.0),
    (r"$\boxed{3}$, $\boxed{5}$", r"\boxed{5, 3}", 1.0),
    # ...never one of them, a superset, or the set of them
    (r"\(\boxed{1}\) and \(\boxed{-2}\).", r"\boxed{1}", 0.0),
    (r"\(\boxed{1}\) and \(\boxed{-2}\).", r"\boxed{-2, 1, 3}", 0.0),
    (r"\(\boxed{1}\) and \(\boxed{-2}\).", r"\boxed{\{-2, 1\}}", 0.0),
    # boxes labelled as parts keep their order
    (r"(a) \boxed{3} (b) \boxed{5}", r"\boxed{3, 5}", 1.0),
    (r"(a) \boxed{3} (b) \boxed{5}", r"\boxed{5, 3}", 0.0),
    # boxes named differently are parts; one name (or its indexed roots) labels roots in any order
    (r"$a = \boxed{3}$, $b = \boxed{5}$", r"\boxed{3, 5}", 1.0),
    (r"$a = \boxed{3}$, $b = \boxed{5}$", r"\boxed{5, 3}", 0.0),
    (r"$x = \boxed{2}$ or $x = \boxed{3}$", r"\boxed{3, 2}", 1.0),
    (r"$x_1 = \boxed{2}$ and $x_2 = \boxed{3}$", r"\boxed{3, 2}", 1.0),
    (r"$x_1 = \boxed{2}$ and $x_2 = \boxed{3}$", r"\boxed{3}", 0.0),
    # boxes separated by other text are steps: the last is the answer
    (r"\boxed{1} no no no no no \boxed{2}", r"\boxed{2}", 1.0),
    (r"\boxed{1} no no no no no \boxed{2}", r"\boxed{1,2}", 0.0),
    (r"\boxed{1} no no no no no \boxed{2}", r"\boxed{1}", 0.0),
    (r"First $a = \boxed{3}$. Then the total is $\boxed{5}$.", r"\boxed{5}", 1.0),
    (r"First $a = \boxed{3}$. Then the total is $\boxed{5}$.", r"\boxed{3, 5}", 0.0),
    # a gold chain outside the grammar states its last side; several equations are not a chain
    (r"$1 = \zzz = x = 0$", r"\boxed{0}", 1.0),
    (r"$1 = \zzz = x = 0$", r"\boxed{1}", 0.0),
    (r"$y = \zzz = 2$", r"\boxed{2}", 1.0),
]


@pytest.mark.parametrize("gold,completion,expected", GOLD_READINGS)
def test_gold_reading(gold: str, completion: str, expected: float) -> None:
    s = verify(gold, completion)
    assert s.value == expected, (gold, completion, s.status, s.info)


def test_several_equations_are_not_read_as_one_chain() -> None:
    s = verify(r"$W(n) = 1 \text{ and } W(n) = -1$", r"\boxed{-1}")
    assert s.value != 1.0, s.info


def test_a_completion_keeps_its_own_hedge_rule() -> None:
    """The gold's reading is wider than a completion's: two boxes with text between stay a hedge in an answer."""
    assert verify("2", r"\boxed{1} no no no no no \boxed{2}").value == 0.0
    assert verify("2", r"It is $\boxed{1}$ or $\boxed{2}$.").value == 0.0


LONE_UNCLOSED_BOXES = [
    # a gold that is one box without its last brace is that box closed
    (r"\boxed{5", r"\boxed{5}", 1.0),
    (r"\boxed{5", r"\boxed{6}", 0.0),
    (r"$\boxed{5$", r"\boxed{5}", 1.0),
    (r"\boxed{\frac{1}{2}", r"\boxed{\frac12}", 1.0),
    (r"\boxed{W(n) = 1 \text{ and } W(n) = -1", r"\boxed{W(n) = 1 \text{ or } W(n) = -1}", 1.0),
    (r"\boxed{W(n) = 1 \text{ and } W(n) = -1", r"\boxed{1}", 0.0),
    (r"\\boxed{x \in [1, 2)", r"\boxed{[1, 2)}", 1.0),
]


@pytest.mark.parametrize("gold,completion,expected", LONE_UNCLOSED_BOXES)
def test_a_lone_box_without_its_closing_brace_is_read(gold: str, completion: str, expected: float) -> None:
    s = verify(gold, completion)
    assert s.value == expected, (gold, completion, s.status, s.info)


@pytest.mark.parametrize(
    "gold",
    [
        r"The answer is \boxed{5",  # text before: a worked solution may have been cut mid-answer
        r"Answer: \boxed{7",
        r"\boxed{\frac{1}{2",  # unbalanced inside
        r"\boxed{ ",  # empty
        r"\boxed{5} and \boxed{6",  # one box closes: not a lone unclosed box
    ],
)
def test_other_unclosed_gold_boxes_stay_unscored(gold: str) -> None:
    s = verify(gold, r"\boxed{5}")
    assert (s.value, s.status) == (None, "gold_unparseable"), s


def test_an_answer_s_unclosed_box_stays_refused_even_against_the_same_gold() -> None:
    for gold in ("5", r"\boxed{5"):
        s = verify(gold, r"The answer is \boxed{5")
        assert (s.value, s.status) == (0.0, "no_answer"), s
