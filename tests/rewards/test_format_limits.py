"""Format rewards stay fast on hostile inputs and stop at their own time limit, in-process.

Tag floods with 20,000 distinct names (quadratic before: 15-16 s for ``tag_count`` and ``format_regex`` on a loaded
2-core machine, now 0.2 s), deep brace and box nesting, phantom and white-text floods: each call is scored well
inside the default 2 s limit (measured 0.00-0.5 s per call on a loaded 2-core machine, 0.9 s for ``repetition`` on
2M random characters). With a tiny ``time_limit`` the same calls stop at their next check and return
``Score(None, "timeout")``: unscored, like the scoring path's kill, so an inline call never keeps burning CPU long
after its limit.
"""

from __future__ import annotations

import time

import pytest

from harness import get_reward
from harness.errors import RewardParameterError

INLINE = ["think_answer_format", "boxed_present", "tag_count", "repetition"]
HOSTILE = {
    "20k distinct tags": "".join(f"<t{i}>x</t{i}>" for i in range(20_000)),
    "20k open then close": "".join(f"<t{i}>" for i in range(20_000)) + "".join(f"</t{i}>" for i in range(20_000)),
    "nested boxes": "\\boxed{" * 50_000 + "5" + "}" * 50_000,
    "nested phantoms": "<think>" + "\\phantom{" * 50_000 + "}" * 50_000 + "</think><answer>5</answer>",
    "white floods": "<think>" + "{\\color{white} " * 50_000 + "}" * 50_000 + "</think><answer>5</answer>",
    "long reasoning": "<think>" + "a step of reasoning. " * 100_000 + "</think><answer>\\boxed{5}</answer>",
}


@pytest.mark.parametrize("name", INLINE)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_inputs_are_scored_within_the_default_limit(name: str, case: str) -> None:
    s = get_reward(name)({}, HOSTILE[case])
    assert s.status != "timeout" and s.value is not None, (name, case, s.info)


def test_many_tag_names_give_the_same_verdicts_as_few() -> None:
    flood = "".join(f"<t{i}>x</t{i}>" for i in range(20_000))
    fn = get_reward("format_regex", pattern=r".*", flags="s", max_chars=10**6)
    assert fn({}, flood).value == 1.0
    assert fn({}, flood + "<t1> </t1>").value == 0.0  # one empty block among 20,000 is found


@pytest.mark.parametrize("name", INLINE)
def test_a_call_past_its_own_time_limit_is_unscored(name: str) -> None:
    text = "<think>" + "\\phantom{x} \\relax a step " * 200_000 + "</think><answer>\\boxed{5}</answer>"
    fn = get_reward(name, time_limit=1e-6)
    t0 = time.perf_counter()
    s = fn({}, text)
    elapsed = time.perf_counter() - t0
    assert (s.value, s.status) == (None, "timeout") and "time limit" in s.info["reason"], (name, s)
    assert elapsed < 60  # generous: the point is that it returns (measured about 0.2 s), not how fast


@pytest.mark.parametrize("name", INLINE)
def test_time_limit_must_be_positive(name: str) -> None:
    with pytest.raises(RewardParameterError, match="time_limit"):
        get_reward(name, time_limit=0)
