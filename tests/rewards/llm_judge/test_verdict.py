"""Strict verdict parsing against messy judge outputs, rubric loading and rendering, vote aggregation."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from rewards.llm_judge import (
    BUILTIN_RUBRICS,
    Scale,
    VerdictError,
    _client,
    _plugin,
    _verdict,
    aggregate_votes,
    load_rubric,
    parse_scale,
    parse_verdict,
)

BIN, FIVE = Scale(), Scale(5)


@pytest.mark.parametrize(
    "text, scale, raw, value",
    [
        ("The answer is right.\nVERDICT: yes", BIN, "yes", 1.0),
        ("wrong value\nverdict: NO", BIN, "no", 0.0),
        ("**VERDICT:** yes", BIN, "yes", 1.0),
        ("Reasoning...\n```\nVERDICT: no\n```", BIN, "no", 0.0),
        ("VERDICT: yes\n\nAgain, to be clear:\nVERDICT: yes", BIN, "yes", 1.0),  # repeated, same
        ('{"rationale": "matches", "verdict": "yes"}', BIN, "yes", 1.0),
        ('Here you go:\n```json\n{"rationale": "off by one", "verdict": 2}\n```', FIVE, 2, 0.25),
        ("Mostly good.\nVERDICT: 5", FIVE, 5, 1.0),
        ("VERDICT: 1.", FIVE, 1, 0.0),
        ("VERDICT = 3", FIVE, 3, 0.5),
    ],
)
def test_valid_verdicts_parse_to_their_normalized_value(text: str, scale: Scale, raw: object, value: float) -> None:
    v = parse_verdict(text, scale)
    assert (v.raw, v.value) == (raw, value)


@pytest.mark.parametrize(
    "text, scale, why",
    [
        ("", BIN, "no text"),
        ("I think the verdict is yes.", BIN, "no 'VERDICT"),  # prose does not count
        ("VERDICT: yes\nHmm, actually the units are wrong.\nVERDICT: no", BIN, "conflicting"),  # changed mid-text
        ("VERDICT: maybe", BIN, "not yes or no"),
        ("VERDICT: yes or no", BIN, "not yes or no"),  # the rubric's instruction echoed
        ("VERDICT: 7", FIVE, "out of range"),
        ("VERDICT: 0", FIVE, "out of range"),
        ("VERDICT: 4.5", FIVE, "not an integer"),
        ("VERDICT: <one integer from 1 to 5>", FIVE, "not an integer"),
        ("VERDICT:", BIN, "has no value"),
        ('{"verdict": true}', FIVE, "not an integer"),
        ('{"verdict": 9}', FIVE, "out of range"),
        ('{"rationale": "no verdict key"}', BIN, "no 'VERDICT"),
        ("```\nVERDICT: 2\n```\nOn reflection:\nVERDICT: 4", FIVE, "conflicting"),
    ],
)
def test_invalid_verdicts_are_errors_that_say_why(text: str, scale: Scale, why: str) -> None:
    with pytest.raises(VerdictError, match=why):
        parse_verdict(text, scale)


def test_rationale_is_the_text_before_the_verdict() -> None:
    assert parse_verdict("Step 2 is wrong.\nVERDICT: no", BIN).rationale == "Step 2 is wrong."
    assert parse_verdict('{"rationale": "fine", "verdict": "yes"}', BIN).rationale == "fine"


@pytest.mark.parametrize("text, top", [("binary", None), ("1-5", 5), ("1 - 10", 10)])
def test_scales(text: str, top: int | None) -> None:
    assert parse_scale(text).top == top


@pytest.mark.parametrize("bad", ["1-1", "0-5", "1-1000", "five", ""])
def test_bad_scales_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="scale must be"):
        parse_scale(bad)


def test_majority_ties_fall_back_to_the_mean() -> None:
    assert aggregate_votes([1.0, 1.0, 0.0], "majority") == 1.0
    assert aggregate_votes([0.0, 1.0], "majority") == 0.5
    assert aggregate_votes([0.25, 0.75, 0.75, 0.25], "majority") == 0.5
    assert aggregate_votes([0.0, 0.5, 1.0], "mean") == 0.5


def test_builtin_rubrics_load_from_package_data_and_render() -> None:
    fields = {}
    for name in BUILTIN_RUBRICS:
        r = load_rubric(name)
        assert "completion" in r.fields and "verdict_format" in r.fields
        fields[name] = set(r.fields)
    assert "answer" in fields["correctness"] and "context" in fields["hallucination"]
    text = load_rubric("correctness").render({"prompt": "2+2?", "answer": 4}, "it is {4}", BIN.instruction)
    assert "it is {4}" in text and "VERDICT: yes" in text and "<reference>\n4\n</reference>" in text


def test_a_missing_column_is_named() -> None:
    with pytest.raises(KeyError, match="reads column 'context'"):
        load_rubric("hallucination").render({"prompt": "q"}, "a", BIN.instruction)


@pytest.mark.parametrize(
    "template, why",
    [
        ("{completion} {prompt.__class__} {verdict_format}", "not a plain column name"),
        ("{completion} {x[0]} {verdict_format}", "not a plain column name"),
        ("{completion} {x!r} {verdict_format}", "not a plain column name"),
        ("{prompt} {verdict_format}", "never shows the judge"),
        ("{completion}", "verdict_format"),
        ("{completion {verdict_format}", "bad braces"),
    ],
)
def test_bad_template_files_are_refused_at_load(tmp_path: Path, template: str, why: str) -> None:
    f = tmp_path / "rubric.txt"
    f.write_text(template)
    with pytest.raises(ValueError, match=why):
        load_rubric(str(f))


def test_a_template_file_reads_any_row_column(tmp_path: Path) -> None:
    f = tmp_path / "tone.txt"
    f.write_text("Audience: {audience}\nText: {completion}\nPolite? {{braces}} {verdict_format}")
    r = load_rubric(str(f))
    assert r.fields == ("audience", "completion", "verdict_format")
    assert r.render({"audience": "kids"}, "hi", "V").startswith("Audience: kids\nText: hi\nPolite? {braces} V")


def test_doctests() -> None:
    for module in (_verdict, _plugin, _client):
        res = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert res.attempted > 0 and res.failed == 0, module.__name__
