"""Agreement statistics against hand-computed values: observed agreement, Cohen's kappa, the confusion table."""

from __future__ import annotations

import doctest

import pytest

from evals import agreement as agreement_module
from evals.agreement import agreement, agreement_report, cohens_kappa, confusion_table, format_agreement, to_labels


def test_kappa_matches_the_textbook_example() -> None:
    # 50 items: 20 both yes, 5 a-yes/b-no, 10 a-no/b-yes, 15 both no: p_o = .7, p_e = .5*.6 + .5*.4 = .5, k = .4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert agreement(a, b) == pytest.approx(0.7)
    assert cohens_kappa(a, b) == pytest.approx(0.4)
    assert confusion_table(a, b) == {("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15}


def test_kappa_is_one_for_perfect_agreement_zero_at_chance_negative_when_worse() -> None:
    assert cohens_kappa(["p", "f", "p"], ["p", "f", "p"]) == pytest.approx(1.0)
    # independent: p_o = .5, p_e = .5
    assert cohens_kappa(["p", "p", "f", "f"], ["p", "f", "p", "f"]) == pytest.approx(0.0)
    assert cohens_kappa(["p", "f"], ["f", "p"]) == pytest.approx(-1.0)


def test_kappa_is_undefined_not_guessed_when_chance_agreement_is_one() -> None:
    assert cohens_kappa(["p", "p"], ["p", "p"]) is None
    assert cohens_kappa([], []) is None and agreement([], []) is None


def test_unscored_pairs_are_left_out_and_counted() -> None:
    r = agreement_report([1.0, 0.2, None, 0.9, 0.6], [1.0, 0.0, 1.0, None, 0.0], threshold=0.5)
    assert (r.pairs, r.judge_unscored, r.reference_unscored) == (3, 1, 1)
    assert r.table == {("pass", "pass"): 1, ("pass", "fail"): 1, ("fail", "pass"): 0, ("fail", "fail"): 1}
    assert r.agreement == pytest.approx(2 / 3)
    # p_judge(pass) = 2/3, p_ref(pass) = 1/3: p_e = 2/9 + 2/9 = 4/9; kappa = (2/3 - 4/9) / (5/9) = 0.4
    assert r.kappa == pytest.approx(0.4)
    assert to_labels([0.5, 0.49], 0.5) == ["pass", "fail"]


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="same length"):
        agreement_report([1.0], [1.0, 0.0])


def test_the_text_table_shows_counts_and_statistics() -> None:
    r = agreement_report([1.0, 0.0, 1.0, None], [1.0, 0.0, 0.0, 1.0], judge_statuses={"ok": 3, "parse_error": 1})
    text = format_agreement(r, "llm_judge", "math")
    assert "3 pairs" in text and "agreement 0.667" in text and "1 parse_error" in text
    assert text.splitlines()[2].split()[-2:] == ["1", "1"]  # judge pass row: 1 math pass, 1 math fail


def test_doctests() -> None:
    res = doctest.testmod(agreement_module)
    assert res.attempted > 0 and res.failed == 0
