"""The scoring session: validation at load, caching, streaming, bad samples, weighted totals."""

from __future__ import annotations

import pytest

from harness import RewardSpec, Score, ScoringSession, score_batch, weighted_total
from harness.errors import RewardParameterError, ScoringError, UnknownRewardError
from harness.scoring import WorkerPool


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(2, build_grace_s=2.0)
    yield p
    p.close()


def test_unknown_reward_fails_at_session_creation_listing_known_ones() -> None:
    with pytest.raises(UnknownRewardError, match="registered rewards: .*test_faulty"):
        ScoringSession([RewardSpec(name="no_such_reward")])


def test_unknown_parameter_fails_at_session_creation_listing_accepted_ones() -> None:
    with pytest.raises(RewardParameterError, match=r"'scael'.*accepted parameters: scale: float = 1.0"):
        ScoringSession([RewardSpec(name="test_faulty", params={"scael": 2})])


def test_mismatched_lengths_are_an_error(pool) -> None:
    with (
        ScoringSession(["test_faulty"], pool=pool) as s,
        pytest.raises(ScoringError, match="one sample per completion"),
    ):
        s.submit([{"id": "1"}], ["a", "b"])


def test_bad_sample_is_unscored_bad_input_and_the_rest_is_scored(pool) -> None:
    with ScoringSession(["test_faulty"], pool=pool, cache=False) as s:
        res = s.score([{"id": "1"}, {"prompt": 5}, "not a mapping", {"id": "4"}], ["a", "b", "c", "dd"])
    col = res.scores["test_faulty"]
    assert [c.status for c in col] == ["ok", "bad_input", "bad_input", "ok"]
    assert "sample 1: prompt" in col[1].info["reason"] and "sample 2" in col[2].info["reason"]
    assert col[3].value == 2.0


def test_non_string_completion_is_bad_input(pool) -> None:
    with ScoringSession(["test_faulty"], pool=pool, cache=False) as s:
        res = s.score([{"id": "1"}, {"id": "2"}], ["a", 42])  # type: ignore[list-item]
    assert res.scores["test_faulty"][1].status == "bad_input"
    assert "completion must be a string" in res.scores["test_faulty"][1].info["reason"]


def test_repeated_inputs_come_from_the_cache(pool) -> None:
    with ScoringSession(["test_counter"], pool=pool, cache=1000) as s:
        first = s.score([{"id": "1"}], ["same"])
        second = s.score([{"id": "other id, same inputs"}], ["same"])
        third = s.score([{"id": "1"}], ["different"])
    assert first.cached["test_counter"] == 0 and second.cached["test_counter"] == 1
    assert second.scores["test_counter"][0].info["t"] == first.scores["test_counter"][0].info["t"]
    assert third.cached["test_counter"] == 0


def test_cache_keys_include_parameters(pool) -> None:
    with ScoringSession([RewardSpec(name="test_faulty", params={"scale": 1.0})], pool=pool) as a:
        va = a.score([{"id": "1"}], ["abc"]).values("test_faulty")
    with ScoringSession([RewardSpec(name="test_faulty", params={"scale": 3.0})], pool=pool) as b:
        vb = b.score([{"id": "1"}], ["abc"]).values("test_faulty")
    assert va == [3.0] and vb == [9.0]


def test_failures_are_not_cached(pool) -> None:
    with ScoringSession(["test_faulty"], pool=pool, cache=100) as s:
        s.score([{"id": "1"}], ["raise"])
        again = s.score([{"id": "1"}], ["raise"])
    assert again.cached["test_faulty"] == 0 and again.scores["test_faulty"][0].status == "error"


def test_streaming_submit_returns_before_scores_and_collects_in_order(pool) -> None:
    # the "loop" call spins until the limit: 5 s (as long as the healthy calls' limits in test_faults.py and
    # more) keeps "x" and "y" well inside it and is all the test waits; 20 s was waited out in full
    with ScoringSession(["test_faulty"], pool=pool, cache=False, timeout=5.0) as s:
        slow = s.submit([{"id": str(i)} for i in range(3)], ["x", "loop", "y"])
        fast = s.submit([{"id": "a"}, {"id": "b"}], ["aaaa", "b"])
        assert fast.result().values("test_faulty") == [4.0, 1.0]
        res = slow.result()
    assert [sc.status for sc in res.scores["test_faulty"]] == ["ok", "timeout", "ok"]


def test_weighted_total_weight_zero_logs_only_and_all_unscored_is_none(pool) -> None:
    specs = [RewardSpec(name="test_faulty", weight=0.5), RewardSpec(name="test_counter", weight=0.0)]
    res = score_batch([{"id": "1"}, {"id": "2"}], ["abcd", "raise"], specs, cache=False)
    assert res.values("test_counter") == [4.0, 5.0]  # computed and reported
    assert res.totals == [2.0, None]  # 0.5 * 4; the weight-0 reward does not enter; all weighted unscored -> None
    assert weighted_total({"test_faulty": Score(value=1.0)}, specs) == 0.5


def test_specs_accept_names_and_dicts(pool) -> None:
    with ScoringSession(["test_counter", {"name": "test_faulty", "weight": 2}], pool=pool) as s:
        assert [sp.weight for sp in s.specs] == [1.0, 2.0]


def test_bad_parameter_value_fails_at_load_not_per_sample() -> None:
    with pytest.raises(RewardParameterError, match="format_regex.*does not compile"):
        ScoringSession([RewardSpec(name="format_regex", params={"pattern": "("})])


def test_factory_that_raises_fails_at_load_naming_the_reward() -> None:
    with pytest.raises(RewardParameterError, match="test_faulty.*rejected its parameters.*scale must be positive"):
        ScoringSession([RewardSpec(name="test_faulty", params={"scale": -1.0})])


def test_first_call_in_a_worker_gets_a_build_grace_then_the_plain_limit() -> None:
    pool = WorkerPool(1, build_grace_s=30.0)
    try:
        with ScoringSession(["test_faulty"], pool=pool, cache=False, timeout=1.0) as s:
            res = s.score([{"id": "1"}, {"id": "2"}], ["ok", "sleep"])
        assert [x.status for x in res.scores["test_faulty"]] == ["ok", "timeout"]
    finally:
        pool.close()


def test_duplicate_spec_names_are_rejected() -> None:
    with pytest.raises(ScoringError, match="unique"):
        ScoringSession(["test_counter", "test_counter"])
