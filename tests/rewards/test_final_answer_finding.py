r"""Finding the final answer in the shapes lenient graders read and we used to miss, each rule beside its hard
negatives: the same shape where a reader sees no committed answer (a hedge, a negation, a question, a step, two
candidate values) must still find none, or a value that is not the gold.

The math reward trains a policy, so a false positive (crediting a hedged or wrong answer) is far worse than a
false negative: every positive row below has negatives of the same shape.
"""

from __future__ import annotations

import pytest

from rewards.final_answer import extract_answer
from rewards.math import verify

# (gold, completion, credited)
ROWS = [
    # "Answer" alone opening a line, then one math block that is all the line says.
    ("9", "Answer $9$", True),
    ("9", "Work.\n\nAnswer \\[ 9 \\]", True),
    ("9", "Answer $$\n9\n$$", True),  # display math may span lines
    ("10", "Answer \\( (9+1) \\)", True),
    ("9", "Answer $\n9\n$", False),  # inline math stays on its line
    ("9", "Answer $9$ is wrong.", False),
    ("9", "Answer $9$ or $10$", False),
    ("9", "Answer $9$?", False),
    ("9", "The answer $9$ we found in step 1 does not fit.", False),
    ("9", "Answer $9$. Or maybe 10.", False),
    # A completion that is one math block, maybe after a short label.
    (
        "\\begin{pmatrix}0 & 0\\\\0 & 0\\end{pmatrix}",
        "Here is a zero matrix: $\\begin{pmatrix}0&0\\\\0&0\\end{pmatrix}$",
        True,
    ),
    ("[-2,-1] \\cup [1,2]", "$z \\in [-2, -1] \\cup [1, 2]$", True),
    ("\\text{a regular hexagon}", "$$\\text{a regular hexagon}$$", True),
    ("5", "Maybe: $5$", False),
    ("5", "Step 1: $5$", False),
    ("5", "Given: $5$", False),
    ("5", "Previous answer (an error): $5$", False),
    ("5", "Not the answer: $5$", False),
    ("5", "Candidates: $5$ and $6$", False),
    ("5", "$\\text{maybe } 5$", False),
    ("5", "$5$?", False),
    # A capitalized concluding word starts a sentence, even after a value with no period before it.
    ("2/3", "P(A) = (1/2) * (4/3) P(A) = 2/3 Therefore, the probability that Alice wins is 2/3.", True),
    ("(7,6)", "$y = 8.8 - 2.8 = 6$ So, the ordered pair that solves the system is $(7, 6)$.", True),
    ("7", "we get x = 2 So is it 7?", False),
    ("7", "we get x = 2 So the answer might be 7.", False),
    ("7", "we get x = 7 Thus far we know 7 is wrong.", False),
    # A prose final statement with one number states that number.
    ("3", "Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", True),
    ("3", "Final Answer: Jane started growing Sphere 3 million hours ago.", False),
    ("3", "Final Answer: the temperature is 3 degrees below zero.", False),
    ("3", "Final Answer: Jane started 3 or 4 hours ago.", False),
    ("3", "Final Answer: Jane did not start 3 hours ago.", False),
    ("3", "Final Answer: Jane started 3 hours before Rod's 8 hours.", False),
    ("3", "Final Answer: at least 3 hours have passed.", False),
    ("3", "Final Answer: Jane started about 3 hours ago.", False),
    # Quotation marks around a stated answer are not part of it.
    ("12 \\text{ and } 13", 'Final Answer: The final answer is "$12$ and $13$".', True),
    ("5", 'Final Answer: The final answer is "5 or 6".', False),
    # A negated anchor anchors nothing; a negation in an earlier sentence does not touch it.
    ("7", "Note that 5 is not prime. Final answer: 7", True),
    ("7", "This is not the final answer: 7", False),
    ("5", "Possible answer: $5$", False),
    ("5", "One candidate answer: 5", False),
    # A retraction right after the answer takes it back.
    ("9", "The answer is 9.\nWait, that is wrong.", False),
    ("9", "Answer: 9\nNo wait, it is 10.", False),
    ("9", "Answer $9$\nHmm, let me recheck.", False),
    ("9", "\\boxed{9}. Wait, I made a mistake.", False),
    ("9", "The answer is 9. No further work is needed.", True),
    # "not A, it's B": the value put in place of the denied one.
    ("1000.99", "the number is not 10 which is 1,000.99€", True),
    ("12", "It's not 10, it's 12 hours.", True),
    ("10", "the answer is not 10", False),
    ("10", "the number is not 10 which is 2+8", False),
    ("12", "It's not 10, it's 12 or 13.", False),
    ("12", "Maybe it's not 10, it's 12.", False),
    ("12", "Is it not 10, which is 12?", False),
    ("2", "The sum is not 10, which is 2 more than 8.", False),
    ("12", "It's not 10, it's 12x.", False),
    ("10", "the number is not 10 which is 10", False),
]


@pytest.mark.parametrize(("gold", "completion", "credited"), ROWS)
def test_found_answers_and_their_hard_negatives(gold: str, completion: str, credited: bool) -> None:
    score = verify(gold, completion)
    assert (score.value == 1.0) is credited, (completion, score.status, score.info)


@pytest.mark.parametrize(
    "completion",
    [
        "Answer $9$ is wrong.",
        "Maybe: $5$",
        "Step 1: $5$",
        "the answer is not 10 which is 10",
        "It's not 10, it's 12 or 13.",
    ],
)
def test_hedged_shapes_commit_to_no_value_the_gold_could_match(completion: str) -> None:
    found = extract_answer(completion)
    assert found.answer is None or not found.answer.strip().isdigit(), found


def test_membership_in_a_union_is_the_union() -> None:
    assert verify("1 \\le |z| \\le 2", "$z \\in [-2, -1] \\cup [1, 2]$").value == 1.0
    assert verify("1 \\le |z| \\le 2", "$z \\in [-2, -1] \\cup [1, 3]$").value == 0.0
    assert verify("1 \\le |z| \\le 2", "$z \\in [1, 2]$").value == 0.0
