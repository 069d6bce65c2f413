"""Executions per second of the sandbox against a bare ``subprocess.run([python, "-c", program])``, side by side.

The workload is a trivial solution with three asserts. The sandboxed side runs it through the public reward
(``get_reward("code")``: solution process + judge process, every isolation layer the machine has); the
baseline runs solution and asserts as one unisolated ``python -c`` program. Both use every core (a thread per
in-flight execution) and alternate in rounds so machine load affects both alike. Prints executions/s, p50/p99
latency and the ratio.

    python benchmarks/sandbox_throughput.py [--seconds 10] [--concurrency N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\nassert add(10, 5) == 15\n"


def _sandboxed(fn) -> float:
    t = time.perf_counter()
    s = fn({"tests": TESTS}, SOLUTION)
    if s.status != "pass":
        raise SystemExit(f"sandboxed run did not pass: {s.status} {s.info.get('reason')}")
    return time.perf_counter() - t


def _bare() -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", SOLUTION + TESTS], capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"baseline run failed: {r.stderr.decode()[-300:]}")
    return time.perf_counter() - t


def _measure(task, seconds: float, concurrency: int) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        while time.perf_counter() - t0 < seconds:
            latencies += list(ex.map(lambda _: task(), range(concurrency * 4)))
    return len(latencies), time.perf_counter() - t0, latencies


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per side (split in rounds)")
    ap.add_argument("--concurrency", type=int, default=0, help="in-flight executions (default: 2 x cores)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from harness import get_reward
    from sandbox import get_sandbox

    cores = os.cpu_count() or 1
    conc = args.concurrency or 2 * cores
    fn = get_reward("code")
    report = get_sandbox().isolation()
    for _ in range(3):  # warm both paths
        _sandboxed(fn)
        _bare()
    totals = {"sandbox": [0, 0.0, []], "bare": [0, 0.0, []]}
    per = args.seconds / args.rounds
    for _ in range(args.rounds):
        for name, task in (("sandbox", lambda: _sandboxed(fn)), ("bare", _bare)):
            n, el, lat = _measure(task, per, conc)
            totals[name][0] += n
            totals[name][1] += el
            totals[name][2] += lat
    print(f"isolation level: {report.level} (missing: {', '.join(report.missing) or 'none'}); "
          f"speed factor {report.speed_factor:.2f}; cores {cores}; concurrency {conc}")
    rates = {}
    for name, label in (("sandbox", "sandbox (full isolation, judge process)"), ("bare", "subprocess.run python -c (no isolation)")):
        n, el, lat = totals[name]
        rates[name] = n / el
        print(f"{label:42s} {rates[name]:8.1f} exec/s   p50 {1000 * statistics.median(lat):7.1f} ms   "
              f"p99 {1000 * _pct(lat, 0.99):7.1f} ms   n={n}")
    print(f"ratio sandbox/bare: {rates['sandbox'] / rates['bare']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
