"""The ``repetition`` reward sees a loop however it is dressed up, and leaves honest reasoning alone.

Disguised loops (a counter, numbered lines, words joined by zero-width spaces, boxes repeated without spaces,
full-width text, a loop after an honest start) must score <= -0.5, as the plain loop does. The hard negatives are
realistic long solutions (``tests/data/honest_reasoning.jsonl``: GSM8K arithmetic, R1-style thinking with checks,
case analyses, enumerations of small cases, a traced loop, tables, probability, multiple choice, Chinese), which
repeat words, formulas and line shapes but not whole runs: they get no loop penalty at all (measured loop
coverage 0.00-0.11 against the 0.25 where the penalty starts), only the paper's n-gram penalty, unchanged.

Regression: before the loop penalty, the reward gave the first ten disguised loops below 0.0 to -0.69 (7 of 10
above -0.5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import get_reward
from rewards.loops import LOOP_FREE, loop_coverage, loop_tokens, ngram_repetition_fraction, words

HONEST = {
    r["id"]: r["text"]
    for r in map(json.loads, (Path(__file__).parents[1] / "data" / "honest_reasoning.jsonl").read_text().splitlines())
}
ZW = "\u200b"
_WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
PLAIN = "The answer is 5 so we are done. "

DISGUISED = {
    "counter": " ".join(f"{i} again" for i in range(150)),
    "numbered lines": "\n".join(f"Check {i}: 2 + 2 = 4, which is correct." for i in range(1, 61)),
    "zero-width joined words": ZW.join((PLAIN * 60).split()),
    "boxes without spaces": "\\boxed{5}" * 200,
    "counter inside words": " ".join(f"I will try again, attempt number {i}." for i in range(120)),
    "full-width text": "".join(f"第{i}次：答案是５。" for i in range(80)),
    "numbered values": "\n".join(f"{i}. The value is {3 * i}." for i in range(80)),
    "recomputing with a step counter": " ".join(f"Step {i}: wait, let me recompute that {i} times." for i in range(60)),
    "loop after an honest start": HONEST["gsm8k_eggs"]
    + "\n"
    + "\n".join(f"Check {i}: 9 * 2 = 18." for i in range(200)),
    "invisible separators between symbols": ("=" + "\u2060") * 400 + "5",
    "a counter in words": " ".join(f"Step {w}: check the sum again." for w in _WORDS * 3),
    "words run together": (PLAIN * 60).replace(" ", ""),
    "zero-width characters inside words": "".join(
        c + ("\u200c" if i % 3 == 0 else "") for i, c in enumerate(PLAIN * 60)
    ),
    "combining marks inside words": "".join(
        c + ("\u0301" if i % 4 == 0 and c.isalpha() else "") for i, c in enumerate(PLAIN * 60)
    ),
    "braille blanks for spaces": "\u2800".join((PLAIN * 60).split()),
}


@pytest.mark.parametrize("name", sorted(DISGUISED))
def test_a_disguised_loop_is_penalised_like_the_plain_one(name: str) -> None:
    s = get_reward("repetition")({}, DISGUISED[name])
    assert s.value is not None and s.value <= -0.5, (name, s.info)


def test_the_plain_loop_keeps_its_penalty() -> None:
    value = get_reward("repetition")({}, PLAIN * 60).value
    assert value is not None and value <= -0.98


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_reasoning_gets_no_loop_penalty(name: str) -> None:
    text = HONEST[name]
    s = get_reward("repetition")({}, text)
    assert s.info["loop_coverage"] < LOOP_FREE and s.info["penalty"] == "ngram", (name, s.info)
    paper = -1.0 * ngram_repetition_fraction(text.lower().split(), 3)  # the paper's value on plain whitespace words
    assert s.value == pytest.approx(paper, abs=0.02), (name, s.value, paper)
    assert s.value is not None and s.value > -0.25


def test_all_honest_texts_together_are_still_no_loop() -> None:
    """A long solution made of many honest parts (about 12.7k characters) is not a loop either."""
    long_text = "\n\n".join(HONEST.values())
    assert len(long_text) > 12_000
    assert loop_coverage(loop_tokens(long_text)) < LOOP_FREE


def test_loop_tokens_see_through_the_disguises() -> None:
    assert loop_tokens("Check 7: ok. Check 8: ok. Check 9: ok.")[-5:-1] == ["check", "+1", ":", "ok"]
    assert words(f"the{ZW}cat") == ["the", "cat"]
    assert loop_tokens("\\boxed{5}\\boxed{5}")[5:] == ["\\", "boxed", "{", "=", "}"]
    # a computation's changing results are not a counter: each row reads differently
    rows = loop_tokens("a_2 = 3, a_3 = 7, a_4 = 15, a_5 = 31")
    assert rows.count("+1") == 3 and len(set(rows[rows.index("a", 1) :])) > 5
