r"""Answer shapes from real model outputs (MATH, NuminaMath, OpenThoughts, Minerva, GSM8K styles) that a second
pass found misjudged, each positive next to its hard negatives.

Every case is (gold, completion, expected value) through the public ``get_reward("math")`` in its default (strict)
mode. Regression check: 90 of these 195 cases failed on the reward before these rules (assignments matched as
sets, angle labels, nested boxes, ``\tan^{-1}``, ``°C``, ``k \in \mathbb{Z}``, five sentence shapes,
approximations, numbered statements, invisible commands, named quantities, option golds, boxed steps,
one-value concluding sentences, style commands, <answer> blocks, ordinals, separators
with spaces, final statements after boxes).
"""

from __future__ import annotations

import pytest

from harness import get_reward

MATH = get_reward("math")
OT = (
    "<|begin_of_thought|>\n\nLet me think... maybe 7? No.\n\n<|end_of_thought|>\n\n<|begin_of_solution|>\n\n"
    "{}\n\n<|end_of_solution|>"
)

ASSIGNMENTS = [  # two lists of assignments compare variable by variable, not as the unordered set of values
    ("a=1, b=2", "\\boxed{b=2, a=1}", 1.0),
    ("a=1, b=2", "\\boxed{a = 1 \\text{ and } b = 2}", 1.0),
    ("a=1, b=2", "\\boxed{a=2, b=1}", 0.0),  # was 1.0: {1, 2} = {2, 1}
    ("a=1, b=2", "\\boxed{x=1, y=2}", 0.0),  # other variables, as x = 5 is not y = 5
    ("x=1, x=2", "\\boxed{x=2, x=1}", 1.0),  # the roots of one variable stay an unordered list
    ("x=1, y=2; x=3, y=4", "\\boxed{x=3, y=4; x=1, y=2}", 1.0),
]

ANGLES = [  # an angle's name is a label: \angle BAC = 90° states 90°
    ("90^\\circ", OT.format("Therefore, \\(\\boxed{\\angle BAC = 90^\\circ}\\).")),
    ("90", "Therefore, \\(\\boxed{m\\angle BAC = 90^\\circ}\\)."),
    ("90", "Hence \\boxed{\\measuredangle ABC = 90}"),
]
ANGLE_NEGATIVES = [
    ("90", "Therefore, \\(\\boxed{\\angle BAC = 60^\\circ}\\)."),
    ("90", "Therefore, \\(\\boxed{\\angle BAC + \\angle ABC = 90}\\)."),  # an equation, not a labelled value
]

NOTATION = [  # nested boxes, inverse trig written as a power, a degree Celsius unit, an integer parameter
    ("7", "\\boxed{\\boxed{7}}", 1.0),
    ("7", "\\boxed{\\boxed{8}}", 0.0),
    ("3", "\\boxed{\\boxed{1}+\\boxed{2}}", 0.0),  # not one box around the whole answer: unreadable
    ("\\arctan 2", "\\boxed{\\tan^{-1} 2}", 1.0),
    ("\\arctan 2", "\\boxed{\\tan^{-1} 3}", 0.0),
    ("\\frac{1}{\\tan 2}", "\\boxed{\\tan^{-1} 2}", 0.0),  # the inverse function, not the reciprocal
    ("\\frac{1}{\\sin^{2} 2}", "\\boxed{(\\sin 2)^{-2}}", 1.0),
    ("75", "\\boxed{75^{\\circ}\\text{C}}", 1.0),
    ("75", "\\boxed{76^{\\circ}\\text{C}}", 0.0),
    ("\\frac{\\pi}{6}+2k\\pi", "\\boxed{2k\\pi + \\frac{\\pi}{6}, k\\in\\mathbb{Z}}", 1.0),
    ("k\\pi + \\frac{\\pi}{3}", "\\boxed{k\\pi+\\frac{\\pi}{3} \\ (k\\in \\mathbb{Z})}", 1.0),
    ("k\\pi + \\frac{\\pi}{3}", "\\boxed{2k\\pi+\\frac{\\pi}{3} \\ (k\\in \\mathbb{Z})}", 0.0),
    (
        "\\left[k\\pi - \\frac{\\pi}{3}, k\\pi + \\frac{\\pi}{6}\\right]",
        "\\boxed{\\left[k\\pi-\\frac{\\pi}{3}, k\\pi+\\frac{\\pi}{6}\\right], k \\in \\mathbb{Z}}",
        1.0,
    ),
    (
        "\\left[k\\pi - \\frac{\\pi}{3}, k\\pi + \\frac{\\pi}{6}\\right]",
        "\\boxed{\\left[k\\pi-\\frac{\\pi}{6}, k\\pi+\\frac{\\pi}{3}\\right], k \\in \\mathbb{Z}}",
        0.0,
    ),
    ("\\frac{\\pi}{6}", "\\boxed{\\frac{\\pi}{6}, k \\in \\mathbb{Z}}", 1.0),
    ("\\frac{\\pi}{6}", "\\boxed{\\frac{\\pi}{6} + 2k\\pi, k \\in \\mathbb{Z}}", 0.0),  # a family, not one value
]

SENTENCES = [  # final sentences real models write without a box
    ("D", "Checking each option in turn.\nThus option $D$ is correct.", 1.0),
    ("D", "Checking each option in turn.\nThus option $C$ is correct.", 0.0),
    ("2", "Both roots are checked.\nTherefore, $x = 2$ is the only solution.", 1.0),
    ("2", "Both roots are checked.\nTherefore, $x = 3$ is the only solution.", 0.0),
    ("2", "Both roots are checked.\nTherefore, $x = 2$ is the only one I am sure of.", 0.0),
    ("m = 2", "Substituting back gives the slope.\nThus $m = 2$.", 1.0),
    ("m = 2", "Substituting back gives the slope.\nThus $m = -2$.", 0.0),
    ("12", "Multiplying the two counts.\nSo $3 \\cdot 4 = 12$.", 1.0),
    ("12", "Multiplying the two counts.\nSo $3 \\cdot 4 = 13$.", 0.0),  # a false chain states nothing
    ("12", "Multiplying the two counts.\nSo $x = 12$ or $x = 13$.", 0.0),
    ("2", "The answer is 2 (since the other root is negative).", 1.0),
    ("2", "The answer is 3 (since the other root is negative).", 0.0),
    ("2", "The answer is 2 (or 3).", 0.0),  # an alternative in parentheses is a hedge, not a remark
    ("3", "The answer is 2 (or 3).", 0.0),
    ("2", "The answer is 2 (rounded, or maybe 3).", 0.0),
    ("2", "The answer is 2 (mod 5).", 0.0),  # not a remark word: part of the answer
    ("8\\pi", "The radius is 2, so\nThe area is $8\\pi$ square centimeters.", 1.0),
    ("8\\pi", "The radius is 2, so\nThe area is $8\\pi$ less than the square.", 0.0),  # not a unit
    ("8\\pi", "The radius is 2, so\nThe area is $8\\pi$ or more.", 0.0),
    ("4", "The answer is $\\boxed{4}$, or equivalently $\\frac{8}{2}$.", 1.0),  # a restatement, not a hedge
    ("4", "The answer is $\\boxed{4}$, or $\\frac{10}{2}$.", 0.0),
]

APPROXIMATIONS = [  # "A \approx d" states A when d is A rounded or truncated to its digits, else nothing
    ("\\frac{1}{3}", "\\boxed{\\frac{1}{3}\\approx 0.333}", 1.0),
    ("\\frac{2}{3}", "The probability is $\\frac{2}{3} \\approx 0.667$.", 1.0),
    ("\\frac{2}{3}", "\\boxed{\\frac{2}{3}\\approx 0.666}", 1.0),  # truncated
    ("\\frac{2}{3}", "\\boxed{\\frac{2}{3}\\approx 0.665}", 0.0),
    ("\\frac{1}{3}", "\\boxed{\\frac{1}{3}\\approx 0.5}", 0.0),  # a false approximation states nothing
    ("0.5", "\\boxed{\\frac{1}{3}\\approx 0.5}", 0.0),
    ("\\sqrt{2}", "\\boxed{\\sqrt{2}\\approx 1.414}", 1.0),
    ("\\sqrt{2}", "\\boxed{\\sqrt{2}\\approx 1.42}", 0.0),  # neither rounded nor truncated
    ("\\sqrt{3}", "\\boxed{\\sqrt{2}\\approx 1.414}", 0.0),
]

STATEMENTS = [  # NuminaMath golds of numbered statements: the set of their numbers (in any order)
    ("①③", "So the correct statements are $\\boxed{①③}$.", 1.0),
    ("①③", "\\boxed{③①}", 1.0),
    ("①③", "\\boxed{①, ③}", 1.0),
    ("①③", "\\boxed{①②}", 0.0),
    ("①③", "\\boxed{①}", 0.0),
    ("①③", "\\boxed{①②③}", 0.0),
    ("②", "The answer is ②.", 1.0),
    ("4", "\\boxed{④}", 0.0),  # a statement's number is not the number
]

TYPESETTING = [  # invisible and decorative commands, vectors in angle brackets, a named inverse function
    ("10", "\\boxed{\\phantom{1}10}", 1.0),
    ("10", "\\boxed{\\color{red}{10}}", 1.0),
    ("10", "\\boxed{\\textcolor{blue}{10}}", 1.0),
    ("10", "\\boxed{\\color{red}{11}}", 0.0),
    ("10", "\\boxed{\\phantom{1}11}", 0.0),
    ("(1,-2,3)", "\\boxed{\\langle 1,-2,3\\rangle}", 1.0),
    ("\\begin{pmatrix} 1 \\\\ -2 \\\\ 3 \\end{pmatrix}", "\\boxed{\\langle 1,-2,3\\rangle}", 1.0),
    ("(1,-2,3)", "\\boxed{\\langle 1,2,3\\rangle}", 0.0),
    ("f^{-1}(x) = \\frac{x-3}{2}", "\\boxed{\\frac{x-3}{2}}", 1.0),
    ("\\frac{x-3}{2}", "\\boxed{f^{-1}(x)=\\frac{x-3}{2}}", 1.0),
    ("\\frac{x-3}{2}", "\\boxed{f^{-1}(x)=\\frac{x+3}{2}}", 0.0),
]

NAMED = [  # e = value names a quantity (an eccentricity); x = y = z = 1 gives every variable the value
    ("\\frac{\\sqrt{5}}{5}", "So the eccentricity is $\\boxed{e=\\frac{\\sqrt5}{5}}$.", 1.0),
    ("\\frac{\\sqrt{5}}{5}", "So the eccentricity is $\\boxed{e=\\frac{\\sqrt5}{2}}$.", 0.0),
    ("e", "\\boxed{x=e}", 1.0),
    ("e", "\\boxed{e=2.718}", 0.0),  # Euler's number is not its rounding
    ("1", "\\boxed{x=y=z=1}", 1.0),
    ("2", "\\boxed{x=y=z=1}", 0.0),
    ("1", "\\boxed{3=x=1}", 0.0),
]

GOLDS = [  # NuminaMath "C: value" golds, AMC "(B) value" golds, a one-line gold sentence
    ("C: \\frac{1}{2}", "\\boxed{C}", 1.0),
    ("C: \\frac{1}{2}", "\\boxed{\\frac{1}{2}}", 1.0),  # the option's content
    ("C: \\frac{1}{2}", "\\boxed{B}", 0.0),
    ("C: \\frac{1}{2}", "\\boxed{\\frac{1}{3}}", 0.0),
    ("\\textbf{(B) } 12", "\\boxed{12}", 1.0),
    ("\\textbf{(B) } 12", "\\boxed{13}", 0.0),
    ("\\textbf{(B) } 12", "\\boxed{\\textbf{(C) } 12}", 0.0),  # the letter decides when one is given
    ("The answer is 4.", "\\boxed{4}", 1.0),
    ("The answer is 4.", "\\boxed{5}", 0.0),
    ("We find $m=\\boxed{-1}$ or $m = 3$ (rejected).", "\\boxed{-1}", 1.0),  # a gold's own words never hedge it
    ("We find $m=\\boxed{-1}$ or $m = 3$ (rejected).", "\\boxed{3}", 0.0),
]

STEPS = [  # boxed intermediate results in separate sentences: a single-valued gold takes the last box
    ("5", "Step 1: The first part gives $\\boxed{3}$.\nStep 2: Adding 2 more, the total is $\\boxed{5}$.", 1.0),
    ("5", "First, $a = \\boxed{3}$. Then $b = \\boxed{2}$. So $a + b = \\boxed{5}$.", 1.0),
    ("3", "Step 1: The first part gives $\\boxed{3}$.\nStep 2: Adding 2 more, the total is $\\boxed{5}$.", 0.0),
    ("3, 5", "Part (a): \\boxed{3}\nPart (b): \\boxed{5}", 1.0),  # a multi-valued gold takes the list
    ("5", "Part (a): \\boxed{3}\nPart (b): \\boxed{5}", 0.0),  # parts are answers, not steps
    ("5", "\\boxed{3}\n\\boxed{5}", 0.0),  # no prose between: a list of boxes
    ("5", "\\boxed{3} or \\boxed{5}", 0.0),
    ("5", "We get \\boxed{3}. Alternatively, it could be \\boxed{5}.", 0.0),
    ("5", "We get \\boxed{3}. But if the order matters, \\boxed{5}.", 0.0),
    ("5", "In case (i) the count is \\boxed{3}. In case (ii) it is \\boxed{5}.", 0.0),
    ("5", "Option 1: \\boxed{3}. Option 2: \\boxed{5}.", 0.0),
    ("5", "One candidate is \\boxed{3}. Another is \\boxed{5}.", 0.0),
    ("5", "The roots are \\boxed{3}. And \\boxed{5}.", 0.0),
]

ONE_VALUE = [  # a concluding final sentence with exactly one value (rewards.math.sentences)
    ("10", "Counting the cases.\nThus, there are 10 ways to do it.", 1.0),
    ("10", "Counting the cases.\nThus, there are 11 ways to do it.", 0.0),
    ("10", "Solving the equation.\nHence, x = 10.", 1.0),
    ("10", "Solving the equation.\nWe obtain $x = 10$.", 1.0),
    ("10", "Solving the equation.\nThis gives $x = 10$.", 1.0),
    ("10", "Solving the equation.\n$\\therefore x = 10$", 1.0),
    ("10", "Solving the equation.\n∴ x = 10", 1.0),
    ("10", "Solving the equation.\nThe value of $x$ is 10.", 1.0),
    ("18", "She sells 9 eggs at $2 each.\nSo Janet makes $\\$18$ every day at the market.", 1.0),
    ("18", "She sells 9 eggs at $2 each.\nSo Janet makes $\\$19$ every day at the market.", 0.0),
    ("18", "She makes 9 * 2 = 18 dollars.\n\nTherefore, Janet makes $18 every day.", 0.0),  # plain, no "is"
    ("7", "Checking both.\nSo the answer is 7, not 8.", 0.0),
    ("7", "Checking both.\nThus, there are at least 7 ways.", 0.0),
    ("7", "Checking both.\nThus, there are more than 7 ways.", 0.0),
    ("7", "Checking both.\nSo 7 is wrong.", 0.0),
    ("7", "Checking both.\nTherefore, $x = 7$ is extraneous.", 0.0),
    ("7", "Checking both.\nHence x = 7 if n is even.", 0.0),
    ("7", "Checking both.\nWe get $7$ and $8$.", 0.0),
    ("7", "Checking both.\nSo is it 7?", 0.0),
    ("7", "Checking both.\nThe value is 7-ish.", 0.0),
    ("7", "Checking both.\nThus the total is $7$ apples and $8$ pears.", 0.0),  # two values
    ("5", "# Answer\n\n5", 1.0),  # the PRM800K answer heading
    ("5", "# Answer\n\n6", 0.0),
    ("5", "# Answer\n\n5 or 6", 0.0),
]

STYLES = [  # font, size and underline commands, invisible delimiters, empty exponents; "all real numbers"
    ("5", "\\boxed{\\bf 5}", 1.0),
    ("5", "\\boxed{\\large 5}", 1.0),
    ("5", "\\boxed{\\underline{5}}", 1.0),
    ("5", "\\boxed{\\left. 5 \\right.}", 1.0),
    ("5", "\\boxed{5^{}}", 1.0),
    ("5", "\\boxed{5\\ }", 1.0),
    ("5", "\\boxed{\\bf 6}", 0.0),
    ("5", "\\boxed{\\underline{6}}", 0.0),
    ("5", "\\boxed{5^{2}}", 0.0),
    ("\\text{all real numbers}", "\\boxed{(-\\infty, \\infty)}", 1.0),
    ("\\text{all real numbers}", "\\boxed{\\mathbb{R}}", 1.0),
    ("\\text{all real numbers}", "\\boxed{(0, \\infty)}", 0.0),
    ("(-\\infty, \\infty)", "\\boxed{\\text{all real numbers}}", 1.0),
]

ANSWER_TAGS = [  # the R1 format: the answer is inside the last <answer> block; other chat templates end the turn
    ("7", "<think>calc</think><answer>7</answer>", 1.0),
    ("7", "<think>calc</think>\n<answer>\n7\n</answer>", 1.0),
    ("7", "<think>calc</think><answer>The answer is 7.</answer>", 1.0),
    ("7", "<think>calc</think><answer>\\boxed{7}</answer>", 1.0),
    ("7", "<think>calc</think><answer>8</answer>", 0.0),
    ("7", "<answer>7</answer><answer>8</answer>", 0.0),  # two different blocks: a hedge
    ("8", "<answer>7</answer><answer>8</answer>", 0.0),
    ("7", "<answer>7</answer> or maybe 8", 0.0),  # a value after the block
    ("8", "<answer>7</answer>\n\\boxed{8}", 0.0),
    ("7", "<answer></answer>", 0.0),
    ("7", "<think><answer>7</answer></think><answer>8</answer>", 0.0),  # the block in the reasoning does not count
    ("3", "<start_of_turn>model\nIt is $\\boxed{3}$.<end_of_turn>\n<start_of_turn>user\n\\boxed{1}", 1.0),
    ("1", "<start_of_turn>model\nIt is $\\boxed{3}$.<end_of_turn>\n<start_of_turn>user\n\\boxed{1}", 0.0),
]

WORDS = [  # an ordinal suffix is dropped; a number word is not a number (as "The answer is five." is not 5)
    ("8", "\\boxed{\\text{eight}}", 0.0),
    ("8", "\\boxed{8\\text{th}}", 1.0),
    ("8", "\\boxed{\\text{nine}}", 0.0),
    ("8", "\\boxed{\\text{eight or nine}}", 0.0),
    ("8", "\\boxed{8th or 9th}", 0.0),
    ("1", "\\boxed{\\text{no one}}", 0.0),
]

STEP_THEN_FINAL = (
    "$0.05 \\cdot 10,200 \\cdot \\frac{1}{2} = \\boxed{255}$ So she has $10,455. "
    "Final Answer: The final answer is $10,455$. I hope it is correct."
)
MINERVA = [  # typeset separators as real outputs write them; a final statement after intermediate boxes
    ("11111111100", "The count is $\\boxed{11,\\! 111,\\! 111,\\! 100}$.", 1.0),
    ("32349", "So $\\boxed{32,\\! 349}$.", 1.0),
    ("14916", "Final Answer: The final answer is $14 {, }916$. I hope it is correct.", 1.0),
    ("32349", "So $\\boxed{32,\\! 348}$.", 0.0),
    ("(2, 12) \\cup (12, 102)", "Thus $x \\in \\boxed{(2,12) \\cup (12,102)}$", 1.0),  # (12,102) is not 12102
    ("(12, 102)", "\\boxed{(12,102)}", 1.0),
    ("12102", "\\boxed{(12,102)}", 0.0),
    ("12102", "\\boxed{12,102}", 1.0),
    ("28\\%", "\\boxed{28 pct}", 1.0),
    ("10455", STEP_THEN_FINAL, 1.0),
    ("255", STEP_THEN_FINAL, 0.0),
    ("8", "\\boxed{7}\n\nFinal Answer: 8", 1.0),  # the last statement is final
    ("7", "\\boxed{7}\n\nFinal Answer: 8", 0.0),
    ("7", "So it is $\\boxed{7}$.\n\nNote: if the die were biased the answer would be different.", 1.0),
    ("7", "So it is $\\boxed{7}$.\n\nIn general the answer is not unique.", 1.0),
    ("120", "Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", 1.0),
    ("34", "Final Answer: The largest $n$ is 34.", 1.0),
    ("34", "Final Answer: The largest $n$ is 35.", 0.0),
    ("120", "Final Answer: The volume of $ABCDEFGH$ is 120 or 121.", 0.0),
]

CASES = (
    ASSIGNMENTS
    + NOTATION
    + SENTENCES
    + APPROXIMATIONS
    + STATEMENTS
    + TYPESETTING
    + NAMED
    + GOLDS
    + STEPS
    + ONE_VALUE
    + STYLES
    + ANSWER_TAGS
    + WORDS
    + MINERVA
)


@pytest.mark.parametrize("gold,completion,expected", CASES)
def test_real_output(gold: str, completion: str, expected: float) -> None:
    s = MATH({"answer": gold}, completion)
    assert s.status in ("ok", "parse_error", "no_answer"), s
    assert s.value == expected, (gold, completion, s.info)


@pytest.mark.parametrize("gold,completion", ANGLES)
def test_angle_name_is_a_label(gold: str, completion: str) -> None:
    assert MATH({"answer": gold}, completion).value == 1.0


@pytest.mark.parametrize("gold,completion", ANGLE_NEGATIVES)
def test_angle_near_misses(gold: str, completion: str) -> None:
    assert MATH({"answer": gold}, completion).value == 0.0
