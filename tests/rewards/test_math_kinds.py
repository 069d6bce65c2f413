"""The answer shapes and hacks of the ``math`` reward, one block per kind, each positive next to its hard negatives.

Every case is (gold, completion, expected value) through the public ``get_reward("math")`` in its default (strict)
mode unless a block says otherwise. Kinds 1-9 are real answers that must be accepted (and their near-misses that
must not); kinds 10-15 are ways to get full reward without a right answer. The format-reward hacks (kind 16) are in
``test_format.py``. Timing bounds of the slow inputs are printed by ``benchmarks/math_adversarial.py``.

Regression check: against the reward as it was before these kinds were handled, 71 of the non-slow cases here
failed (hacks credited, real answers rejected), and the slow inputs ran for seconds to minutes
(``\\sqrt{10^{10000}+1}``: over 400 s).
"""

from __future__ import annotations

import pytest

from harness import get_reward

MATH = get_reward("math")
LENIENT = get_reward("math", strict=False)

LABELLED = [  # 1
    ("(3,-2)", "\\boxed{(a,b) = (3,-2)}", 1.0),
    ("(a,b) = (3,-2)", "\\boxed{(3,-2)}", 1.0),
    ("(3,-2)", "\\boxed{(a,b) = (3,2)}", 0.0),
    ("(3,-2)", "\\boxed{(a,b) = (-2,3)}", 0.0),
    ("5", "\\boxed{x = 5}", 1.0),
    ("x = 5", "\\boxed{5}", 1.0),
    ("x = 5", "\\boxed{y = 5}", 0.0),
    ("4, 5", "\\boxed{AB = 4, CD = 5}", 1.0),
    ("4, 5", "\\boxed{AB = 4, CD = 6}", 0.0),
    ("2", "\\boxed{|PQ| = 2}", 1.0),
    ("2", "\\boxed{|PQ| = 3}", 0.0),
    ("\\frac13", "\\boxed{\\frac{XY}{YZ} = \\frac{1}{3}}", 1.0),
    ("\\frac13", "\\boxed{\\frac{XY}{YZ} = 3}", 0.0),
    ("(1,2),(3,4)", "\\boxed{x=1, y=2; x=3, y=4}", 1.0),
    ("(1,2),(3,4)", "\\boxed{x=1, y=2 \\text{ or } x=3, y=4}", 1.0),
    ("(1,2),(3,4)", "\\boxed{x=1, y=2; x=3, y=5}", 0.0),
    ("(1,2),(3,4)", "\\boxed{x=1, y=2}", 0.0),
    ("(1,2)", "\\boxed{(y,x) = (2,1)}", 1.0),  # values in the variables' order, as y = 2, x = 1 is
    ("(1,2)", "\\boxed{(x,y) = (2,1)}", 0.0),
    ("x=1, y=2", "\\boxed{(1,2)}", 1.0),
    ("x=1, y=2", "\\boxed{(2,1)}", 0.0),
    ("(a,b)=(3,-2)", "\\boxed{(b,a)=(-2,3)}", 1.0),
    ("(a,b)=(3,-2)", "\\boxed{(b,a)=(3,-2)}", 0.0),
    ("5", "\\boxed{x + y = 5}", 0.0),  # an equation is the answer itself, not a label
    ("6", "\\boxed{2x = 6}", 0.0),
]

TYPESET = [  # 2
    ("12345", "\\boxed{12,345}", 1.0),
    ("12345", "\\boxed{12{,}345}", 1.0),
    ("12345", "\\boxed{12,\\!345}", 1.0),
    ("1000", "\\boxed{1\\,000}", 1.0),
    ("1000000", "\\boxed{1 000 000}", 1.0),
    ("12345", "\\boxed{12,346}", 0.0),
    ("42", "\\boxed{42\\textnormal{ km}}", 1.0),
    ("42", "\\boxed{42\\mbox{ km}}", 1.0),
    ("42", "\\boxed{42\\mathrm{~km}}", 1.0),
    ("42", "\\boxed{43\\textnormal{ km}}", 0.0),
    ("42", "\\boxed{\\$42}", 1.0),
    ("42", "\\boxed{42\\$}", 1.0),
    ("42", "\\boxed{42 \\text{ dollars}}", 1.0),
    ("42", "\\boxed{\u20ac42}", 1.0),
    ("42", "\\boxed{\\$4.20}", 0.0),
    ("2.74", "\\boxed{2,74}", 1.0),  # a decimal comma: one comma, not three digits after it, one value expected
    ("2.74", "\\boxed{2{,}74}", 1.0),
    ("2740", "\\boxed{2,740}", 1.0),  # three digits after the comma: thousands
    ("2.74", "\\boxed{2,740}", 0.0),
    ("274", "\\boxed{2,74}", 0.0),
    ("2, 74", "\\boxed{2,74}", 1.0),  # a list gold: the comma separates
    ("1000.99", "so the number is 10 which is 1,000.99m\u00b2", 1.0),  # a unit typeset with a Unicode power
    ("12", "\\boxed{12cm\u00b3}", 1.0),
    ("1000.99", "\\boxed{1,000.98m\u00b2}", 0.0),
    ("5", "\\boxed{5m^2}", 0.0),  # LaTeX's m^2 glued to a number is algebra, not a unit
    ("5", "\\boxed{5x\u00b2}", 0.0),  # only units: x\u00b2 is a power of x
    ("5", "\\boxed{5m\u00b2 + 1}", 0.0),  # a unit ends the answer
]

SENTENCES = [  # 3
    ("\\frac72", "Adding the two parts.\nTherefore, the area of the triangle is 7/2.", 1.0),
    ("\\frac72", "Adding the two parts.\nTherefore, the area of the triangle is 9/2.", 0.0),
    ("35", "Final Answer: The final answer is $35$. I hope it is correct.", 1.0),
    ("42", "The answer is 42.", 1.0),
    ("42", "She sells 6 * 7 = 42 eggs.\n#### 42", 1.0),
    ("42", "The answer is 42.<|im_start|>user\nNow what is 6 * 8? The answer is 48.", 1.0),
    ("48", "The answer is 42.<|im_start|>user\nNow what is 6 * 8? The answer is 48.", 0.0),
    ("42", "So the answer is $\\boxed{42}$<|eot_id|>", 1.0),
    ("42", "Thus the total number of apples is $42$.", 1.0),
    ("42", "We added 20 and 22 and got 42 at some point.", 0.0),  # strict: prose that mentions a number
    ("12", "The area is 12 or maybe 13.", 0.0),
    ("100\\%", "Halving $\\Delta p$.\nTherefore, the error in the position increases by 100%.", 1.0),  # a change
    ("3", "So the price rose by 3 dollars.", 1.0),
    ("3", "So the price rose by 3 or 4 dollars.", 0.0),
    ("5", "Therefore, the cost increases by at least 5.", 0.0),
    ("4", "Next we simplify.\nThus we divide by 4.", 0.0),  # an operation, not a stated amount
]

GOLD_SOLUTIONS = [  # 4
    ("We have $x = 3$, so the answer is $\\boxed{7}$.", "\\boxed{7}", 1.0),
    ("We have $x = 3$, so the answer is $\\boxed{7}$.", "\\boxed{3}", 0.0),
    ("$\\frac12$", "\\boxed{0.5}", 1.0),
    ("$$\\frac12$$", "\\boxed{0.5}", 1.0),
    ("\\(\\frac12\\)", "\\boxed{0.5}", 1.0),
    ("\\[\\frac12\\]", "\\boxed{0.5}", 1.0),
    ("\\[\\frac12\\]", "\\boxed{2}", 0.0),
    ("Janet has 16 eggs.\n16 - 3 - 4 = 9, and 9 * 2 = 18.\n#### 18", "\\boxed{18}", 1.0),
    ("Janet has 16 eggs.\n16 - 3 - 4 = 9, and 9 * 2 = 18.\n#### 18", "\\boxed{9}", 0.0),
]

M22 = "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"
ARRAY = "\\left[\\begin{array}{cc}1&2\\\\3&%s\\end{array}\\right]"
COL = "\\begin{pmatrix}%s\\\\%s\\end{pmatrix}"
MATRICES = [  # 5
    (M22, "\\boxed{\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}}", 1.0),
    (M22, "\\boxed{%s}" % (ARRAY % 4), 1.0),
    (M22, "\\boxed{%s}" % (ARRAY % 5), 0.0),
    (M22, f"So the matrix is ${M22}$.", 1.0),
    (M22, "\\boxed{\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}}", 0.0),  # transposed
    (COL % (2, 3), "\\boxed{\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}%s}" % (COL % (2, 3)), 1.0),
    (COL % (4, 6), "\\boxed{" + COL % (1, 2) + "+" + COL % (3, 4) + "}", 1.0),
    (COL % (4, 6), "\\boxed{" + COL % (1, 2) + "+" + COL % (3, 5) + "}", 0.0),
    (COL % (1, 2), "\\boxed{%s}" % (COL % (1, "\\pm 2")), 0.0),  # a hedge
]

RELATIONS = [  # 6
    ("x \\geq 5", "\\boxed{x >= 5}", 1.0),
    ("x \\geq 5", "\\boxed{x \\ge 5}", 1.0),
    ("x \\geq 5", "\\boxed{x > 5}", 0.0),
    ("x \\lt 5", "\\boxed{x < 5}", 1.0),
    ("x \\gt 5", "\\boxed{x < 5}", 0.0),
    ("x \\neq 5", "\\boxed{x != 5}", 1.0),
    ("x \\neq 5", "\\boxed{x = 5}", 0.0),
    ("-2 \\le x \\le 7", "\\boxed{x \\in [-2,7]}", 1.0),
    ("-2 \\le x \\le 7", "\\boxed{x \\in [-2,7)}", 0.0),
    ("[-2,7]", "\\boxed{-2 \\le x \\le 7}", 1.0),
    ("(-\\infty, 2) \\cup (5, \\infty)", "\\boxed{x < 2 \\text{ or } x > 5}", 1.0),
    ("[-\\frac32,-1]\\cup[1,\\frac32]", "\\boxed{1 \\le |z| \\le \\frac32}", 0.0),  # unsolved: no credit
    ("1 \\le |z| \\le \\frac32", "\\boxed{[-\\frac32,-1]\\cup[1,\\frac32]}", 1.0),  # a gold may be unsolved
    ("[-\\frac32,-1]\\cup[1,\\frac32]", "\\boxed{1 \\le |z| < \\frac32}", 0.0),
    ("[-\\frac32,-1]\\cup[1,\\frac32]", "\\boxed{1 \\le z \\le \\frac32}", 0.0),
]

RATIOS = [  # 7: a ratio equals its quotient
    ("7:32", "\\boxed{V_1:V_2 = 7:32}", 1.0),
    ("7:32", "\\boxed{\\frac{7}{32}}", 1.0),
    ("\\frac{7}{32}", "\\boxed{7:32}", 1.0),
    ("7:32", "\\boxed{14:64}", 1.0),
    ("7:32", "\\boxed{32:7}", 0.0),
    ("7:32", "\\boxed{7:31}", 0.0),
    ("1:2:3", "\\boxed{2:4:6}", 1.0),
    ("1:2:3", "\\boxed{1:3:2}", 0.0),
]

DECIMALS = [  # 8: >= 10 significant digits, within one unit of the last, gold not exactly writable
    ("\\frac{1}{12}", "\\boxed{0.0833333333333333}", 1.0),
    ("\\frac{1}{12}", "\\boxed{0.083333}", 0.0),
    ("\\frac{1}{12}", "\\boxed{0.08}", 0.0),
    ("(1/3, 1/5)", "\\boxed{(0.3333333333, 0.2)}", 1.0),
    ("(1/3, 1/5)", "\\boxed{(0.33, 0.2)}", 0.0),
    ("\\frac13", "\\boxed{0.3333333334}", 1.0),  # rounded
    ("\\frac13", "\\boxed{0.3333333336}", 0.0),  # off by more than a unit of the last digit
    ("\\pi", "\\boxed{3.141592654}", 1.0),
    ("\\pi", "\\boxed{3.14159}", 0.0),
    ("\\pi", "\\boxed{3.141592644}", 0.0),
    ("2", "\\boxed{1.9999999999}", 0.0),  # 2 is written exactly with those decimals
    ("\\frac18", "\\boxed{0.1250000001}", 0.0),
    ("\\frac18", "\\boxed{0.125}", 1.0),
]

SETS_TUPLES = [  # 9
    ("[3,5]", "\\boxed{\\{3,5\\}}", 0.0),
    ("\\{3,5\\}", "\\boxed{[3,5]}", 0.0),
    ("\\{2,7\\}", "\\boxed{(2,7)}", 0.0),
    ("(2,7)", "\\boxed{\\{2,7\\}}", 0.0),
    ("\\{2,7\\}", "\\boxed{\\{7,2\\}}", 1.0),
    ("\\{2,7\\}", "\\boxed{2, 7}", 1.0),
    ("(2,7)", "\\boxed{(2,7)}", 1.0),
    ("3, 5", "\\boxed{[3, 5]}", 1.0),  # a bare list gold: [3, 5] written as a list
    ("$\\boxed{2}$ and $\\boxed{7}$", "\\boxed{\\{2,7\\}}", 0.0),  # two boxed golds are not the set of both
    ("$\\boxed{2}$ and $\\boxed{7}$", "\\boxed{2}, \\boxed{7}", 1.0),
    ("$\\boxed{2}$ and $\\boxed{7}$", "\\boxed{7}", 0.0),
]

MARKERS = [  # 10: one reading of % and degrees per pair
    ("2", "\\boxed{(100\\%-1)/99}", 0.0),
    ("1", "\\boxed{(100\\%-1)/99}", 0.0),
    ("0", "\\boxed{(100\\%-1)/99}", 1.0),  # the literal reading: 100% is 1
    ("2", "\\boxed{(180^\\circ-\\pi)/(180-\\pi)}", 0.0),
    ("1", "\\boxed{(180^\\circ-\\pi)/(180-\\pi)}", 0.0),
    ("9", "\\boxed{\\frac{(100\\%-1)}{99} \\cdot \\frac{180^\\circ-\\pi}{180-\\pi} + 9}", 1.0),
    ("2", "\\boxed{\\frac{(100\\%-1)}{99} \\cdot \\frac{180^\\circ-\\pi}{180-\\pi} + 9}", 0.0),
    ("12", "\\boxed{12\\%}", 1.0),
    ("0.12", "\\boxed{12\\%}", 1.0),
    ("1.2", "\\boxed{12\\%}", 0.0),
    ("30", "\\boxed{30^\\circ}", 1.0),
    ("\\frac{\\pi}{6}", "\\boxed{30^\\circ}", 1.0),
    ("\\frac{\\pi}{3}", "\\boxed{30^\\circ}", 0.0),
]

CHAINS_JUNK = [  # 11
    ("9", "\\boxed{3=9}", 0.0),
    ("3", "\\boxed{3=9}", 0.0),
    ("2", "\\boxed{1+1=3=2}", 0.0),
    ("2", "\\boxed{1+1=2}", 1.0),
    ("7", "\\boxed{x = 3 + 4 = 7}", 1.0),
    ("7", "\\boxed{x = 3 + 5 = 7}", 0.0),
    ("7", "\\boxed{7\\text{2}}", 0.0),
    ("7", "\\boxed{7\\text{.5}}", 0.0),
    ("7", "\\boxed{7\\mathrm{2}}", 0.0),
    ("7", "\\boxed{7 not}", 0.0),
    ("7", "\\boxed{7 wrong}", 0.0),
    ("7", "\\boxed{7\\text{ maybe 8}}", 0.0),
    ("7", "The answer is 7 wrong.", 0.0),
    ("7", "\\boxed{7\\text{ cm}}", 1.0),
    ("7", "\\boxed{7 \\text{ apples}}", 1.0),
    ("7", "\\boxed{7 \\text{ square feet}}", 1.0),
    ("60", "The answer is 60 miles per hour.", 1.0),
]

HEDGES = [  # 12
    ("(1,2)", "\\boxed{(1, \\pm 2)}", 0.0),
    ("1, 2", "\\boxed{1, \\pm 2}", 0.0),
    ("1, 2, -2", "\\boxed{1, \\pm 2}", 1.0),
    ("(1,2)", "\\boxed{\\{1,2\\}}", 0.0),
    ("A", "\\boxed{A \\& B}", 0.0),
    ("A", "\\boxed{A (or B)}", 0.0),
    ("A", "\\boxed{A \\lor B}", 0.0),
    ("A", "\\boxed{A}", 1.0),
    ("A", "\\boxed{\\text{(A)}}", 1.0),
    ("7", "The answer is 7. Or maybe 8.", 0.0),
    ("7", "The answer is 7. I checked it twice: 3 + 4 = 7.", 1.0),
    ("7", "Adding.\n\n**7** or **8**", 0.0),
    ("7", "Adding.\n\n**7**", 1.0),
    ("7", "\\boxed{7}. Or perhaps \\boxed{8}.", 0.0),
    ("7", "The answer is 7.\n\nHmm, or is it 8?", 0.0),
    ("7", "The answer is 7. It might be 8 though.", 0.0),
    ("7", "\\boxed{7} (not sure, maybe 6)", 0.0),
    ("7", "The answer is 7. This could also be verified by substituting 7 back.", 1.0),
    ("7", "\\boxed{7}. The other root, 8, is rejected.", 1.0),
    ("7", "\\boxed{7}\n\nTo double-check: 3 or 4 more... 3 + 4 = 7.", 1.0),
    ("7", "<think>a</think> fine <think> \\boxed{7}", 0.0),
    ("7", "<think>a</think> fine \\boxed{7}", 1.0),
    ("8", "We get $\\boxed{x=2}$, so the side is 4. Therefore the area is $\\boxed{8}$.", 1.0),  # concluded
    ("8", "It is \\boxed{2}, or it is \\boxed{8}.", 0.0),  # two boxes, no conclusion: a hedge
]

TOLERANCE = [  # 13: exact golds compare exactly
    ("10^{40}", "\\boxed{10^{40}+\\sqrt2}", 0.0),
    ("7", "\\boxed{7+10^{-40}\\pi}", 0.0),
    ("x", "\\boxed{x+10^{-40}}", 0.0),
    ("\\pi", "\\boxed{\\pi + 10^{-35}}", 0.0),
    ("3+2\\sqrt2", "\\boxed{(1+\\sqrt2)^2}", 1.0),
    ("\\sqrt2+\\sqrt3", "\\boxed{\\sqrt{5+2\\sqrt6}}", 1.0),
    ("x^2-1", "\\boxed{(x-1)(x+1)}", 1.0),
    ("3", "\\boxed{\\log_2 8}", 1.0),
    ("7.0", "\\boxed{7+10^{-40}\\pi}", 0.0),  # a decimal gold is a rounding, not room for a perturbation
    ("7.0", "\\boxed{7}", 1.0),
    ("1.414213562", "\\boxed{\\sqrt2}", 1.0),  # ... but a gold rounded from the answer's value stays right
    ("e^{\\pi\\sqrt{163}}", "\\boxed{640320^3+744}", 0.0),  # an integer 7.5e-13 off is not a printed value
    ("10^{5000}", "\\boxed{10^{5000}+1}", 0.0),
]

REAL_STYLES = [  # shapes of MATH, NuminaMath and OpenThoughts outputs that the kinds above combine
    ("18", "<|begin_of_thought|>9 * 2<|end_of_thought|><|begin_of_solution|>So $\\boxed{18}$.<|end_of_solution|>", 1.0),
    (
        "18",
        "<|begin_of_thought|>It is \\boxed{18}<|end_of_thought|><|begin_of_solution|>So 17.<|end_of_solution|>",
        0.0,
    ),
    ("(2,+\\infty)", "\\boxed{\\left\\{x\\middle|x>2\\right\\}}", 1.0),
    ("(2,+\\infty)", "\\boxed{\\{x \\mid x \\geqslant 2\\}}", 0.0),
    ("30", "\\boxed{30{}^\\circ}", 1.0),
    ("25", "\\boxed{25^{\\circ}C}", 1.0),
    ("26", "\\boxed{25^{\\circ}C}", 0.0),
    ("\\text{ABD}", "\\boxed{A, B, D}", 1.0),
    ("ABD", "\\boxed{DBA}", 1.0),
    ("ABD", "\\boxed{A, B}", 0.0),
    ("ABD", "\\boxed{ABCD}", 0.0),
    ("\\text{(B)}", "$\\boxed{\\text{B}}$", 1.0),
    ("\\text{(B)}", "$\\boxed{\\text{C}}$", 0.0),
    ("-1, 3", "\\boxed{m = -1 \\text{ or } m = 3}", 1.0),
    ("2n-1", "\\boxed{a_n = 2n - 1}", 1.0),
    ("2n-1", "\\boxed{a_n = 2n + 1}", 0.0),
]


KINDS = (
    REAL_STYLES,
    LABELLED,
    TYPESET,
    SENTENCES,
    GOLD_SOLUTIONS,
    MATRICES,
    RELATIONS,
    RATIOS,
    DECIMALS,
    SETS_TUPLES,
    MARKERS,
    CHAINS_JUNK,
    HEDGES,
    TOLERANCE,
)


@pytest.mark.parametrize("gold,completion,expected", [case for block in KINDS for case in block])
def test_kind(gold: str, completion: str, expected: float) -> None:
    s = MATH({"answer": gold}, completion)
    assert s.value == expected, f"gold={gold!r} completion={completion!r} -> {s.value} {s.status}: {s.info}"


def test_every_kind_has_positives_and_hard_negatives() -> None:
    for block in KINDS:
        assert {e for _, _, e in block} == {0.0, 1.0}


def test_lenient_mode_also_takes_the_last_number_but_strict_does_not() -> None:
    text = "We add 20 and 22 and get 42"
    assert LENIENT({"answer": "42"}, text).value == 1.0
    assert LENIENT({"answer": "41"}, text).value == 0.0
    assert MATH({"answer": "42"}, text).status == "no_answer"


def test_percent_optional_false_reads_percent_literally() -> None:
    fn = get_reward("math", percent_optional=False)
    assert fn({"answer": "0.12"}, "\\boxed{12\\%}").value == 1.0
    assert fn({"answer": "12"}, "\\boxed{12\\%}").value == 0.0


EXOTIC = [
    "\u2074",
    "\u2084",
    "\u2463",
    "4\u2074",
    "\u00b2\u00b2",
    "x\u2082",
    "\u0663",
    "\uff14",
    "\U0001d7d2",
    "\u2155",
    "\u00bc\u00bd",
    "\u2070\u00b9",
    "\u221a\u2074",
    "1\u2009000",
    "\u200b4",
    "4\u0301",
]


@pytest.mark.parametrize("weird", EXOTIC)
def test_exotic_digits_are_scored_never_raised(weird: str) -> None:  # 14
    s = MATH({"answer": "4"}, "\\boxed{" + weird + "}")
    assert s.status in ("ok", "parse_error", "no_answer") and s.value in (0.0, 1.0)
    g = MATH({"answer": weird}, "\\boxed{4}")
    assert g.status in ("ok", "parse_error", "gold_unparseable")


def test_superscript_digits_are_powers() -> None:
    assert MATH({"answer": "16"}, "\\boxed{2\u2074}").value == 1.0
    assert MATH({"answer": "24"}, "\\boxed{2\u2074}").value == 0.0
    circled = MATH({"answer": "4"}, "\\boxed{\u2463}")  # a numbered statement (see test_math_real_outputs), not 4
    assert circled.status in ("ok", "parse_error") and circled.value == 0.0


SLOW = [  # 15: each took seconds to minutes; every one is now a zero score (times: benchmarks/math_adversarial.py)
    ("1", "\\boxed{\\sqrt{10^{10000}+1}}", "ok"),  # a root of a 33000-bit integer: Huge, compared by source
    ("1", "\\boxed{\\sqrt{1000! \\cdot 999!}}", "ok"),
    ("1", "\\boxed{\\sqrt[3]{2000! + 1}}", "ok"),
    ("1", "\\boxed{" * 8000 + "1" + "}" * 7999, "parse_error"),  # the outermost closed box only
    ("1", "\\boxed{" * 8000, "no_answer"),
    ("2", "x" + " " * 3000, "ok"),
    ("2", "The answer is" + " " * 3000 + "x", "ok"),
    ("2", "1 is" + " " * 3000, "ok"),
    ("\\pi", "\\boxed{e^{(\\pi+2)^{\\pi}\\cdot 12345^{e+y^{0.5+y}}}}", "ok"),  # exp of ~1e200 at a point
]


@pytest.mark.parametrize("gold,completion,status", SLOW, ids=range(len(SLOW)))
def test_slow_inputs_get_a_zero_score(gold: str, completion: str, status: str) -> None:
    s = MATH({"answer": gold}, completion)
    assert (s.value, s.status) == (0.0, status), s.info


def test_lenient_equals_flood_is_scored() -> None:
    s = LENIENT({"answer": "1"}, "x =" + " " * 400 + "=")
    assert s.value == 0.0
