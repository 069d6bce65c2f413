"""`harness demo` (the tiny model) over seeds and torch thread counts: is its held-out gain larger than its noise?

Each run is ``harness demo --seed S`` in its own process with ``OMP_NUM_THREADS=T``: the seed changes the
training/held-out split, the warm-up model's initialization and data order, GRPO's sampling and the evaluator's
sampling; the thread count changes the order of float reductions, which stands in for another CPU (the same seed
gives different numbers on another machine for the same reason). Per run it prints the held-out ``math`` mean of
the model before GRPO (start) and of the last checkpoint (end), the rise, its paired standard error over
held-out prompts (see :mod:`harness.demo.stats`), the rise in standard errors, and the run's wall time.
``--capability avx2`` (or ``default``) makes torch use the vector kernels of an older CPU generation
(``ATEN_CPU_CAPABILITY``), which changes float results where the thread count does not: for a model this small
torch splits no matmul across threads, so 1 and 2 threads can give the same numbers.

    python benchmarks/demo_seeds.py [--seeds 0 1 2 3 4] [--threads 1 2]

Goal: every run's rise > 3 standard errors, and the mean rise >= 0.15.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_one(seed: int, threads: int, out_dir: str, extra: list[str], capability: str | None = None) -> dict:
    """One ``harness demo`` run in a child process; its rises read back from the run's evaluation files."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    run_id = f"seed{seed}-t{threads}{'-' + capability if capability else ''}"
    cmd = [sys.executable, "-m", "harness.cli", "demo", "--seed", str(seed), "--output-dir", out_dir,
           "--run-id", run_id, "--no-progress", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed}, {threads} threads failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    from harness.demo.stats import rise_between

    run_dir = Path(out_dir) / run_id
    last = max((run_dir / "eval").glob("step-*"))
    rises = {name: rise_between(run_dir / "eval" / "base", last, name) for name in ("math", "boxed_present")}
    return {"seed": seed, "threads": threads, "wall_s": wall, "last": last.name,
            **{name: r.__dict__ | {"z": r.z} for name, r in rises.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--keep", help="write the runs here instead of a temporary directory")
    ap.add_argument("--capability", help="ATEN_CPU_CAPABILITY for the runs (default, avx2, avx512): torch's "
                    "vector kernels of another CPU generation, another stand-in for another machine")
    ap.add_argument("demo_args", nargs="*", help="passed to harness demo after --")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'seed':>4} {'thr':>3}  {'start':>6} {'end':>6} {'rise':>7} {'stderr':>6} {'z':>5}  "
          f"{'boxed rise':>10}  {'wall s':>6}", flush=True)
    with tempfile.TemporaryDirectory(prefix="demo-seeds-") as tmp:
        out = args.keep or tmp
        for threads in args.threads:
            for seed in args.seeds:
                r = run_one(seed, threads, out, args.demo_args, args.capability)
                rows.append(r)
                m = r["math"]
                print(f"{seed:>4} {threads:>3}  {m['start']:6.3f} {m['end']:6.3f} {m['rise']:+7.3f} "
                      f"{m['stderr']:6.3f} {m['z']:5.1f}  {r['boxed_present']['rise']:+10.3f}  {r['wall_s']:6.1f}",
                      flush=True)
    rises = [r["math"]["rise"] for r in rows]
    zs = [r["math"]["z"] for r in rows]
    ok = min(zs) > 3 and statistics.mean(rises) >= 0.15
    print(f"math rise over {len(rows)} runs: mean {statistics.mean(rises):+.3f}, sd {statistics.stdev(rises) if len(rises) > 1 else 0.0:.3f}, "
          f"min {min(rises):+.3f}; min z {min(zs):.1f}; max wall {max(r['wall_s'] for r in rows):.1f} s")
    print(f"goal (every z > 3 and mean rise >= 0.15): {'met' if ok else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
