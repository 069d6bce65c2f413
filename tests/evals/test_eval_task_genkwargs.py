"""``--gen-kwargs`` parsing (lm-evaluation-harness's habits) and the task results' table and lm-eval layout."""

from __future__ import annotations

import pytest

from evals.backends.base import SamplingParams, cut_at_stop
from evals.genkwargs import GenKwargs, parse_gen_kwargs
from evals.task_results import CheckpointMetric, format_task_table, lm_eval_section, task_metrics
from harness.errors import HarnessError


def test_all_keys_aliases_and_repeats() -> None:
    g = parse_gen_kwargs(["max_gen_toks=128,temperature=0.7,top_p=0.9", "until=Question:", "max_new_tokens=256"])
    assert g == GenKwargs(max_new_tokens=256, temperature=0.7, top_p=0.9, stop=("Question:",))
    assert parse_gen_kwargs("do_sample=false").temperature == 0.0
    assert parse_gen_kwargs("do_sample=true").given() == {}


@pytest.mark.parametrize(
    "text",
    [
        'stop=["\\n\\n", "Question:"]',  # JSON list, JSON escapes
        "stop=['\\n\\n', 'Question:']",  # Python literal list
        "stop=\\n\\n,stop=Question:",  # repeated bare words, Python escapes
        'stop="\\n\\n",until="Question:"',  # quoted strings, the alias
    ],
)
def test_stop_given_several_ways_means_the_same(text: str) -> None:
    assert parse_gen_kwargs(text).stop == ("\n\n", "Question:")


def test_commas_inside_quotes_and_lists_stay() -> None:
    g = parse_gen_kwargs('stop=["a,b", "c"],temperature=0')
    assert g.stop == ("a,b", "c") and g.temperature == 0.0


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("max_tokens=5", r"unknown key 'max_tokens'; expected one of max_new_tokens, temperature, top_p, stop"),
        ("temperature", r"'temperature': expected KEY=VALUE"),
        ("max_new_tokens=abc", r"max_new_tokens: expected an integer >= 1, got 'abc'"),
        ("max_new_tokens=0", r"max_new_tokens: expected an integer >= 1, got 0"),
        ("max_new_tokens=2.5", r"max_new_tokens: expected an integer"),
        ("temperature=-1", r"temperature: expected a number >= 0, got -1"),
        ("top_p=0", r"top_p: expected a number > 0 and <= 1, got 0"),
        ("top_p=1.5", r"top_p: expected a number > 0 and <= 1"),
        ("stop=[1, 2]", r"stop: expected a non-empty string or a list of them"),
        ('stop=""', r"stop: expected a non-empty string"),
        ("do_sample=maybe", r"do_sample: expected true or false"),
        ('stop=["a"', r"unbalanced quotes or brackets"),
    ],
)
def test_bad_input_names_the_key(text: str, match: str) -> None:
    with pytest.raises(HarnessError, match=match):
        parse_gen_kwargs(text)


def test_cut_at_stop_takes_the_earliest_and_drops_the_stop() -> None:
    assert cut_at_stop("x\nclass A\ndef f", ["\ndef ", "\nclass "]) == ("x", True)
    assert cut_at_stop("nothing here", ["\n\n"]) == ("nothing here", False)
    assert cut_at_stop("abc", []) == ("abc", False)


def test_sampling_params_keep_their_identity_without_stop() -> None:
    """Evaluations made before stop strings existed keep the same sampling dict (and so resume)."""
    assert SamplingParams(0.6, 0.95, 64, 0).to_dict() == {
        "temperature": 0.6,
        "top_p": 0.95,
        "max_new_tokens": 64,
        "seed": 0,
    }
    assert SamplingParams(0.6, 0.95, 64, 0, ("\n",)).to_dict()["stop"] == ["\n"]


def _results(k: int, pass1: float, passk: float) -> dict:
    return {
        "k": k,
        "pass@k": {
            "1": {"value": pass1, "stderr": 0.1, "prompts": 20},
            str(k): {"value": passk, "stderr": 0.05, "prompts": 20},
        },
        "maj@k": {str(k): {"value": 0.3, "stderr": 0.1, "prompts": 20}},
        "rewards": {"math": {"mean": pass1, "stderr": 0.02, "scored": 80}},
        "dataset": {"prompts": 20, "skipped_rows": 1},
    }


def test_task_metrics_lm_eval_layout_and_table() -> None:
    cfg = {"task": "gsm8k"}
    res = _results(4, 0.25, 0.5)
    entries = task_metrics("gsm8k", res, cfg)  # type: ignore[arg-type]
    assert [(e["metric"], e["value"], e["stderr"], e["n"]) for e in entries] == [
        ("pass@1", 0.25, 0.1, 20),
        ("pass@4", 0.5, 0.05, 20),
        ("maj@4", 0.3, 0.1, 20),
        ("reward/math", 0.25, 0.02, 80),
    ]
    assert set(entries[0]) == {"task", "metric", "value", "stderr", "n", "config"}
    lm = lm_eval_section({"gsm8k": {**res, "results": entries, "task": cfg}})  # type: ignore[typeddict-item]
    assert lm["results"]["gsm8k"]["pass@1,none"] == 0.25
    assert lm["results"]["gsm8k"]["pass@1_stderr,none"] == 0.1
    assert lm["n-samples"]["gsm8k"] == {"original": 21, "effective": 20}
    rows = [
        CheckpointMetric(**e, checkpoint=ck, checkpoint_path=ck)  # type: ignore[typeddict-item]
        for ck in ("step-1", "step-2")
        for e in entries
    ]
    text = format_task_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == [
        "checkpoint",
        "gsm8k/pass@1",
        "(n=20)",
        "gsm8k/pass@4",
        "(n=20)",
        "gsm8k/maj@4",
        "(n=20)",
    ]
    assert lines[2].startswith("step-1") and "0.2500 ± 0.1000" in lines[2] and "0.5000 ± 0.0500" in lines[2]
    assert lines[3].startswith("step-2") and len(lines) == 4
    assert "reward/math" not in text  # the table shows pass/maj; results.json has every entry


@pytest.mark.parametrize(
    "module", ["evals.genkwargs", "evals.task_results", "evals.task_cli", "evals.backends.base", "evals.backends.vllm"]
)
def test_the_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
