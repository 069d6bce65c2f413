"""harness.contamination: exact and 13-gram overlap between held-out and training prompts."""

from __future__ import annotations

import pytest

from harness.contamination import ContaminationIndex, check_contamination, contamination_text, tokens
from harness.types import Sample

LONG = "Natalia sold clips to forty eight of her friends in April and then she sold half as many clips in May"


def test_exact_ngram_and_clean_prompts_are_told_apart() -> None:
    train = [Sample(id="t0", prompt=LONG), Sample(id="t1", prompt="What is 2+2?")]
    held = [
        Sample(id="exact", prompt=LONG.upper() + "  "),  # same tokens, other case/spacing
        Sample(id="short-exact", prompt="what is 2 + 2"),  # short, tokens equal
        Sample(id="gram", prompt="Question: " + " ".join(LONG.split()[3:16]) + " and more text here"),
        Sample(id="twelve", prompt=" ".join(LONG.split()[:12]) + " zebra"),  # only a 12-token window shared
        Sample(id="clean", prompt="A train leaves the station at noon travelling at sixty miles an hour today"),
    ]
    r = check_contamination(held, train)
    assert r.exact_ids == ["exact", "short-exact"]
    assert r.ngram_ids == ["gram"]
    assert (r.exact, r.ngram, r.heldout, r.train) == (2, 1, 5, 2)
    assert r.overlap
    kinds = {e["heldout_id"]: (e["kind"], e["train_id"]) for e in r.examples}
    assert kinds["gram"] == ("13-gram", "t0") and kinds["exact"] == ("exact", "t0")
    d = r.to_dict()
    assert d["exact"] == 2 and d["ngram"] == 1 and d["shorter_than_n"] >= 1
    assert "2/5" in r.summary()


def test_smaller_n_catches_more_and_examples_are_capped() -> None:
    train = [Sample(id="t", prompt=LONG)]
    held = [Sample(id=f"h{i}", prompt=" ".join(LONG.split()[i : i + 5])) for i in range(4)]
    assert not check_contamination(held, train).overlap  # 5-token prompts cannot share a 13-gram
    r = check_contamination(held, ContaminationIndex.build(train, n=5), max_examples=2)
    assert r.ngram + r.exact == 4 and len(r.examples) == 2


def test_system_messages_are_ignored() -> None:
    system = {"role": "system", "content": LONG}
    train = [Sample(id="t", prompt=[system, {"role": "user", "content": "What is 3 times 7?"}])]
    held = [Sample(id="h", prompt=[system, {"role": "user", "content": "What is 5 times 9?"}])]
    assert contamination_text(held[0]) == "What is 5 times 9?"
    assert not check_contamination(held, train).overlap


def test_tokens_and_bad_n() -> None:
    assert tokens("Hello, World! 3.5") == ["hello", "world", "3", "5"]
    with pytest.raises(ValueError):
        ContaminationIndex.build([], n=0)


def test_harness_eval_warns_about_overlap_once_per_checkpoint(run_dir, tmp_path, caplog, capsys) -> None:
    """Regression: on the old main the evaluator logged the overlap and the CLI printed it again."""
    import logging

    from eval_runs import HELDOUT, write_jsonl

    from harness.cli import main as harness_main

    leaky = write_jsonl(tmp_path / "leaky_train.jsonl", HELDOUT[:2])
    with caplog.at_level(logging.INFO):
        assert (
            harness_main(
                [
                    "eval",
                    "--checkpoints",
                    str(run_dir),
                    "--train-data",
                    str(leaky),
                    "--k",
                    "1",
                    "--no-progress",
                    "--no-telemetry",
                ]
            )
            == 0
        )
    said = [r.getMessage() for r in caplog.records if "held-out prompts exactly in the training set" in r.getMessage()]
    shown = capsys.readouterr()
    assert len(said) == 1 and said[0].startswith("contamination: 2/6") and "results.json" in said[0]
    assert "held-out prompts exactly" not in shown.err + shown.out and "overlaps with the training" not in shown.err
