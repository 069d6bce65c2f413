"""Per-sample overhead of `score_batch` against a plain in-process loop over the same trivial reward.

Baseline: ``[fn(sample, completion) for ...]`` in this process, no isolation, no time limit. Ours: the same
reward through `score_batch` (warm worker processes, hard wall-clock limit, crash isolation), cache off, and the
same reward registered ``inline`` (thread time limit, no process hop). Both measured side by side in one run,
best of a few repeats, for batches of 64 and 1024.

    .venv/bin/python benchmarks/scoring_overhead.py
"""

from __future__ import annotations

import argparse
import time

from harness import RewardSpec, Sample, Score, reward
from harness.scoring import ScoringSession, WorkerPool


@reward("bench_trivial", reads=())
def bench_trivial():
    """1.0 when the completion is non-empty (process isolation)."""
    return lambda sample, completion: Score(value=float(bool(completion)))


@reward("bench_trivial_inline", isolation="inline", reads=())
def bench_trivial_inline():
    """The same reward, run inline."""
    return lambda sample, completion: Score(value=float(bool(completion)))


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    pool = WorkerPool(args.workers)
    plain = bench_trivial()
    print(f"workers: {pool.size}; times are per sample, best of {args.repeats}")
    print(f"{'batch':>6} {'plain loop':>12} {'score_batch':>12} {'ratio':>8} {'inline':>10} {'ratio':>8}")
    for n in (64, 1024):
        samples = [Sample(id=str(i), prompt="p") for i in range(n)]
        completions = [f"completion {i}" for i in range(n)]
        proc = ScoringSession([RewardSpec(name="bench_trivial")], pool=pool, cache=False)
        inline = ScoringSession([RewardSpec(name="bench_trivial_inline")], pool=pool, cache=False)
        proc.score(samples, completions)  # warm: workers started, plugin built
        inline.score(samples, completions)
        t_plain = _best(lambda: [plain(s, c) for s, c in zip(samples, completions)], args.repeats) / n
        t_proc = _best(lambda: proc.score(samples, completions), args.repeats) / n
        t_inline = _best(lambda: inline.score(samples, completions), args.repeats) / n
        print(
            f"{n:>6} {t_plain * 1e6:>10.2f}us {t_proc * 1e6:>10.1f}us {t_proc / t_plain:>7.0f}x "
            f"{t_inline * 1e6:>8.1f}us {t_inline / t_plain:>7.0f}x"
        )
        inline.close()
    pool.close()
    print("overhead per sample of score_batch = its time per sample minus the plain loop's")


if __name__ == "__main__":
    main()
