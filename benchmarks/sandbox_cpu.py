"""Where a sandboxed execution's CPU time goes: the calling process, the warm server, the sandboxed children.

Runs the same workload as ``sandbox_throughput.py`` (a trivial solution with three asserts through
``get_reward("code")``, two executions in flight per core) and reads, from ``/proc``, the server's own CPU time
and minor page faults, its fork helper's, and those of its reaped children (every solution and judge process).
Forked children pay for every page they write (copy-on-write), so page faults per execution are the number to
watch when changing what the server holds or what a child does before running the code. Not a speed goal: a
diagnostic.

    python benchmarks/sandbox_cpu.py [--executions 600]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOLUTION = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\nassert add(10, 5) == 15\n"


def _stat(pid: int) -> tuple[float, float, int, int]:
    """(own CPU s, reaped children's CPU s, own minor faults, reaped children's minor faults) of ``pid``."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return (int(f[11]) + int(f[12])) / hz, (int(f[13]) + int(f[14])) / hz, int(f[7]), int(f[8])


def _children(pid: int) -> list[int]:
    """The live children of ``pid``."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executions", type=int, default=600)
    args = ap.parse_args(argv)
    from harness import get_reward
    from sandbox import get_sandbox

    fn = get_reward("code")
    for _ in range(10):
        fn({"tests": TESTS}, SOLUTION)
    server = get_sandbox().server_pid()
    helpers = _children(server)  # between executions: the server's fork helper (when it has one)
    n = args.executions
    host0, srv0, t0 = os.times(), _stat(server), time.perf_counter()
    help0 = [_stat(p) for p in helpers]
    with ThreadPoolExecutor(2 * (os.cpu_count() or 1)) as ex:
        statuses = list(ex.map(lambda _: fn({"tests": TESTS}, SOLUTION).status, range(n)))
    wall = time.perf_counter() - t0
    host1, srv1 = os.times(), _stat(server)
    help_ms = sum(b[0] - a[0] for a, b in zip(help0, [_stat(p) for p in helpers], strict=True)) * 1000 / n
    help_faults = sum(b[2] - a[2] for a, b in zip(help0, [_stat(p) for p in helpers], strict=True)) / n
    if set(statuses) != {"pass"}:
        raise SystemExit(f"not every execution passed: {sorted(set(statuses))}")
    host_ms = (host1.user + host1.system - host0.user - host0.system) * 1000 / n
    print(f"{n} executions, {n / wall:.1f} exec/s, isolation {get_sandbox().isolation().level}")
    print(
        f"CPU ms per execution: caller {host_ms:.2f}, server {(srv1[0] - srv0[0]) * 1000 / n:.2f}, "
        f"fork helper {help_ms:.2f}, sandboxed children {(srv1[1] - srv0[1]) * 1000 / n:.2f}; "
        f"all cores' wall time {wall * 1000 * (os.cpu_count() or 1) / n:.2f}"
    )
    print(
        f"minor page faults per execution: server {(srv1[2] - srv0[2]) / n:.0f}, fork helper {help_faults:.0f}, "
        f"sandboxed children {(srv1[3] - srv0[3]) / n:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
