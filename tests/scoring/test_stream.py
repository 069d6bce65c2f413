"""Score while generating: each part's scoring is submitted as soon as it is generated, scores stay with their
part, and a part already generated is kept when generating the next one fails. Real sessions and real rewards
(``test_counter`` runs in worker processes, ``char_count`` inline)."""

from __future__ import annotations

import pytest

from harness.scoring import BatchResult, ScoringSession, Submitted, score_while_generating


def _generate(events: list[str], fail_on: int | None = None):
    def generate(part: list[int]) -> tuple[str, list[dict], list[str]]:
        if part[0] == fail_on:
            raise RuntimeError(f"generation of part {part} failed")
        events.append(f"generated {part[0]}")
        texts = ["a" * n for n in part]
        return f"part {part[0]}", [{"id": str(n)} for n in part], texts

    return generate


def test_without_a_consumer_nothing_is_awaited_and_scores_stay_with_their_part():
    events: list[str] = []
    timing: dict[str, float] = {}
    with ScoringSession(["test_counter"], cache=False, timeout=60) as s:
        done = score_while_generating(s, [[1, 2], [3], [4, 5]], _generate(events), timing=timing)
        assert [d.generated for d in done] == ["part 1", "part 3", "part 4"]
        values = [d.pending.result(timeout=60).values("test_counter") for d in done]
    assert values == [[1.0, 2.0], [3.0], [4.0, 5.0]]  # value = len(completion) = the part's numbers
    assert set(timing) == {"generate_s", "score_submit_s", "score_wait_s"} and timing["score_wait_s"] == 0.0


def test_a_consumer_gets_each_part_in_order_one_part_after_it_was_submitted():
    events: list[str] = []

    def scored(sub: Submitted[list[int], str], result: BatchResult) -> None:
        events.append(f"scored {sub.part[0]}: {result.values('char_count')}")

    with ScoringSession([{"name": "char_count", "params": {"char": "a"}}], cache=False) as s:
        done = score_while_generating(s, [[1], [2, 3], [4]], _generate(events), on_scored=scored)
    assert len(done) == 3 and all(d.pending.done() for d in done)
    assert events == [
        "generated 1",
        "generated 2",
        "scored 1: [1.0]",  # part 1 was scored while part 2 was generated
        "generated 4",
        "scored 2: [2.0, 3.0]",
        "scored 4: [4.0]",
    ]


def test_a_part_already_generated_is_handed_over_before_a_generation_error_propagates():
    events: list[str] = []

    def scored(sub: Submitted[list[int], str], result: BatchResult) -> None:
        events.append(f"scored {sub.part[0]}")

    with (
        ScoringSession([{"name": "char_count", "params": {"char": "a"}}], cache=False) as s,
        pytest.raises(RuntimeError, match="part \\[3\\] failed"),
    ):
        score_while_generating(s, [[1], [2], [3], [4]], _generate(events, fail_on=3), on_scored=scored)
    assert events == ["generated 1", "generated 2", "scored 1", "scored 2"]  # part 4 never started
