"""Run configs for the trainer tests: the toy task (random-init tiny Qwen2 model, char-level tokenizer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config import RunConfig, load_config


def toy_config(tmp: Path, run_id: str = "t", rewards: Any = None, **trainer: Any) -> RunConfig:
    body = {
        "num_generations": 8,
        "prompts_per_step": 2,
        "max_prompt_length": 16,
        "max_completion_length": 16,
        "lr": 3e-3,
        "max_steps": 10,
        "monitors": {"truncated_frac": 1.0},
    }
    body.update(trainer)
    return load_config(
        {
            "run": {"id": run_id, "output_dir": str(tmp), "seed": 0},
            "model": {"name_or_path": "toy:char"},
            "data": {"train": "toy:64", "chat_template": False},
            "rewards": rewards
            if rewards is not None
            else {"char_count": {"weight": 1.0, "params": {"char": "a", "norm": 16.0}}},
            "trainer": body,
        }
    )
