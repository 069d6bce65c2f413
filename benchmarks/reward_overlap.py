"""How much reward time stays on the trainer's critical path when rewards run in worker processes.

Trains the toy task with ``char_count_slow`` (a plugin, ``slow_reward.py``: the toy reward in a scoring worker,
sleeping ``--delay`` seconds per call, standing in for a costly verifier) and prints, per step, the summed reward
time of all calls and the part of the step the trainer spent blocked on rewards (submit + wait), the reward time
the trainer could not hide. The toy run has ``mu: 1`` and no KL term, so nothing of the update runs before the wait
(the old and reference log-probs would: ``trainer.update.prepare_update``); only later chunks of the rollout hide
the scoring of earlier ones.

    OMP_NUM_THREADS=1 python benchmarks/reward_overlap.py [--delay 0.005] [--steps 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch

SLOW_REWARD = Path(__file__).with_name("slow_reward.py")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--delay", type=float, default=0.005)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--chunks", type=int, nargs="+", default=[1, 2, 4], help="trainer.rollout_chunks values to compare")
    a = p.parse_args()
    torch.set_num_threads(1)
    n = 16
    serial = n * a.delay / a.workers
    print(f"{n} reward calls/step x {a.delay * 1000:.1f} ms on {a.workers} workers = {serial * 1000:.1f} ms of "
          f"reward wall time per step (at best)")
    for chunks in a.chunks:
        _run(a, chunks, serial)


def _run(a: argparse.Namespace, chunks: int, serial: float) -> None:
    from harness.config import load_config
    from trainer import train

    with tempfile.TemporaryDirectory() as d:
        cfg = load_config({
            "run": {"id": "overlap", "output_dir": d, "seed": 0},
            "model": {"name_or_path": "toy:char"},
            "data": {"train": "toy:256", "chat_template": False},
            "plugins": [str(SLOW_REWARD)],  # registers char_count_slow (not a built-in)
            "rewards": {"char_count_slow": {"weight": 1.0, "params": {"norm": 32.0, "delay_s": a.delay}}},
            "trainer": {"num_generations": 8, "prompts_per_step": 2, "max_prompt_length": 16,
                        "max_completion_length": 32, "lr": 3e-3, "max_steps": a.steps, "score_workers": a.workers,
                        "rollout_chunks": chunks,
                        "monitors": {"truncated_frac": 1.0}},
        })
        res = train(cfg, progress=False)
    rows = res.metrics[2:] or res.metrics
    crit = statistics.median(m["timing/reward_critical_s"] for m in rows)
    step = statistics.median(m["timing/step_s"] for m in rows)
    print(f"rollout_chunks={chunks}: median step {step * 1000:.1f} ms; reward time on the critical path "
          f"{crit * 1000:.1f} ms ({crit / step:.0%} of the step, {crit / serial:.0%} of the reward wall time)")


if __name__ == "__main__":
    main()
