r"""One finder, one meaning: every reward that reads a final answer reads the one ``rewards.final_answer`` finds.

The adversarial set mixes the shapes where the rewards used to disagree (a box before a reopened ``<think>``,
``\boxed 5`` without braces, a box that is never closed, a box inside reasoning, several answer blocks, an
answer after another turn, boxes that show nothing) with plain positives. For each completion, ``math`` (gold
``5``), ``boxed_present``, ``think_answer_format`` and ``tag_count`` run through the public ``get_reward`` and
must agree with the finder: the answer each reports is the finder's, ``math`` finds no answer exactly when the
finder finds none, and ``boxed_present`` credits exactly the completions whose final answer is boxed.

Regression: before the finder was shared, ``\boxed{5}<think>\boxed{3}`` was ``no_answer`` for ``math`` and 1.0
with answer 3 for ``boxed_present``, and ``\boxed 5`` the other way round (10 of the first 25 rows below disagreed).
"""

from __future__ import annotations

import pytest

from harness import get_reward
from rewards.final_answer import extract_answer, reasoning_open

ADVERSARIAL = [
    "\\boxed{5}<think>\\boxed{3}",  # reasoning reopened and never closed: no answer yet
    "\\boxed 5",  # TeX's one-token argument
    "\\fbox{5}",
    "so \\boxed{5}.",
    "\\boxed{3} and then \\boxed{5",  # the last box is never closed: cut off
    "<think>\\boxed{3}</think>\\boxed{5}",  # only the box after the reasoning counts
    "<think>the answer is \\boxed{5}</think>",  # the only box is inside reasoning
    "<think>r</think><answer>\\boxed{5}</answer>",
    "<think>r</think><answer>5</answer>",
    "<think>r</think><answer>5</answer><answer>3</answer>",  # two blocks that disagree
    "<think>r<answer>5</answer>",  # the answer block inside reasoning never closed
    "<think>r</think><answer>5</answer><think>more",
    "\\boxed{\\phantom{5}}",  # a box that shows nothing
    "\\boxed{\u2800}",
    "\\boxed{\\color{white}5}",
    "\\boxed{5} or maybe \\boxed{3}",  # a hedge
    "\\boxed{5}. Or maybe 3.",
    "so \\boxed{3}. Wait, I made an error: \\boxed{5}",  # a revision: the last box
    "\\boxed{3}\nFinal Answer: The final answer is $5$.",  # a later unboxed final statement
    "The answer is \\boxed{5}.<|im_end|><|im_start|>user\nand \\boxed{3}?",  # another turn
    "The answer is 5.",
    "<answer>\u200b</answer>",
    "<think>\u3164</think><answer>5</answer>",
    "no answer here at all, just words about the problem",
    "\\boxedx{5}",  # another command, not a box
    "Thus \\boxed{5}. The answer is 5.",  # the statement restates the box
    "\\boxed{5}\\iffalse or \\boxed{3}\\fi",  # a box in source TeX skips is no hedge
    "\\boxed{5}<span hidden>\\boxed{3}</span>",  # nor one in an HTML element hidden by its own attributes
]


def _finder_answer(c: str) -> str | None:
    return extract_answer(c).answer


@pytest.mark.parametrize("completion", ADVERSARIAL)
def test_every_reward_reads_the_finders_final_answer(completion: str) -> None:
    found = extract_answer(completion)
    math = get_reward("math")({"answer": "5"}, completion)
    boxed = get_reward("boxed_present")({}, completion)
    tagged = get_reward("think_answer_format")({}, completion)
    counted = get_reward("tag_count")({}, completion)

    assert (math.status == "no_answer") == (found.answer is None), (math, found)
    if found.answer is not None:
        assert math.info["extracted"] in (found.answer, found.last), (math.info, found)
    assert (boxed.value == 1.0) == (found.answer is not None and found.source == "boxed"), (boxed, found)
    for s in (boxed, tagged, counted):
        assert s.answer is None or s.answer == found.answer, (s, found)
    if reasoning_open(completion):
        assert found.answer is None and tagged.value == 0.0 and counted.value is not None and counted.value < 1.0


def test_the_issue_examples_agree_across_rewards() -> None:
    math = get_reward("math")
    boxed = get_reward("boxed_present")
    reopened = "\\boxed{5}<think>\\boxed{3}"
    assert (math({"answer": "3"}, reopened).status, boxed({}, reopened).status) == ("no_answer", "no_answer")
    assert (math({"answer": "5"}, "\\boxed 5").value, boxed({}, "\\boxed 5").value) == (1.0, 1.0)
    assert boxed({}, "\\boxed 5").answer == "5"


@pytest.mark.parametrize(
    "completion, answer, source",
    [
        ("\\boxed{5}", "5", "boxed"),
        ("\\boxed  {5}", "5", "boxed"),
        ("$\\boxed 7$", "7", "boxed"),
        ("\\fbox{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"),
        ("\\boxed{\\{\\}}", "\\{\\}", "boxed"),  # the empty set is an answer a reader sees
        ("\\boxed{\\text{no}}", "\\text{no}", "boxed"),
        ("\\boxed{\\textcolor{red}{7}}", "\\textcolor{red}{7}", "boxed"),  # colored, but not white
        ("\\boxed{50\\%}", "50\\%", "boxed"),
        ("The answer is 5.", "5", "anchor"),
        ("Thus \\boxed{5}.\n\nFinal Answer: The final answer is $5$.", "5", "boxed"),  # restated: still boxed
        ("<think>n % 2 == 0 on this line</think><answer>\\boxed{2}</answer>", "2", "boxed"),  # a modulo, not a comment
        ("We use 5% of it.\n% note: the answer is 7\nThe answer is 3.", "3", "anchor"),  # the comment line is blanked
    ],
)
def test_hard_negatives_keep_their_answer(completion: str, answer: str, source: str) -> None:
    found = extract_answer(completion)
    assert (found.answer, found.source) == (answer, source)
    if source == "boxed":
        assert get_reward("boxed_present")({}, completion).value == 1.0


def test_boxed_present_commands_choose_the_boxes_the_finder_reads() -> None:
    only_boxed = get_reward("boxed_present", commands=["boxed"])
    assert only_boxed({}, "\\fbox{x}").status == "no_answer"
    assert only_boxed({}, "\\fbox{x} and \\boxed{y}").answer == "y"
    assert get_reward("boxed_present", commands=["framebox"])({}, "\\framebox{7}").answer == "7"


def test_custom_tags_are_read_by_the_same_finder() -> None:
    fn = get_reward("think_answer_format", think_tag="reasoning", answer_tag="final")
    s = fn({}, "<reasoning>r</reasoning><final>\\boxed{3}</final>")
    assert (s.value, s.answer) == (1.0, "3")
    assert (
        extract_answer("<reasoning>r</reasoning><final>\\boxed{3}</final>", tags=("reasoning", "final")).answer == "3"
    )
