"""The Ray scoring backend on a real local Ray instance (2 CPUs on 127.0.0.1, one instance for this module).

Each test compares with the local pool or with a property the local pool has: the same verdicts on ordinary and
hostile rows of the code, math and format rewards; a hanging plugin costs its limit per call; a crashing plugin
leaves only its own sample unscored; an actor killed mid-batch fails only the calls it held; a sandbox host killed
is started again; a plugin that does not import on a node is an error naming the node; ``harness train`` and
``harness score`` run with the backend.
Real parts throughout: Ray, the sandbox, the trainer's tiny random-init toy model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import ray_plugins  # noqa: F401  (registers test_ray_sleep here; the nodes import it by name)
import yaml

from harness.errors import ScoringError
from harness.registry import default_registry
from harness.scoring import ScoringSession

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def ray_pool():
    """One local Ray instance and one pool of 2 actors (one per CPU) for the whole module: the process-wide pool,
    so ``harness train`` with ``scoring.backend: ray`` below finds it too."""
    from harness.scoring._ray import ray_pool as process_pool
    from harness.scoring._ray import shutdown_ray_pools

    path = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2,
        address="local",
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        object_store_memory=100 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": path}},  # the test plugins, importable on the node
    )
    pool = process_pool()
    yield pool
    shutdown_ray_pools()
    ray.shutdown()


CODE = "```python\n{}\n```"
CODE_ROWS = [  # (tests, solution): ordinary rows, then hostile ones
    ("assert add(2, 3) == 5\nassert add(-1, 1) == 0", "def add(a, b):\n    return a + b"),
    ("assert add(2, 3) == 5", "def add(a, b):\n    return a - b"),
    ("assert add(2, 3) == 5", "def add(a, b):\n    return (a + b"),
    ("assert add(2, 3) == 5", "def add(a, b):\n    while True:\n        pass"),
    ("assert add(2, 3) == 5", "def add(a, b):\n    raise RuntimeError('no')"),
    ("assert add(2, 3) == 5", "import os\nwhile True:\n    os.fork()"),
    (
        "assert add(2, 3) == 5",
        "import socket\ns = socket.create_connection(('1.1.1.1', 80), timeout=2)\ndef add(a, b):\n    return a + b",
    ),
    ("assert add(2, 3) == 5", "print(open('/etc/shadow').read())\ndef add(a, b):\n    return a + b"),
    ("assert add(2, 3) == 5", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
    ("assert add(2, 3) == 5", "import sys\nprint('PASS')\nsys.exit(0)"),
    ("assert add(2, 3) == 5", "x = bytearray(8 * 1024 ** 3)\ndef add(a, b):\n    return a + b"),
]
MATH_ROWS = [("4", "\\boxed{4}"), ("4", "\\boxed{5}"), ("1/2", "\\boxed{0.5}"), ("4", "\\boxed{9^{9^{9^{9}}}}")]
MATH_ROWS += [("4", "\\boxed{" * 500 + "4" + "}" * 500), ("4", "no answer at all")]
FORMAT_ROWS = ["Answer: 42", "answer 42", "(a+)+$" + "a" * 40 + "!"]


def _table(session: ScoringSession, rows: list[tuple[dict, str]]) -> tuple[list[tuple[Any, ...]], Any]:
    res = session.score([s for s, _ in rows], [c for _, c in rows])
    return [tuple((s.status, s.value) for s in res.row(i).values()) for i in range(len(rows))], res


def test_same_verdicts_as_the_local_pool_on_code_math_and_format_with_hostile_rows(ray_pool):
    code = [({"id": f"c{i}", "tests": t}, CODE.format(sol)) for i, (t, sol) in enumerate(CODE_ROWS)]
    math = [({"id": f"m{i}", "answer": a}, c) for i, (a, c) in enumerate(MATH_ROWS)]
    fmt = [({"id": f"f{i}"}, c) for i, c in enumerate(FORMAT_ROWS)]
    specs = {
        "code": [{"name": "code", "params": {"timeout": 1.0, "memory_mb": 256}}],  # hostile rows hit caps sooner
        "math": ["math"],
        "fmt": [{"name": "format_regex", "params": {"pattern": "^Answer: \\d+$"}}, "boxed_present"],
    }
    tables = {}
    for kind, rows in (("code", code), ("math", math), ("fmt", fmt)):
        with ScoringSession(specs[kind], timeout=20, cache=False) as local:
            want, _ = _table(local, rows)
        with ScoringSession(specs[kind], timeout=20, cache=False, pool=ray_pool) as on_ray:
            got, res = _table(on_ray, rows)
        assert got == want, kind
        tables[kind] = got
        process = [s for s in res.specs if s.name != "boxed_present"]
        assert all(n in ray_pool.nodes for s in process for n in res.nodes[s.name]), res.nodes
    statuses = [row[0][0] for row in tables["code"]]
    assert statuses[0] == "pass" and statuses[1] == "fail"
    assert "pass" not in statuses[5:], statuses  # no hostile row passes
    assert tables["math"][0][0] == ("ok", 1.0) and tables["math"][1][0][1] == 0.0


def test_one_sandbox_server_per_node_serves_every_actor(ray_pool):
    psutil = pytest.importorskip("psutil")
    rows = [({"id": f"s{i}", "tests": "assert add(1, 1) == 2"}, CODE.format(CODE_ROWS[0][1])) for i in range(6)]
    with ScoringSession(["code"], cache=False, pool=ray_pool) as session:
        res = session.score([s for s, _ in rows], [c for _, c in rows])
    assert [s.status for s in res.scores["code"]] == ["pass"] * 6
    (node,) = ray_pool.nodes.values()
    assert res.scores["code"][0].info["isolation"] == node["isolation"]
    actors = set(_actor_pids(ray_pool))
    # one snapshot of the process table: a process of another test (a parallel worker) may exit between calls
    table = {p.info["pid"]: p.info for p in psutil.process_iter(["pid", "ppid", "cmdline"])}
    servers = [pid for pid, info in table.items() if "sandbox._zygote" in " ".join(info["cmdline"] or ())]

    def ancestors(pid: int) -> set[int]:
        seen: set[int] = set()
        while pid in table and table[pid]["ppid"] not in seen and table[pid]["ppid"]:
            pid = table[pid]["ppid"]
            seen.add(pid)
        return seen

    under_host = [pid for pid in servers if table[pid]["ppid"] == node["sandbox_host_pid"]]
    under_actors = [pid for pid in servers if actors & ancestors(pid)]
    assert len(under_host) == 1 and not under_actors, (len(under_host), len(under_actors))


def test_hanging_plugin_costs_its_limit_per_call(ray_pool):
    with ScoringSession(["test_hang"], timeout=1.0, cache=False, pool=ray_pool) as session:
        session.score([{"id": "warm"}], ["x"])  # the plugin's first build, outside the clock below
        t0 = time.monotonic()
        pending = session.submit([{"id": str(i)} for i in range(10)], ["x"] * 10)
        assert not pending.done()  # submit only queues: generation goes on while the cluster scores
        res = pending.result()
        elapsed = time.monotonic() - t0
    assert [s.status for s in res.scores["test_hang"]] == ["timeout"] * 10
    assert all(s.value is None for s in res.scores["test_hang"])
    # 10 calls at 1 s on 2 actors: 5 s of limits plus a kill each; 20 s is the goal (measured 5-7 s, loaded)
    assert elapsed < 20, elapsed


def test_crashing_plugin_leaves_only_its_sample_unscored(ray_pool):
    comps = ["ok", "exit", "fine", "segfault", "raise", "sysexit", "good"]
    samples = [{"id": str(i)} for i in range(len(comps))]
    with ScoringSession(["test_faulty"], timeout=10, cache=False) as local:
        want = [(s.status, s.value) for s in local.score(samples, comps).scores["test_faulty"]]
    with ScoringSession(["test_faulty"], timeout=10, cache=False, pool=ray_pool) as session:
        res = session.score(samples, comps)
    got = [(s.status, s.value) for s in res.scores["test_faulty"]]
    assert got == want
    assert got[0] == ("ok", 2.0) and got[2] == ("ok", 4.0) and got[6] == ("ok", 4.0)
    assert got[1] == ("error", None) and got[3] == ("error", None) and got[4] == ("error", None)


def test_cache_answers_repeats_as_on_the_local_pool(ray_pool):
    with ScoringSession(["test_counter"], cache=64, pool=ray_pool) as session:
        first = session.score([{"id": "1"}, {"id": "2"}], ["ab", "abc"])
        again = session.score([{"id": "1"}, {"id": "2"}], ["ab", "abc"])
    assert first.cached["test_counter"] == 0 and again.cached["test_counter"] == 2
    assert [s.info for s in again.scores["test_counter"]] == [s.info for s in first.scores["test_counter"]]
    assert first.nodes["test_counter"] == [next(iter(ray_pool.nodes))] * 2 and again.nodes["test_counter"] == [None] * 2


def _actor_pids(pool) -> dict:
    infos = ray.get([a.handle.info.remote() for a in pool._actors if a.alive])
    return {i["pid"]: i["node"] for i in infos}


def test_actor_lost_mid_batch_fails_its_calls_and_the_batch_goes_on(ray_pool):
    spec = [{"name": "test_ray_sleep", "params": {"seconds": 1.0}}]
    with ScoringSession(spec, timeout=20, cache=False, pool=ray_pool) as session:
        session.score([{"id": "warm"}] * 2, ["x"] * 2)
        victim = next(iter(_actor_pids(ray_pool)))
        pending = session.submit([{"id": str(i)} for i in range(8)], ["x"] * 8)
        time.sleep(0.5)  # every actor holds a call now
        assert all(len(a.calls) <= ray_pool.inflight_per_actor for a in ray_pool._actors)  # bounded in-flight work
        os.kill(victim, signal.SIGKILL)
        res = pending.result(timeout=120)
        after = session.score([{"id": f"a{i}"} for i in range(2)], ["x"] * 2)  # the replaced actor serves again
    statuses = [s.status for s in res.scores["test_ray_sleep"]]
    assert "error" in statuses and "ok" in statuses, statuses
    for s in res.scores["test_ray_sleep"]:
        assert (s.status, s.value) in (("ok", 1.0), ("error", None))
        if s.status == "error":
            assert "lost during the call" in s.info["reason"], s.info
    assert [s.status for s in after.scores["test_ray_sleep"]] == ["ok"] * 2
    assert ray_pool.size == 2 and victim not in _actor_pids(ray_pool)


def test_a_dead_sandbox_host_is_started_again_and_the_next_calls_pass(ray_pool):
    """The node's sandbox host is killed: the pool starts a new one at the same relay path, and the workers, whose
    connections went to the dead one, reconnect on their next call (before: every later code call sandbox_error)."""
    from fake_clock import wait_until

    rows = [({"id": f"h{i}", "tests": "assert add(1, 1) == 2"}, CODE.format(CODE_ROWS[0][1])) for i in range(4)]
    samples, comps = [s for s, _ in rows], [c for _, c in rows]
    with ScoringSession(["code"], cache=False, pool=ray_pool) as session:
        before = session.score(samples, comps)  # every worker has a connection to the host now
        (node,) = ray_pool.nodes.values()
        dead, relay = node["sandbox_host_pid"], node["relay"]
        os.kill(dead, signal.SIGKILL)
        wait_until(lambda: node["sandbox_host_pid"] != dead, "a new sandbox host is started", timeout=120)
        after = session.score(samples, comps)
    assert [s.status for s in before.scores["code"]] == ["pass"] * 4
    assert [s.status for s in after.scores["code"]] == ["pass"] * 4, [s.info for s in after.scores["code"]]
    assert node["relay"] == relay and node["isolation"] == before.scores["code"][0].info["isolation"]


def test_plugin_that_fails_to_import_on_a_node_is_an_error_naming_the_node(ray_pool, tmp_path):
    from harness.plugins import add_plugins
    from harness.scoring._ray import RayPool

    plugin = tmp_path / "driver_only_reward.py"
    plugin.write_text(
        "import os\nfrom harness import Score, reward\n"
        f"if os.getpid() != {os.getpid()}:\n    raise ImportError('this module imports only in the driver')\n"
        "@reward('driver_only_reward', isolation='inline')\ndef f():\n    return lambda s, c: Score(value=1.0)\n"
    )
    reg = default_registry()
    before = list(reg.plugins)
    try:
        add_plugins([str(plugin)])
        with pytest.raises(ScoringError, match=r"failed to import on scoring node \S+#\w+") as err:
            RayPool(actors_per_node=1)
        assert "driver_only_reward.py" in str(err.value) and "only in the driver" in str(err.value)
    finally:
        reg.plugins[:] = before


def test_harness_train_three_steps_then_eval_with_scoring_backend_ray(ray_pool, tmp_path):
    from harness.cli import main as harness_main

    cfg = {
        "run": {"id": "ray-train", "output_dir": str(tmp_path / "runs"), "seed": 0},
        "model": {"name_or_path": "toy:char"},
        "data": {"train": "toy:8", "chat_template": False},
        "rewards": {
            "char_count": {"weight": 1.0, "params": {"char": "a", "norm": 8.0}},
            "format_regex": {"weight": 0.5, "params": {"pattern": "a"}},
        },
        "scoring": {"backend": "ray"},
        "trainer": {
            "num_generations": 4,
            "prompts_per_step": 1,
            "max_prompt_length": 16,
            "max_completion_length": 8,
            "max_steps": 3,
            "save_steps": 3,
            "lr": 1e-3,
            "monitors": {"truncated_frac": 1.0},
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert harness_main(["train", "--config", str(path), "--no-progress"]) == 0
    node = next(iter(ray_pool.nodes))
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps({"id": f"h{i}", "prompt": f"{c}{c}:"}) + "\n" for i, c in enumerate("ab")))
    ckpt = tmp_path / "runs" / "ray-train" / "checkpoints" / "step-000003"
    eval_args = ["eval", "--checkpoint", str(ckpt), "--data", str(held), "--no-progress", "--scoring-backend", "ray"]
    assert harness_main(eval_args) == 0
    res = json.loads((tmp_path / "runs" / "ray-train" / "eval" / "step-000003" / "results.json").read_text())
    assert res["rewards"]["format_regex"]["nodes"] == {node: res["rewards"]["format_regex"]["count"]}
    assert "nodes" not in res["rewards"]["char_count"]  # inline: scored in this process
    from harness.telemetry import iter_spans

    spans_by_name = {s["name"]: s for s in iter_spans(tmp_path / "runs" / "ray-train" / "traces.jsonl")}
    assert spans_by_name["eval.reward/format_regex"]["attributes"]["harness.reward.nodes"] == [node]
    assert spans_by_name["reward/format_regex"]["attributes"]["harness.reward.nodes"] == [node]


def test_harness_score_code_with_scoring_backend_ray_matches_local(tmp_path):
    rows = [{"id": str(i), "tests": t, "completion": CODE.format(sol)} for i, (t, sol) in enumerate(CODE_ROWS[:5])]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dst = tmp_path / "ray.jsonl"
    cmd = [sys.executable, "-m", "harness", "score", "--reward", "code", "--input", str(src), "--output", str(dst)]
    cmd += ["--scoring-backend", "ray"]  # no address: the command starts and stops its own Ray
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads(line)["scores"]["code"] for line in dst.open()]
    with ScoringSession(["code"], timeout=30, cache=False) as local:  # harness score's default limit
        want = local.score(
            [{k: v for k, v in r.items() if k != "completion"} for r in rows], [r["completion"] for r in rows]
        )
    assert [(s["status"], s["value"]) for s in got] == [(s.status, s.value) for s in want.scores["code"]]
    assert got[0]["status"] == "pass" and got[1]["status"] == "fail"


def test_eval_task_with_scoring_backend_ray_scores_on_the_nodes(ray_pool, tmp_path):
    from harness.cli import main as harness_main

    out = tmp_path / "out"
    args = ["eval", "--task", "humaneval", "--backend", "reference", "--limit", "3", "--output", str(out)]
    # a time limit of its own: other tests in this process scored these solutions, and the shared cache would answer
    args += ["--reward", "code", "--param", "code.complete_prompt=true", "--param", "code.timeout=9.5"]
    assert harness_main([*args, "--no-progress", "--no-telemetry", "--scoring-backend", "ray"]) == 0
    res = json.loads((out / "humaneval" / "results.json").read_text())
    node = next(iter(ray_pool.nodes))
    assert res["rewards"]["code"]["nodes"] == {node: 3}  # the task's code reward ran on the Ray node
    assert res["rewards"]["code"]["mean"] == 1.0  # the canonical solutions pass there too
