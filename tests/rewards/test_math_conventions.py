"""The conventions of the ``math`` reward, one block per convention, each with positive and negative pairs.

Every case is (gold, completion, expected value); gold first. These are real parses and real sympy comparisons.
"""

from __future__ import annotations

import pytest

from rewards.math import verify


def _check(gold: object, completion: str, expected: float) -> None:
    s = verify(gold, completion)
    assert s.value == expected, f"gold={gold!r} completion={completion!r} -> {s.value} {s.status}: {s.info}"


EXTRACTION = [
    ("7", "so \\boxed{5} at first.\nAfter fixing the sign, the answer is \\boxed{7}", 1.0),  # last box wins
    ("7", "\\fbox{7}", 1.0),
    ("7", "The answer is 7.", 1.0),
    ("7", "Final Answer: The final answer is $7$. I hope it is correct.", 1.0),
    ("7", "Answer: 7", 1.0),
    ("7", "She has 3 + 4 = 7 apples.\n#### 7", 1.0),
    ("7", "Adding up.\n\n**7**", 1.0),
    ("7", "<think>It is \\boxed{5}, no wait.</think>The answer is \\boxed{7}", 1.0),
    ("5", "<think>It is \\boxed{5}, no wait.</think>The answer is \\boxed{7}", 0.0),
    ("7", "<think>Adding 3 and 4 gives 7", 0.0),  # reasoning never closed: no answer
    ("7", "Adding 3 and 4 we could get 7, or 8, depending on the reading of the problem.", 0.0),
    ("7", "The answer is 7 because 3 + 4 = 7.", 1.0),
    ("7", "Adding the two parts, 7 is the answer.", 1.0),
    ("7", "The answer is 6. Hmm, rechecking, 7 is the correct answer.", 1.0),
    ("7", "\\boxed{}", 0.0),
]

FORMS = [
    ("\\frac{1}{2}", "\\boxed{\\frac{2}{4}}", 1.0),
    ("\\frac12", "\\boxed{0.5}", 1.0),
    ("2\\sqrt2", "\\boxed{2^{3/2}}", 1.0),
    ("\\frac{\\sqrt3}{2}", "\\boxed{\\sin 60^\\circ}", 1.0),
    ("\\frac{\\sqrt3}{2}", "\\boxed{\\sin 30^\\circ}", 0.0),
    (
        "\\begin{pmatrix} 4 \\\\ 6 \\end{pmatrix}",
        "\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix} + \\begin{pmatrix} 3 \\\\ 4 \\end{pmatrix}}",
        1.0,
    ),
    ("\\begin{pmatrix} 4 \\\\ 6 \\end{pmatrix}", "\\boxed{\\begin{pmatrix} 4 \\\\ 5 \\end{pmatrix}}", 0.0),
    ("1", "\\boxed{\\cos^2 x + \\sin^2 x}", 1.0),
    ("x^2-1", "\\boxed{(x-1)(x+1)}", 1.0),
    ("x^2-1", "\\boxed{(x-1)^2}", 0.0),
]

EXACT_AND_APPROXIMATE = [
    ("\\frac{4}{11}", "\\boxed{0.\\overline{36}}", 1.0),
    ("\\frac{1}{6}", "\\boxed{0.1\\overline{6}}", 1.0),
    ("\\frac{4}{11}", "\\boxed{0.363636\\ldots}", 1.0),
    ("\\frac{1}{3}", "\\boxed{0.3333}", 0.0),
    ("1500", "\\boxed{1.5 \\times 10^3}", 1.0),
    ("0.00125", "The answer is 1.25e-3", 1.0),
    ("\\frac{9}{4}", "\\boxed{2.25}", 1.0),
    ("\\frac13", "\\boxed{0.33}", 0.0),
    ("\\pi", "\\boxed{3.14159}", 0.0),
    ("2", "\\boxed{1.9999999}", 0.0),
    ("\\sqrt2", "\\boxed{1.41421356237}", 1.0),  # 12 significant digits, within a unit of the last: printed
    ("\\sqrt2", "\\boxed{1.41421356}", 0.0),  # 9 digits: a rounding, not the value
    ("\\frac{1}{2004!}", "\\boxed{\\frac{1}{2006!}}", 0.0),
]

MIXED = [
    ("\\frac52", "\\boxed{2\\frac{1}{2}}", 1.0),
    ("-\\frac72", "\\boxed{-3\\frac12}", 1.0),
    ("\\frac{2\\pi}{3}", "\\boxed{2\\frac{\\pi}{3}}", 1.0),  # a product, not a mixed number
    ("\\frac52", "\\boxed{2\\frac{1}{3}}", 0.0),
    ("\\frac52", "The answer is 2 1/2", 1.0),
]

UNITS_PERCENT = [
    ("12", "\\boxed{12\\text{ cm}^2}", 1.0),
    ("12", "The answer is 12 square feet.", 1.0),
    ("30", "\\boxed{30^\\circ}", 1.0),
    ("18", "\\boxed{\\$18.00}", 1.0),
    ("25\\%", "\\boxed{25}", 1.0),
    ("25", "\\boxed{25\\%}", 1.0),
    ("25\\%", "\\boxed{0.25}", 1.0),
    ("25\\%", "\\boxed{0.025}", 0.0),
    ("3", "\\boxed{3ab}", 0.0),
    ("3", "\\boxed{3x}", 0.0),
    ("4", "\\boxed{4 \\text{ ab}}", 0.0),
    ("4", "\\boxed{4 \\text{ m}}", 1.0),
    ("12", "\\boxed{13\\text{ cm}}", 0.0),
]

EQUATIONS_INTERVALS = [
    ("3", "\\boxed{x = 3}", 1.0),
    ("x = 3", "\\boxed{3}", 1.0),
    ("y = 2x + 1", "\\boxed{2x - y + 1 = 0}", 1.0),
    ("y = 2x + 1", "\\boxed{2x - y - 1 = 0}", 0.0),
    ("2, 3", "\\boxed{x^2 - 5x + 6 = 0}", 0.0),  # an unsolved equation states no value: the grader never solves it
    ("x = 2, x = 3", "\\boxed{x = 3 \\text{ or } x = 2}", 1.0),
    ("[2,5)", "\\boxed{2 \\le x < 5}", 1.0),
    ("[2,5)", "\\boxed{2 \\le x \\le 5}", 0.0),
    ("(-\\infty, 2) \\cup (5, \\infty)", "\\boxed{x < 2 \\text{ or } x > 5}", 1.0),
    ("(-\\infty, 1) \\cup (1, \\infty)", "\\boxed{x \\neq 1}", 1.0),
    ("(0, 1)", "\\boxed{x \\in (0, 1)}", 1.0),
    ("[-3, 3]", "\\boxed{|x| \\le 3}", 0.0),  # an unsolved inequality is not its solution set
    ("(-\\infty, -2) \\cup (2, \\infty)", "\\boxed{x^2 > 4}", 0.0),
    ("|x| \\le 3", "\\boxed{-3 \\le x \\le 3}", 1.0),  # ... a gold may be one: the answer states its solution
    ("x^2 > 4", "\\boxed{(-\\infty, -2) \\cup (2, \\infty)}", 1.0),
    ("x^2 > 4", "\\boxed{4 < x^2}", 1.0),  # an unsolved gold against the same unsolved relation
    ("(-\\infty, -2) \\cup (2, \\infty)", "\\boxed{x^2 \\ge 4}", 0.0),
]

LISTS = [
    ("1, 2, 3", "\\boxed{3, 1, 2}", 1.0),
    ("1, 2, 3", "\\boxed{1, 2}", 0.0),
    ("1, 2", "\\boxed{1, 2, 3}", 0.0),
    ("(1, 2)", "\\boxed{(1, 2)}", 1.0),
    ("(1, 2)", "\\boxed{(2, 1)}", 0.0),
    ("(2, 3)", "\\boxed{x = 2, y = 3}", 1.0),
    ("\\pm 3", "\\boxed{3, -3}", 1.0),
    ("\\pm 3", "\\boxed{3}", 0.0),
    ("1 \\pm \\sqrt2", "\\boxed{1 + \\sqrt2, 1 - \\sqrt 2}", 1.0),
    ("2", "\\boxed{2 \\text{ or } 3}", 0.0),
    ("2", "It is $\\boxed{2}$ or $\\boxed{3}$.", 0.0),
    ("3", "Case 1 gives \\boxed{2}.\nCase 2 gives \\boxed{3}.", 0.0),
    ("\\frac12", "\\boxed{\\frac12} = \\boxed{0.5}", 1.0),  # two boxes, one value: no hedge
    ("2", "The answer is 2 or 3.", 0.0),
    ("2", "The answer is $x = 2$ or $x = -3$.", 0.0),
    ("2, -3", "The answer is $x = 2$ or $x = -3$.", 1.0),
    ("-1, 2", "The solutions are $\\boxed{-1}$ and $\\boxed{2}$.", 1.0),
]

TEXT_CHOICE = [
    ("\\text{(C)}", "The correct option is C.", 1.0),
    ("C", "The answer is (C) 12", 1.0),
    ("C", "\\boxed{\\text{(C)}}", 1.0),
    ("C", "The correct option is B.", 0.0),
    ("C", "Checking all five, option (C) is correct.", 1.0),
    ("C", "The answer is C or D.", 0.0),
    ("\\textbf{(A) }5", "\\boxed{A}", 1.0),
    ("\\text{Monday}", "The answer is Monday.", 1.0),
    ("\\text{Monday}", "\\boxed{\\text{Tuesday}}", 0.0),
    ("\\text{odd}", "\\boxed{\\text{Odd}}", 1.0),
]

COMPLEX_SPECIAL = [
    ("5", "\\boxed{|3+4i|}", 1.0),
    ("-1", "\\boxed{i^2}", 1.0),
    ("3+4i", "\\boxed{4i + 3}", 1.0),
    ("3+4i", "\\boxed{3 - 4i}", 0.0),
    ("\\infty", "\\boxed{\\infty}", 1.0),
    ("-\\infty", "\\boxed{\\infty}", 0.0),
    ("\\text{undefined}", "\\boxed{\\text{undefined}}", 1.0),
    ("\\text{no solution}", "\\boxed{\\emptyset}", 1.0),
    ("1011_2", "\\boxed{1011_{2}}", 1.0),
    ("1011_2", "\\boxed{1011}", 1.0),
    ("1011_2", "\\boxed{1101_2}", 0.0),
    ("4", "\\boxed{4\\sqrt(2)}", 0.0),
]

PLAIN_TEXT = [
    ("\\frac{\\pi}{2}", "The answer is pi/2", 1.0),
    ("e^{16}", "The answer is exp(16)", 1.0),
    ("14 - i", "The answer is 14.0 + -1.0i", 1.0),
    ("-3", "The answer is \u22123", 1.0),
    ("1000", "The answer is 1,000", 1.0),
    ("1024", "The answer is 2**10", 1.0),
    ("14 - i", "The answer is (14-1j)", 1.0),
    ("1500", "The answer is 1.5 x 10^3", 1.0),
    ("\\sqrt{3}/2", "The answer is sqrt(3)/2", 1.0),
    ("\\frac{\\pi}{2}", "The answer is pi/3", 0.0),
]


@pytest.mark.parametrize(
    "gold,completion,expected",
    EXTRACTION
    + FORMS
    + EXACT_AND_APPROXIMATE
    + MIXED
    + UNITS_PERCENT
    + EQUATIONS_INTERVALS
    + LISTS
    + TEXT_CHOICE
    + COMPLEX_SPECIAL
    + PLAIN_TEXT,
)
def test_completion_matches_gold_by_the_documented_convention(gold: str, completion: str, expected: float) -> None:
    _check(gold, completion, expected)


def test_every_block_has_positives_and_negatives() -> None:
    for block in (
        EXTRACTION,
        FORMS,
        EXACT_AND_APPROXIMATE,
        MIXED,
        UNITS_PERCENT,
        EQUATIONS_INTERVALS,
        LISTS,
        TEXT_CHOICE,
        COMPLEX_SPECIAL,
        PLAIN_TEXT,
    ):
        assert {e for _, _, e in block} == {0.0, 1.0}
