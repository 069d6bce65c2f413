"""What tracing costs a tiny CPU GRPO run: tracing off, the file store only, and OTLP to a live backend.

Runs the real trainer (``trainer.train``) on the built-in toy task (a random-init ~77k-parameter Qwen2-style
model, G=8, 2 prompts per step, 16 new tokens) once per mode and round, modes interleaved and their order
rotated per round so that machine load hits all of them alike. Step time is the wall time between consecutive
``on_step`` callbacks (warm-up steps and the final checkpoint save left out); the median is reported, pooled
over rounds, and as a paired ratio (per round against that round's untraced run, then the median over rounds),
beside the median CPU time of this process per step (which includes the trace writer and OTLP sender
threads and is less sensitive than wall time to other processes' load; reward workers are not in it). Because a 0.1 s step on a shared 2-core machine jitters by more than the 2 % goal, it also times
the tracing calls alone (the same spans, no training) and prints them as a share of the median step.

The OTLP mode starts ``mlflow server`` from ``.venv-mlflow`` (see ``tests/backends/setup_backends.sh``) on a
free port of 127.0.0.1 and stops its process group at the end; without that venv the mode is skipped, saying so.

Usage: OMP_NUM_THREADS=1 python benchmarks/tracing_overhead.py [--steps 30] [--rounds 4] [--warmup 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MICRO_STEPS = 500


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow(workdir: Path) -> tuple[subprocess.Popen, str] | None:
    py = ROOT / ".venv-mlflow" / "bin" / "python"
    if not py.exists():
        print(f"otlp mode skipped: {py} missing (create it with tests/backends/setup_backends.sh mlflow)")
        return None
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    log = open(workdir / "mlflow.log", "wb")
    proc = subprocess.Popen([str(py), "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1", "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}",
                             "--default-artifact-root", str(workdir / "art")],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return proc, url
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    print("otlp mode skipped: mlflow server not ready in 120 s")
    return None


def _experiment(url: str) -> str:
    req = urllib.request.Request(url + "/api/2.0/mlflow/experiments/create",
                                 data=json.dumps({"name": "overhead"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["experiment_id"]


def run_mode(mode: str, steps: int, out: Path, otlp: dict | None, tag: str) -> tuple[list[float], list[float]]:
    """Train ``steps`` steps in ``mode``; returns the wall time and this process's CPU time of each step (s)."""
    from harness.config import load_config
    from trainer.loop import train

    tel: dict = {"enabled": mode != "off"}
    if mode == "otlp":
        tel.update(otlp or {})
    cfg = load_config(ROOT / "examples" / "train_cpu.yaml", overrides={
        "run.output_dir": str(out), "run.id": f"{mode}-{tag}", "trainer.max_steps": steps,
        "trainer.save_steps": 0, "telemetry": tel})
    stamps: list[tuple[float, float]] = []
    t0 = (time.perf_counter(), time.process_time())
    train(cfg, progress=False, on_step=lambda s, m: stamps.append((time.perf_counter(), time.process_time())))
    marks = [t0, *stamps]
    wall = [b[0] - a[0] for a, b in zip(marks, marks[1:])][:-1]  # the last step includes the checkpoint save
    cpu = [b[1] - a[1] for a, b in zip(marks, marks[1:])][:-1]
    return wall, cpu


def tracing_only_ms(n: int, out: Path, otlp: dict | None) -> dict[str, tuple[float, float, float]]:
    """Per step: wall ms of the tracing calls, CPU ms of tracing in this process; and the shutdown flush in s.

    The trainer's step is replaced by nothing: each step records the trainer's number of metrics and one reward.
    CPU time includes the trace writer and OTLP sender threads and the final flush; wall time is what the
    training loop itself waits for (the flush happens once, at shutdown, and is reported apart).
    """
    from harness.cfg.telemetry import TelemetrySection
    from harness.telemetry import RewardStats, RunTelemetry

    metrics = {f"m{i}": 0.5 for i in range(24)}  # about as many numeric metrics as the trainer records
    stats = RewardStats.from_values([0.1 * (i % 8) for i in range(16)], group_size=8, latencies_s=[0.001] * 16)
    res = {}
    for mode, cfg in (("file", TelemetrySection()), ("otlp", TelemetrySection(**(otlp or {})))):
        if mode == "otlp" and otlp is None:
            continue
        tel = RunTelemetry.start(out / f"micro-{mode}", "micro", cfg)
        t0, c0 = time.perf_counter(), time.process_time()
        for step in range(1, n + 1):
            with tel.train_step(step) as st:
                st.set_metrics(metrics)
                st.record_reward("char_count", stats)
        t1 = time.perf_counter()
        tel.shutdown()
        t2 = time.perf_counter()
        res[mode] = ((t1 - t0) * 1000 / n, (time.process_time() - c0) * 1000 / n, t2 - t1)
    return res


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process in process group ``pgid`` (Linux /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of stat: pgrp
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import trainer.loop  # noqa: F401
        from transformers.utils import logging as hf_logging
    except ImportError as e:
        print(f"the trainer is not importable ({e}); nothing to measure")
        return 1
    hf_logging.disable_progress_bar()  # the final checkpoint's save bar, once per run
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        server = start_mlflow(out)
        otlp = None
        modes = ["off", "file"]
        if server is not None:
            otlp = {"otlp_endpoint": server[1] + "/v1/traces",
                    "otlp_headers": {"x-mlflow-experiment-id": _experiment(server[1])}}
            modes.append("otlp")
        try:
            times: dict[str, list[float]] = {m: [] for m in modes}
            cpu: dict[str, list[float]] = {m: [] for m in modes}
            rounds: dict[str, list[float]] = {m: [] for m in modes}
            backend_cpu: list[float] = []
            for mode in modes:  # unmeasured: first-use costs (imports, the backend's lazy set-up) land here
                run_mode(mode, max(args.warmup + 5, 10), out, otlp, "warm")
            for r in range(args.rounds):
                order = modes if r % 2 == 0 else modes[::-1]
                for mode in order:
                    before = group_cpu_s(server[0].pid) if mode == "otlp" else 0.0
                    wall, proc = run_mode(mode, args.steps, out, otlp, str(r))
                    if mode == "otlp":
                        backend_cpu.append((group_cpu_s(server[0].pid) - before) / args.steps * 1000)
                    times[mode] += wall[args.warmup:]
                    cpu[mode] += proc[args.warmup:]
                    rounds[mode].append(statistics.median(wall[args.warmup:]) * 1000)
            micro = tracing_only_ms(MICRO_STEPS, out, otlp)
        finally:
            if server is not None:
                os.killpg(server[0].pid, signal.SIGTERM)
                server[0].wait(timeout=30)
    base = statistics.median(times["off"])
    base_cpu = statistics.median(cpu["off"])
    print(f"tiny CPU GRPO, {args.rounds} rounds x {args.steps} steps per mode ({args.warmup} warm-up steps dropped "
          f"per run, one unmeasured warm-up run per mode first)")
    print(f"{'mode':<6} {'median step ms':>15} {'ratio':>7} {'paired ratio':>13} {'median CPU ms':>14} {'ratio':>7}"
          f"  per-round median ms")
    for mode in modes:
        med, mc = statistics.median(times[mode]), statistics.median(cpu[mode])
        paired = statistics.median(x / b for x, b in zip(rounds[mode], rounds["off"]))
        per_round = " ".join(f"{x:.1f}" for x in rounds[mode])
        print(f"{mode:<6} {med * 1000:>15.1f} {med / base:>7.3f} {paired:>13.3f} {mc * 1000:>14.1f} "
              f"{mc / base_cpu:>7.3f}  {per_round}")
    print("paired ratio: the median over rounds of (this mode's median step / the untraced median step of the same "
          "round); machine load drifts between rounds, far less within one")
    print(f"tracing alone, {MICRO_STEPS} steps without training, share of the median untraced step's wall time:")
    for mode, (ms, cms, flush_s) in micro.items():
        print(f"  {mode}: calls {ms:.3f} ms wall ({ms / (base * 1000) * 100:.2f}%), all tracing work {cms:.3f} ms "
              f"CPU ({cms / (base * 1000) * 100:.2f}%); shutdown flush {flush_s:.2f} s once")
    if backend_cpu:
        print("backend (mlflow server, same machine) CPU per training step, per otlp round: "
              + " ".join(f"{x:.1f} ms" for x in backend_cpu)
              + " (on a 2-core machine a local backend competes with training for the cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
