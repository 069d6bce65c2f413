"""Executions per second of the ``code`` reward through Ray actors against the local pool, and how Ray scales.

Part 1, the overhead of Ray: the same batches (a trivial solution with three asserts, distinct completions so no
cache answers) are scored by a :class:`~harness.scoring.ScoringSession` on the local pool (one worker per core) and
on a local Ray instance (one actor per core), in alternating rounds so machine load hits both alike. Prints exec/s,
the ratio, and the per-call overhead of each side measured with a reward that does nothing (``format_regex``).

Part 2, scaling: a cluster of ``--nodes`` Ray nodes started on this machine (``ray.cluster_utils.Cluster``, each a
raylet with 1 CPU, as ``ray start`` would start them), measured with 1, 2, ... nodes; on a 2-core machine the
measured points stop rising at 2 nodes, so a cost model follows: throughput(N nodes x C cores) =
1 / max(t_exec / (N*C), d_driver), where t_exec is the measured core-seconds of one code execution and d_driver the
measured driver CPU seconds per call (the dispatcher's serial cost), printed for N up to 64.

    python benchmarks/ray_scoring.py [--seconds 8] [--nodes 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOLUTION = "```python\ndef add(a, b):\n    return a + b  # {}\n```"
TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\nassert add(10, 5) == 15\n"
_ids = itertools.count()


def _batch(n: int) -> tuple[list[dict], list[str]]:
    ids = [next(_ids) for _ in range(n)]
    return [{"id": str(i), "tests": TESTS} for i in ids], [SOLUTION.format(i) for i in ids]


def _rate(session, seconds: float, batch: int) -> tuple[int, float, float]:
    """(calls, wall seconds, driver CPU seconds) of scoring batches for about ``seconds``."""
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        samples, comps = _batch(batch)
        res = session.score(samples, comps)
        bad = [s for s in res.scores[session.specs[0].name] if s.value is None]
        if bad:
            raise SystemExit(f"unscored calls: {bad[0].status} {bad[0].info.get('reason')}")
        n += batch
    return n, time.perf_counter() - t0, time.process_time() - c0


def _overhead(pool, cores: int, seconds: float, rounds: int) -> dict[str, float]:
    from harness.scoring import ScoringSession

    out: dict[str, float] = {}
    noop = [{"name": "format_regex", "params": {"pattern": "add"}}]
    for p in (None, pool):  # warm: workers built, sandbox servers up
        with ScoringSession(["code"], cache=False, workers=cores, pool=p) as s:
            _rate(s, 1.0, 4 * cores)
    totals = {k: [0, 0.0, 0.0] for k in ("local", "ray", "local_noop", "ray_noop")}
    for _ in range(rounds):
        for label, p in (("local", None), ("ray", pool)):
            with ScoringSession(["code"], cache=False, workers=cores, pool=p) as s:
                for i, v in enumerate(_rate(s, seconds / rounds, 8 * cores)):
                    totals[label][i] += v
            with ScoringSession(noop, cache=False, workers=cores, pool=p) as s:
                for i, v in enumerate(_rate(s, seconds / rounds / 2, 32 * cores)):
                    totals[label + "_noop"][i] += v
    for k, (n, wall, cpu) in totals.items():
        out[k] = n / wall
        out[k + "_driver_cpu_per_call"] = cpu / n
    return out


def part1(seconds: float, rounds: int) -> dict[str, float]:
    import ray

    from harness.scoring._ray import RayPool

    cores = os.cpu_count() or 1
    ray.init(address="local", num_cpus=cores, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=100 * 1024 * 1024, log_to_driver=False)  # fmt: skip
    pool = RayPool()
    try:
        r = _overhead(pool, cores, seconds, rounds)
    finally:
        pool.close()
        ray.shutdown()
    print(f"== code reward, {cores} cores, local pool ({cores} workers) vs local Ray ({pool.size} actors) ==")
    ratio = r["ray"] / r["local"]
    print(f"local pool: {r['local']:7.1f} exec/s    ray: {r['ray']:7.1f} exec/s    ray/local = {ratio:.2f}")
    print(
        f"no-op reward: local {r['local_noop']:7.1f} calls/s, ray {r['ray_noop']:7.1f} calls/s; per-call overhead "
        f"of Ray over the local pool {1e3 * (1 / r['ray_noop'] - 1 / r['local_noop']) * cores:+.2f} ms per core"
    )
    print(
        f"driver CPU per call: local {1e3 * r['local_driver_cpu_per_call']:.2f} ms, ray "
        f"{1e3 * r['ray_driver_cpu_per_call']:.2f} ms (code); "
        f"no-op: ray {1e3 * r['ray_noop_driver_cpu_per_call']:.2f} ms"
    )
    return r


def part2(max_nodes: int, seconds: float) -> list[tuple[int, float]]:
    import ray
    from ray.cluster_utils import Cluster

    from harness.scoring import ScoringSession
    from harness.scoring._ray import RayPool

    points = []
    for n in range(1, max_nodes + 1):
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        for _ in range(n - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        pool = RayPool(actors_per_node=1)
        try:
            with ScoringSession(["code"], cache=False, pool=pool) as s:
                _rate(s, 1.0, 4 * n)
                calls, wall, _ = _rate(s, seconds, 8 * n)
            used = sorted(pool.nodes)
        finally:
            pool.close()
            ray.shutdown()
            cluster.shutdown()
        points.append((n, calls / wall))
        print(f"{n} node(s) x 1 CPU ({len(used)} scoring): {calls / wall:7.1f} exec/s")
    return points


def model(r: dict[str, float], cores: int) -> None:
    t_exec = cores / r["local"]  # core-seconds per code execution, measured on the local pool
    d = r["ray_noop_driver_cpu_per_call"]
    print(
        f"cost model: t_exec = {1e3 * t_exec:.1f} core-ms per execution (measured), driver d = {1e3 * d:.2f} ms CPU "
        f"per call (measured, Ray no-op) -> throughput = 1 / max(t_exec / (N*C), d), ceiling {1 / d:.0f} calls/s"
    )
    for nodes in (1, 2, 4, 8, 16, 32, 64):
        c = 8
        rate = 1 / max(t_exec / (nodes * c), d)
        print(f"  {nodes:3d} nodes x {c} cores: {rate:8.0f} exec/s ({rate / (c / t_exec):5.1f}x one node)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="measured seconds per side (part 1) and per point")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds in part 1")
    ap.add_argument("--nodes", type=int, default=3, help="most Ray nodes started on this machine in part 2")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    r = part1(args.seconds, args.rounds)
    print(f"== scaling: 1..{args.nodes} Ray nodes on this machine (1 CPU each) ==")
    part2(args.nodes, args.seconds / 2)
    model(r, os.cpu_count() or 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
