"""evals.metrics against closed forms (binomial pass@k) and hand-computed values."""

from __future__ import annotations

import itertools
import math
import random
from typing import TYPE_CHECKING, cast

import pytest

from evals.metrics import (
    majority_vote,
    mean_and_stderr,
    normalize_answer,
    pass_at_k,
    pass_at_k_all,
    prompt_metrics,
)
from harness.scoring import reward_summary
from harness.types import Score

if TYPE_CHECKING:
    from evals.result_types import EvalMetrics


def _closed_form(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 16, 50])
def test_pass_at_k_matches_binomial_closed_form(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_closed_form(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_the_probability_that_a_random_k_subset_has_a_success() -> None:
    # enumerate every k-subset of n=6 samples with c=2 successes: the exact probability
    n, c = 6, 2
    labels = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(range(n), k))
        frac = sum(any(labels[i] for i in s) for s in subsets) / len(subsets)
        assert pass_at_k(n, c, k) == pytest.approx(frac)


def test_pass_at_k_hand_values_and_bounds() -> None:
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_at_k(3, 1, 3) == 1.0  # n - c < k
    assert pass_at_k(200, 0, 100) == 0.0
    assert pass_at_k_all(3, 1) == pytest.approx({1: 1 / 3, 2: 2 / 3, 3: 1.0})
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_1_equals_success_fraction() -> None:
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(1, 30)
        c = rng.randint(0, n)
        assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_mean_and_stderr_hand_values() -> None:
    mean, se, m = mean_and_stderr([1.0, 0.0, 1.0, 0.0])
    assert (mean, m) == (0.5, 4)
    assert se == pytest.approx(math.sqrt((4 * 0.25 / 3) / 4))
    assert mean_and_stderr([]) == (None, None, 0)
    assert mean_and_stderr([None, 2.0]) == (2.0, None, 1)


def test_normalize_answer() -> None:
    assert normalize_answer(" 4.0 ") == normalize_answer("$4$") == normalize_answer("\\boxed{4}") == "4"
    assert normalize_answer("1,234,567") == "1234567"
    assert normalize_answer("0.50") == "0.5"
    assert normalize_answer("\\text{Paris}.") == "paris"
    assert normalize_answer("1/2") != normalize_answer("0.5")  # no equivalence decided here
    assert normalize_answer("   ") is None and normalize_answer(None) is None


def test_majority_vote_tie_goes_to_first_seen() -> None:
    assert majority_vote(["a", "b", "b", "a"]) == ("a", 2)
    assert majority_vote(["b", "a", "b", "a"]) == ("b", 2)
    assert majority_vote([None, "x", None]) == ("x", 1)
    assert majority_vote([None, None]) == (None, 0)


def _s(v: float | None, ans: str | None, status: str = "ok") -> Score:
    if v is None:
        return Score.unscored("error", "plugin crashed")
    return Score(value=v, answer=ans, status=status)  # type: ignore[arg-type]


def test_prompt_metrics_hand_example() -> None:
    groups = {
        # p1: 4 samples, 1 correct ("4"), majority "5" (wrong) -> maj@4 = 0, pass@1 = .25
        "p1": [_s(0, "5"), _s(1, "4"), _s(0, "5"), _s(0, "3")],
        # p2: all correct -> 1 everywhere
        "p2": [_s(1, "7"), _s(1, "7.0"), _s(1, "7"), _s(1, "$7$")],
        # p3: one unscored sample is left out: n = 3, c = 2; votes "9","9" win -> solved
        "p3": [_s(1, "9"), _s(None, None), _s(0, "8"), _s(1, "9")],
    }
    m = prompt_metrics(groups, k=4, threshold=1.0)
    assert m["prompts"] == 3
    assert m["avg@k"]["value"] == pytest.approx((0.25 + 1.0 + 2 / 3) / 3)
    assert m["pass@k"][1]["value"] == pytest.approx(m["avg@k"]["value"])
    assert m["pass@k"][2]["value"] == pytest.approx((0.5 + 1.0 + _closed_form(3, 2, 2)) / 3)
    # k=4: p3 has only 3 scored samples, so it is left out
    assert m["pass@k"][4]["prompts"] == 2
    assert m["pass@k"][4]["value"] == pytest.approx((1.0 + 1.0) / 2)
    assert m["maj@k"][4]["value"] == pytest.approx(0.5)  # p1 wrong, p2 right
    assert m["maj@k"][3]["value"] == pytest.approx(2 / 3)  # p1 "5" wins; p2 right; p3 "9" wins
    # maj@1 is the first scored sample's verdict: p1 0, p2 1, p3 1
    assert m["maj@k"][1]["value"] == pytest.approx(2 / 3)
    assert m["pass@k"][1]["stderr"] is not None


def test_prompt_metrics_threshold_and_no_votes() -> None:
    groups = {"a": [_s(0.5, None), _s(0.7, None)]}
    assert prompt_metrics(groups, k=2, threshold=0.6)["pass@k"][1]["value"] == pytest.approx(0.5)
    assert prompt_metrics(groups, k=2, threshold=0.6)["maj@k"][2]["value"] == 0.0  # nobody voted: unsolved
    assert prompt_metrics({"u": [_s(None, None)]}, k=1)["pass@k"][1]["value"] is None


def test_reward_summary_counts_statuses_and_excludes_unscored() -> None:
    scores = [_s(1, "a"), _s(0, None, "no_answer"), _s(None, None), Score(value=0.0, status="time_limit")]
    r = reward_summary(scores)
    assert r["mean"] == pytest.approx(1 / 3)
    assert (r["count"], r["scored"], r["unscored"]) == (4, 3, 1)
    assert r["statuses"] == {"error": 1, "no_answer": 1, "ok": 1, "time_limit": 1}


def test_an_evaluation_span_gets_the_headline_numbers_and_leaves_out_the_missing_ones() -> None:
    from evals.results import build_results, headline_metrics
    from harness.telemetry._attrs import flat_metrics
    from harness.types import RewardSpec

    records = [
        {
            "prompt_id": p,
            "sample_index": j,
            "scores": {"r": {"value": v, "status": "ok" if v is not None else "timeout"}},
            "total": v,
            "finish_reason": f,
        }
        for p, j, v, f in [
            ("a", 0, 1.0, "stop"),
            ("a", 1, 0.0, "length"),
            ("b", 0, None, "stop"),
            ("b", 1, None, "stop"),
        ]
    ]
    results = build_results(records, [RewardSpec(name="r")], k=2, success_reward="r", threshold=1.0)
    attrs = flat_metrics("harness.metric.", headline_metrics(results))
    assert attrs["harness.metric.pass@1"] == pytest.approx(0.5) and attrs["harness.metric.pass@2"] == 1.0
    assert attrs["harness.metric.total/mean"] == pytest.approx(0.5)
    assert attrs["harness.metric.completions/truncated_frac"] == pytest.approx(0.25)
    assert all(isinstance(v, float) for v in attrs.values())
    # results.json parts written by hand (the rest left out): a value not computed is None and left out of the span
    assert headline_metrics(cast("EvalMetrics", {"pass@k": {"1": {"value": None}}}))["pass@1"] is None
    partial = cast("EvalMetrics", {"pass@k": {"1": {}}})
    assert "harness.metric.pass@1" not in flat_metrics("harness.metric.", headline_metrics(partial))
