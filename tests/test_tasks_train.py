"""Training on a task: `data.task` in the run config sets the training rows, the rewards and the held-out split.

The 1-step run uses the built-in random-init toy model (`toy:char`, a tiny char-level model: it answers nothing
right, which is fine: the test checks what was trained on and with which rewards, not learning) and a task file
whose rows are short enough for the toy model's context.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from harness.config import load_config
from harness.errors import ConfigError
from harness.tasks import unregister_task
from harness.tasks.training import apply_task, check_task_contamination, task_train_samples
from harness.types import RewardSpec

QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips?",
    "Weng earns $12 an hour for babysitting. Yesterday she did 50 minutes of babysitting. How much did she earn?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
]


def _gsm8k(path: Path, questions: list[str]) -> str:
    path.write_text(
        "".join(json.dumps({"question": q, "answer": f"work\n#### {i}"}) + "\n" for i, q in enumerate(questions))
    )
    return str(path)


def test_data_task_is_one_name() -> None:
    with pytest.raises(ConfigError, match="data.task: .*expected one task name"):
        load_config({"data": {"task": "gsm8k math500"}})
    cfg = load_config({"data": {"task": "gsm9k"}})
    with pytest.raises(ConfigError, match="data.task: unknown task 'gsm9k'; registered tasks: .*gsm8k"):
        apply_task(cfg)


def test_the_tasks_rewards_apply_unless_the_config_has_its_own() -> None:
    cfg = apply_task(load_config({"data": {"task": "gsm8k"}}))
    assert cfg.rewards == [RewardSpec(name="math")]
    own = apply_task(load_config({"data": {"task": "gsm8k"}, "rewards": {"overlong": 1.0}}))
    assert [r.name for r in own.rewards] == ["overlong"]
    humaneval = apply_task(load_config({"data": {"task": "humaneval", "train": "x.jsonl"}}))
    assert humaneval.rewards[0].params == {"complete_prompt": True}
    with pytest.raises(ConfigError, match="task 'humaneval' has no train split"):
        apply_task(load_config({"data": {"task": "humaneval"}}))


def test_training_rows_are_the_task_rows_zero_shot(tmp_path: Path) -> None:
    train = _gsm8k(tmp_path / "train.jsonl", QUESTIONS)
    plain = task_train_samples(load_config({"data": {"task": "gsm8k", "train": train, "chat_template": False}}))
    assert [s.prompt for s in plain] == [f"Question: {q}\nAnswer:" for q in QUESTIONS]
    assert [s.answer for s in plain] == [f"work\n#### {i}" for i in range(3)]
    chat = task_train_samples(load_config({"data": {"task": "gsm8k", "train": train}}))
    assert [len(s.prompt) for s in chat] == [1, 1, 1]  # one user turn: no few-shot examples in training prompts


def test_contamination_check_runs_between_the_splits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    train = _gsm8k(tmp_path / "train.jsonl", QUESTIONS)
    held = _gsm8k(tmp_path / "test.jsonl", [QUESTIONS[1], "A different question that shares nothing with training."])
    cfg = load_config({"data": {"task": "gsm8k", "train": train, "heldout": held}})
    with caplog.at_level(logging.WARNING):
        report = check_task_contamination(cfg)
    assert report is not None and report.exact == 1 and report.exact_ids == ["0"] and report.ngram == 0
    assert "1 of 2 held-out questions overlap" in caplog.text
    clean = load_config({"data": {"task": "gsm8k", "train": train, "heldout": _gsm8k(tmp_path / "c.jsonl", ["7*8?"])}})
    report = check_task_contamination(clean)
    assert report is not None and report.exact == report.ngram == 0


@pytest.mark.slow
def test_one_step_trains_on_the_task(tmp_path: Path) -> None:
    from trainer.loop import train

    rows = [{"q": f"{a}+{a}=", "a": str(2 * a)} for a in range(1, 9)]
    (tmp_path / "adds_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task_file = tmp_path / "adds.yaml"
    task_file.write_text(
        yaml.safe_dump(
            {
                "name": "adds_for_training",
                "source": "adds_{split}.jsonl",
                "splits": {"train": "train"},
                "fields": {"id": None, "prompt": "q", "answer": "a", "tests": None},
                "prompt": {"template": "{q}", "chat": False},
                "rewards": [{"name": "math", "params": {"strict": False}}, {"name": "overlong", "weight": 0.0}],
            }
        )
    )
    config_file = tmp_path / "run.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "run": {"id": "task", "output_dir": str(tmp_path / "runs"), "seed": 0},
                "model": {"name_or_path": "toy:char"},
                "data": {"task": "adds_for_training", "chat_template": False},
                "plugins": ["adds.yaml"],  # relative to the config file, as users write it
                "trainer": {
                    "num_generations": 4,
                    "prompts_per_step": 2,
                    "max_prompt_length": 16,
                    "max_completion_length": 8,
                    "max_steps": 1,
                    "save_steps": 0,
                },
            }
        )
    )
    cfg = load_config(config_file)
    assert cfg.plugins == [str(task_file)]
    try:
        result = train(cfg, progress=False)
    finally:
        unregister_task("adds_for_training")
    line = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert "reward/math/mean" in line and "reward/overlong/mean" in line
    saved = yaml.safe_load((result.run_dir / "config.yaml").read_text())
    assert saved["data"]["task"] == "adds_for_training"
    assert [r["name"] for r in saved["rewards"]] == ["math", "overlong"]
