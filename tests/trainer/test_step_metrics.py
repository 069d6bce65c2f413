"""One GRPO step's metrics line: every std in it follows harness.stats (n - 1).

Failing on the code before harness.stats: ``reward/total/std`` divided by n - 1 and ``reward/<name>/std`` by n,
so with one reward of weight 1 (total == that reward) the two differed in the same line.
"""

from __future__ import annotations

import json

import pytest
from _trainer_helpers import toy_config

from trainer.loop import train


def test_one_steps_total_and_per_reward_std_use_one_convention(tmp_path):
    result = train(toy_config(tmp_path, "std", max_steps=1, save_steps=0), progress=False)
    line = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert line["reward/total/std"] is not None
    assert line["reward/total/std"] == pytest.approx(line["reward/char_count/std"], rel=1e-9)
    assert 0.0 <= line["frac_reward_zero_std"] <= 1.0
