r"""The grader never solves the problem for the policy, reads every value one way, and reads the notations it missed.

Each class of a probing pass (done as a reward-hacking policy would) with the rule that closes it and its hard
negatives beside it, through the public ``get_reward("math")`` with a :class:`~harness.Sample` that carries the
prompt. Regression check: 68 of these 111 cases (110 parametrized, one parse-error test) fail on the reward as it was
before these rules (restatements solved by the grader, rounding granted without being asked for, ``\sqrt{x^2} =
x``, ``1:00 = 12:00``, row spacing read as a product, rejected ``\lbrace``, set-builder, French intervals and sympy's
printing); the hard negatives of the restatement rule pass on both.
"""

from __future__ import annotations

import pytest

from harness import Sample, get_reward
from rewards.math.problem import expression_key, read_problem

MATH = get_reward("math")

SOLVE = "Solve $3x + 4 = 19$."
RESTATEMENTS = [  # (prompt, gold, completion, expected): an answer states the value; it does not copy the problem
    (SOLVE, "5", "\\boxed{3x + 4 = 19}", 0.0),
    (SOLVE, "5", "Therefore, the answer is $3x + 4 = 19$.", 0.0),
    (SOLVE, "x = 5", "\\boxed{3x + 4 = 19}", 0.0),
    (SOLVE, "x = 5", "\\boxed{19 = 4 + 3x}", 0.0),
    (SOLVE, "5", "\\boxed{x = 5}", 1.0),  # hard negative: a solved equation states its value
    (SOLVE, "x = 5", "\\boxed{x = \\frac{19 - 4}{3}}", 1.0),
    ("", "5", "\\boxed{3x + 4 = 19}", 0.0),  # without the prompt too: an unsolved equation is not an answer
    ("", "5", "\\boxed{2x = 10}", 0.0),
    ("Find the roots of $x^2 - 5x + 6 = 0$.", "2, 3", "\\boxed{x^2 - 5x + 6 = 0}", 0.0),
    ("Find the roots of $x^2 - 5x + 6 = 0$.", "2, 3", "\\boxed{x = 2 \\text{ or } x = 3}", 1.0),
    ("Find the roots of $x^2 - 5x + 6 = 0$.", "2, 3", "\\boxed{x \\in \\{3, 2\\}}", 1.0),
    ("Find the roots of $x^2 - 5x + 6 = 0$.", "2, 3", "\\boxed{(x - 2)(x - 3) = 0}", 0.0),
    ("", "1, 2, 3", "\\boxed{x^3 - 6x^2 + 11x - 6 = 0}", 0.0),
    ("Solve $2x+1>7$.", "(3, \\infty)", "\\boxed{2x+1>7}", 0.0),
    ("Solve $2x+1>7$.", "x > 3", "\\boxed{2x + 1 > 7}", 0.0),
    ("Solve $2x+1>7$.", "(3, \\infty)", "\\boxed{x > 3}", 1.0),
    ("Solve $|2x-3|<5$.", "(-1, 4)", "\\boxed{|2x-3|<5}", 0.0),
    ("Solve $|2x-3|<5$.", "(-1, 4)", "\\boxed{-1 < x < 4}", 1.0),
    ("Solve $1 < 2x - 1 < 5$.", "(1, 3)", "\\boxed{1 < 2x - 1 < 5}", 0.0),
    ("Solve $x^2-5x+6<0$.", "(2, 3)", "\\boxed{x^2-5x+6<0}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{17 \\cdot 23}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{23 \\times 17}", 0.0),  # the same expression in any order
    ("What is 17 * 23?", "391", "\\boxed{17 \\cdot 23}", 0.0),  # a plain-text formula of the prompt
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{x = 17 \\cdot 23}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{391}", 1.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{17 \\cdot 23 = 391}", 1.0),  # a true chain ends on the value
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{391 = 17 \\cdot 23}", 1.0),
    ("Compute $17 \\times 23$.", "391", "\\boxed{(17)(23)}", 0.0),
    ("Simplify $\\sqrt{12}$.", "2\\sqrt{3}", "\\boxed{\\sqrt{12}}", 0.0),
    ("Compute $\\dbinom{5}{2}$.", "10", "\\boxed{\\binom{5}{2}}", 0.0),
    ("Choose 2 of 5 people.", "10", "\\boxed{\\binom{5}{2}}", 1.0),  # no expression of the prompt
    ("Simplify $\\sqrt{12}$.", "2\\sqrt{3}", "\\boxed{2\\sqrt3}", 1.0),
    ("Factor $x^2 - 1$.", "(x-1)(x+1)", "\\boxed{x^2 - 1}", 0.0),
    ("Factor $x^2 - 1$.", "(x-1)(x+1)", "\\boxed{(x+1)(x-1)}", 1.0),
    # hard negatives: the gold itself is an expression of the prompt, or an equation
    ("Which is larger, $2^{10}$ or $10^3$?", "2^{10}", "\\boxed{2^{10}}", 1.0),
    ("Which is larger, $2^{10}$ or $10^3$?", "2^{10}", "\\boxed{1024}", 1.0),
    ("Evaluate $\\frac{1}{2}$ as a decimal.", "0.5", "\\boxed{\\frac{1}{2}}", 0.0),
    ("Find the line through $(0, 3)$ with slope 2.", "y = 2x + 3", "\\boxed{y = 2x + 3}", 1.0),
    ("Find the line through $(0, 3)$ with slope 2.", "y = 2x + 3", "\\boxed{2x - y + 3 = 0}", 1.0),
    ("If $x = 5$, what is $x$?", "5", "\\boxed{5}", 1.0),
    ("Pick one: (A) $\\sqrt{12}$ (B) $3$", "2\\sqrt{3}", "\\boxed{\\sqrt{12}}", 1.0),  # an option, chosen
]


@pytest.mark.parametrize("prompt,gold,completion,expected", RESTATEMENTS)
def test_an_answer_states_the_value_instead_of_restating_the_problem(
    prompt: str, gold: str, completion: str, expected: float
) -> None:
    s = MATH(Sample(prompt=prompt, answer=gold), completion)
    assert (s.value, s.status) == (expected, "ok"), s.info


ROUND = "Round your answer to two decimal places."
DECIMALS = [  # (prompt, gold, completion, expected): rounding only where asked; every notation read by value
    ("", "4.67", "\\boxed{\\frac{14}{3}}", 0.0),
    (ROUND, "4.67", "\\boxed{\\frac{14}{3}}", 1.0),
    ("What is it, approximately?", "-4.67", "\\boxed{-\\frac{14}{3}}", 1.0),
    ("", "4.67", "\\boxed{\\frac{46702}{10000}}", 0.0),
    ("", "4.67", "\\boxed{46702e-4}", 0.0),
    ("", "4.67", "\\boxed{4,6702}", 0.0),
    ("", "4.67", "\\boxed{4\\,.\\,6702}", 0.0),
    ("", "4.67", "\\boxed{4.6702}", 0.0),
    (ROUND, "4.67", "\\boxed{\\frac{46702}{10000}}", 1.0),  # one reading: the value, in any notation
    (ROUND, "4.67", "\\boxed{4.6702}", 1.0),
    (ROUND, "4.67", "\\boxed{4.666}", 1.0),
    (ROUND, "4.67", "\\boxed{4.7}", 0.0),
    (ROUND, "4.66", "\\boxed{\\frac{14}{3}}", 0.0),  # not its rounding
    (ROUND, "12.5", "\\boxed{\\frac{249}{20}}", 0.0),  # 12.45: a tie is not a rounding
    (ROUND, "12.50", "\\boxed{12.54}", 0.0),  # the places the gold writes, not those of its value
    (ROUND, "12.50", "\\boxed{12.504}", 1.0),
    ("", "12.5", "\\boxed{\\sqrt{156}}", 0.0),
    ("", "3.14", "\\boxed{\\frac{22}{7}}", 0.0),
    ("", "3.14", "\\boxed{\\pi}", 0.0),
    ("Use $\\pi \\approx 3.14$ and round to the nearest hundredth.", "3.14", "\\boxed{\\pi}", 1.0),
    ("", "\\approx 3.14", "\\boxed{\\pi}", 1.0),  # \approx in the gold asks for the rounding
    ("", "1234567890123.4", "\\boxed{1234567891000.4}", 0.0),  # half a unit of the last place, not 1e-9
    ("", "1234567890123.4", "\\boxed{1234567890123.4}", 1.0),
    ("", "1.414213562", "\\boxed{\\sqrt2}", 1.0),  # a printed value: within half a unit and 1e-9
    ("", "7.0", "\\boxed{7}", 1.0),
    ("", "(1+i)^8", "\\boxed{16.000000000001}", 0.0),  # 16 in closed form is no rounding to 12 places
    ("", "\\sqrt{2}", "\\boxed{1.414213562}", 1.0),  # a printed value of an irrational gold
    (ROUND, "\\frac{1}{3}", "\\boxed{0.33}", 1.0),  # an exact gold, rounded as asked
    (ROUND, "\\frac{1}{3}", "\\boxed{0.3}", 0.0),  # fewer places than asked
    ("", "\\frac{1}{3}", "\\boxed{0.33}", 0.0),
    ("", "2.74", "\\boxed{2,74}", 1.0),
    ("", "1,22", "\\boxed{1.22}", 1.0),  # a gold with a decimal comma, answered by one number
    ("", "0,111", "\\boxed{0.111}", 1.0),  # 0,111 groups no thousands
]


@pytest.mark.parametrize("prompt,gold,completion,expected", DECIMALS)
def test_rounding_is_credited_only_where_the_problem_asks(
    prompt: str, gold: str, completion: str, expected: float
) -> None:
    s = MATH(Sample(prompt=prompt, answer=gold), completion)
    assert (s.value, s.status) == (expected, "ok"), s.info


VERDICTS = [  # wrong verdicts and rejected right answers of the probing pass, with their hard negatives
    ("x", "\\boxed{\\sqrt{x^2}}", 0.0),  # |x|, not x: compared at negative points too
    ("|x|", "\\boxed{\\sqrt{x^2}}", 1.0),
    ("\\sqrt{xy}", "\\boxed{\\sqrt{x}\\sqrt{y}}", 1.0),  # equal wherever both roots are real
    ("x", "\\boxed{(\\sqrt{x})^2}", 1.0),
    ("12:00", "\\boxed{1:00}", 0.0),  # a pair with a zero part has no quotient
    ("12:00", "\\boxed{12:00}", 1.0),
    ("0:3", "\\boxed{0:5}", 0.0),
    ("7:32", "\\boxed{14:64}", 1.0),  # a ratio is still its quotient
    ("2:30", "\\boxed{1:15}", 0.0),  # ... but two clock times are times
    ("2:30", "\\boxed{2:30}", 1.0),
    ("1:2", "\\boxed{2:4}", 1.0),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\boxed{\\begin{pmatrix}1&2\\\\[2pt]3&4\\end{pmatrix}}", 1.0),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\boxed{\\begin{pmatrix}1&2\\\\[1.5ex] 3&5\\end{pmatrix}}", 0.0),
    ("\\{1, 2\\}", "\\boxed{\\lbrace 1, 2 \\rbrace}", 1.0),
    ("\\{1, 2\\}", "\\boxed{\\left\\lbrace 2, 1 \\right\\rbrace}", 1.0),
    ("\\{1, 2\\}", "\\boxed{\\lbrace 1, 3 \\rbrace}", 0.0),
    ("(1, 5)", "\\boxed{\\{x \\in \\mathbb{R} \\mid 1 < x < 5\\}}", 1.0),
    ("(1, 5)", "\\boxed{\\{x \\in \\mathbb{R} : 1 \\le x < 5\\}}", 0.0),
    ("(1, 5)", "\\boxed{]1, 5[}", 1.0),
    ("(-\\infty, 2]", "\\boxed{]-\\infty, 2]}", 1.0),
    ("[1, 5)", "\\boxed{[1, 5[}", 1.0),
    ("(-\\infty, 2) \\cup (3, \\infty)", "\\boxed{]-\\infty, 2[ \\cup ]3, +\\infty[}", 1.0),
    ("[1, 5]", "\\boxed{]1, 5]}", 0.0),
    ("(3, \\frac{\\pi}{2})", "\\boxed{\\\\left( 3, \\\\frac{\\\\pi}{2} \\\\right)}", 1.0),  # escaped twice
    ("(0, 1)", "\\boxed{0 < f(x) < 1}", 1.0),  # a named quantity in the middle of a chain
    # sympy's own printing: \wedge and \vee, \setminus, \operatorname{acot}, set-builder with a domain
    ("(1, 3)", "\\boxed{x > 1 \\wedge x < 3}", 1.0),
    ("(1, 3)", "\\boxed{x > 1 \\text{ and } x < 3}", 1.0),  # "and" is an intersection ...
    ("(-\\infty, 1) \\cup (3, \\infty)", "\\boxed{x > 1 \\text{ and } x < 3}", 0.0),  # ... never a union
    ("(-\\infty, 1) \\cup (3, \\infty)", "\\boxed{x > 3 \\vee x < 1}", 1.0),
    ("(-\\infty, 1) \\cup (1, \\infty)", "\\boxed{\\mathbb{R} \\setminus \\{1\\}}", 1.0),
    ("[0, 5]", "\\boxed{[0, 5] \\setminus \\{2\\}}", 0.0),
    ("(2, \\infty)", "\\boxed{\\left\\{x\\; \\middle|\\; x \\in \\mathbb{R} \\wedge x > 2 \\right\\}}", 1.0),
    ("\\operatorname{acot}{\\left(2 \\right)}", "\\boxed{\\arctan \\frac{1}{2}}", 1.0),
    ("\\operatorname{atan}^{2}{\\left(3 \\right)}", "\\boxed{(\\arctan 3)^2}", 1.0),
    ("45 + 7 i", "\\boxed{45 + 7 j}", 1.0),
    ("-2", "\\boxed{\\sqrt[3]{-8}}", 1.0),  # an odd root of a negative number is the real one
    ("1", "\\boxed{\\sqrt[3]{2+\\sqrt{5}}+\\sqrt[3]{2-\\sqrt{5}}}", 1.0),
    ("2", "\\boxed{\\sqrt[3]{-8}}", 0.0),
]


@pytest.mark.parametrize("gold,completion,expected", VERDICTS)
def test_wrong_verdicts_and_rejected_notations(gold: str, completion: str, expected: float) -> None:
    s = MATH(Sample(answer=gold), completion)
    assert (s.value, s.status) == (expected, "ok"), s.info


def test_a_spacing_that_is_no_length_is_a_parse_error_not_a_value() -> None:
    s = MATH(
        Sample(answer="\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"),
        "\\boxed{\\begin{pmatrix}1&2\\\\[x]3&4\\end{pmatrix}}",
    )
    assert (s.value, s.status) == (0.0, "parse_error")


def test_problem_reading() -> None:
    p = read_problem("Round to the nearest tenth. Compute $17 \\cdot 23$ and 2x + 1 > 7.")
    assert p.approximate and p.places == 1
    assert expression_key("23 \\times 17") in p.expressions
    assert expression_key("2x+1>7") in p.expressions
    assert expression_key("17") is None and expression_key("-17") is None  # an atom restates nothing
    assert not read_problem("Compute $17 \\cdot 23$.").approximate
    assert read_problem("Give it to three decimal places.").places == 3
    chat = [{"role": "user", "content": "Compute $17 \\cdot 23$."}]
    s = MATH(Sample(prompt=chat, answer="391"), "\\boxed{17 \\cdot 23}")
    assert s.value == 0.0 and "restates" in s.info["reason"]


PADDED = [  # (prompt, gold, completion, expected): an expression of the prompt padded by what changes nothing
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{17 \\times 23 \\cdot 1}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{0 + 23 \\cdot 17}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "The answer is $\\frac{2 \\cdot (17)(23)}{2}$.", 0.0),
    ("Simplify $\\frac{6}{8}$.", "\\frac{3}{4}", "\\boxed{1 \\cdot \\frac{6}{8}}", 0.0),
    ("Evaluate $\\log_2 8$.", "3", "\\boxed{\\log_2 8 + 0}", 0.0),
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{17 \\cdot 23 \\cdot 1 = 391}", 1.0),  # a true chain ends on the value
    ("Compute $17 \\cdot 23$.", "391", "\\boxed{391 \\cdot 1}", 1.0),  # no expression of the prompt inside
    # hard negatives: an expression of the prompt inside the answer, but not with the gold's value
    ("What is $(2 + 3) \\cdot 4$? Note $2 + 3 = 5$.", "20", "\\boxed{5 \\cdot 4}", 1.0),
    ("Let $g(x) = x + 1$ and $f(x) = 2g(x)$. Find $f(x)$.", "2x + 2", "\\boxed{2(x + 1)}", 1.0),
    ("Simplify $\\sqrt{12} + \\sqrt{3}$.", "3\\sqrt{3}", "\\boxed{2\\sqrt{3} + \\sqrt{3}}", 1.0),
    ("Which is larger, $2^{10}$ or $10^3$?", "2^{10}", "\\boxed{2^{10} \\cdot 1}", 1.0),  # the gold is that expression
]
ROOTS = [  # a square root is the power 1/2, in the prompt and in the answer
    ("Evaluate $\\sqrt{49}$.", "7", "\\boxed{49^{1/2}}", 0.0),
    ("Evaluate $\\sqrt{49}$.", "7", "\\boxed{49^{\\frac{1}{2}}}", 0.0),
    ("Evaluate $49^{1/2}$.", "7", "\\boxed{\\sqrt{49}}", 0.0),
    ("Simplify $\\sqrt{12}$.", "2\\sqrt{3}", "\\boxed{2 \\cdot 3^{1/2}}", 1.0),
    ("Write $\\sqrt{x}$ as a power of $x$.", "x^{1/2}", "\\boxed{x^{\\frac12}}", 1.0),
    ("Evaluate $\\sqrt[3]{8}$.", "2", "\\boxed{2}", 1.0),
]
WORDED = [  # arithmetic written in words in the prompt is a formula of the prompt
    ("What is 17 times 23?", "391", "\\boxed{17 \\times 23}", 0.0),
    ("What is 144 divided by 12?", "12", "\\boxed{\\frac{144}{12}}", 0.0),
    ("What is 17 multiplied by 23 plus 9?", "400", "\\boxed{17 \\cdot 23 + 9}", 0.0),
    ("What is 17 times 23?", "391", "\\boxed{391}", 1.0),
    ("A team plays 17 times in 23 days. How many games per day?", "\\frac{17}{23}", "\\boxed{\\frac{17}{23}}", 1.0),
]


@pytest.mark.parametrize("prompt,gold,completion,expected", PADDED + ROOTS + WORDED)
def test_a_padded_or_worded_expression_of_the_prompt_is_still_a_restatement(
    prompt: str, gold: str, completion: str, expected: float
) -> None:
    """Regression: before these rules the first five of PADDED and the first three of ROOTS and WORDED scored 1.0."""
    s = MATH(Sample(prompt=prompt, answer=gold), completion)
    assert (s.value, s.status) == (expected, "ok"), s.info


@pytest.mark.parametrize(
    "prompt,places",
    [("Give your answer correct to 2 d.p.", 2), ("Round to 3 s.f.", None), ("Use DP to count the paths.", -1)],
)
def test_abbreviated_rounding_requests_are_read(prompt: str, places: int | None) -> None:
    p = read_problem(prompt)
    assert p.approximate == (places != -1)
    assert p.places == (places if places != -1 else None)
    if places == 2:
        assert MATH(Sample(prompt=prompt, answer="4.67"), "\\boxed{\\frac{14}{3}}").value == 1.0
        assert MATH(Sample(prompt="", answer="4.67"), "\\boxed{\\frac{14}{3}}").value == 0.0
