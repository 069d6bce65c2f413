"""The trainer's learning test (tests/trainer/test_learning.py) over seeds and torch thread counts.

For each loss the test covers, the toy task (a random-init 2-layer Qwen2-style model rewarded for the letter "a",
see tests/trainer/_trainer_helpers.py) is trained for 45 steps with ``run.seed`` = each seed and
``torch.set_num_threads`` = each thread count, in this process. Per loss it prints the start (mean batch reward of
the first 3 steps) and end (last 5 steps) of every run, then the mean, standard deviation and minimum of the ends:
the test's thresholds (start < 0.2, end >= 0.8) must sit at least 3 standard deviations from them.

    python benchmarks/learning_seeds.py [--seeds 0 1 2 3 4] [--threads 1 2] [--losses grpo dapo]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

LOSSES = {"grpo": {}, "dr_grpo": {}, "dapo": {"mask_truncated": False}, "bnpo": {}, "gspo": {}, "cispo": {}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--losses", nargs="+", default=list(LOSSES))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "trainer"))
    import torch
    from _trainer_helpers import toy_config

    from trainer import train

    for loss in args.losses:
        starts, ends = [], []
        for threads in args.threads:
            torch.set_num_threads(threads)
            for seed in args.seeds:
                with tempfile.TemporaryDirectory() as tmp:
                    cfg = toy_config(Path(tmp), loss, loss=loss, max_steps=45, **LOSSES[loss])
                    cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"seed": seed})})
                    res = train(cfg, progress=False)
                r = [m["reward/total/mean"] for m in res.metrics]
                starts.append(statistics.mean(r[:3]))
                ends.append(statistics.mean(r[-5:]))
                print(f"{loss:8s} seed {seed} threads {threads}: start {starts[-1]:.3f} end {ends[-1]:.3f}", flush=True)
        sd = statistics.stdev(ends)
        print(f"{loss:8s} end over {len(ends)} runs: mean {statistics.mean(ends):.3f} sd {sd:.3f} min {min(ends):.3f}"
              f" -> (min - 0.8) / sd = {(min(ends) - 0.8) / sd if sd else float('inf'):.1f}; "
              f"start max {max(starts):.3f} sd {statistics.stdev(starts):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
