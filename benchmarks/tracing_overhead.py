"""What tracing costs a tiny CPU GRPO run: tracing off, the file store only, and OTLP to a live backend.

One real training run (the trainer's own step function on the built-in toy task: a random-init ~77k-parameter
Qwen2-style model, G=8, 2 prompts per step, 16 new tokens) with three telemetry set-ups side by side: no
tracing, the file store, and the file store plus OTLP to a live backend. The mode changes every step, cycling
through all six orders of the three modes, so that a burst of load from elsewhere on a shared machine, the
model's own drift (completions grow as it learns) and the backend's batch ingest hit every mode alike. Step
time is each step's wall time; the report gives the median per mode, its ratio to the untraced median, and a
paired ratio (per cycle of three consecutive steps, then the median over cycles). Some tracing work lands in
single steps, which a median does not see: the file store writes traces in batches (one step in about 32
carries a batch's encoding), so the writer's own time per step is measured and added ("amortized"); with the
in-process OTLP fallback, so is the sender thread's CPU. The training process hands OTLP-JSON lines to an export
process, whose CPU per step is printed apart. The tracing calls alone (the same spans, no training) are timed
too, as a share of the median untraced step.

The OTLP mode starts ``mlflow server`` from ``.venv-mlflow`` (see ``tests/backends/setup_backends.sh``) on a
free port of 127.0.0.1 and stops its process group at the end; without that venv the mode is skipped, saying so.
The backend's own CPU per OTLP step is printed apart: on a 2-core machine its ingest competes with training
for the cores, and that is the backend's cost, not the exporter's.

Usage: OMP_NUM_THREADS=1 python benchmarks/tracing_overhead.py [--steps 300] [--warmup 20]
"""

from __future__ import annotations

import argparse
import itertools
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


PERMUTATIONS = list(itertools.permutations(range(3)))


def interleaved(steps: int, warmup: int, out: Path, otlp: dict | None) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Train ``warmup + 3 * steps`` steps, the mode changing every step; wall seconds of each measured step by
    mode, and per mode the seconds per step that the median cannot see: the batched trace writes (one step in
    about 32 carries a batch) and, for OTLP, the CPU of the sender thread.

    Uses the trainer's own set-up and step function (``trainer.loop``), with one telemetry object per mode.
    """
    from harness.cfg.telemetry import TelemetrySection
    from harness.config import load_config
    from harness.telemetry import RunTelemetry
    from trainer.loop import setup_training, train_step  # the step that trainer.train runs, minus its own telemetry

    cfg = load_config(ROOT / "examples" / "train_cpu.yaml", overrides={
        "run.output_dir": str(out), "run.id": "overhead", "trainer.max_steps": warmup + 3 * steps,
        "trainer.save_steps": 0, "telemetry": {"enabled": False}})
    ctx, _, _ = setup_training(cfg, False)
    tels = {"off": None, "file": RunTelemetry.start(out / "file", "overhead-file", TelemetrySection(), environ={})}
    modes = ["off", "file"]
    if otlp is not None:
        tels["otlp"] = RunTelemetry.start(out / "otlp", "overhead-otlp", TelemetrySection(**otlp), environ={})
        modes.append("otlp")
    times: dict[str, list[float]] = {m: [] for m in modes}
    step = 0
    try:
        for _ in range(warmup):
            step += 1
            train_step(ctx, step, tels[modes[step % len(modes)]])
        exporter = tels["otlp"].exporter if otlp is not None else None
        thread = getattr(exporter, "_thread", None)  # an in-process sender (when no export process could start)
        proc = getattr(exporter, "_proc", None)  # the export process
        cpu0 = _thread_cpu_s(thread.native_id) if thread is not None else 0.0
        proc0 = _proc_cpu_s(proc.pid) if proc is not None else 0.0
        busy0 = {m: tels[m]._file_store.busy_s for m in modes if tels[m] is not None}
        for cycle in range(steps):
            for i in PERMUTATIONS[cycle % len(PERMUTATIONS)]:
                if i >= len(modes):
                    continue
                step += 1
                t = time.perf_counter()
                train_step(ctx, step, tels[modes[i]])
                times[modes[i]].append(time.perf_counter() - t)
        extra = {m: (tels[m]._file_store.busy_s - busy0[m]) / steps for m in busy0}  # batch writes, amortized
        if thread is not None:
            extra["otlp"] += (_thread_cpu_s(thread.native_id) - cpu0) / steps
        if proc is not None:
            extra["export process"] = (_proc_cpu_s(proc.pid) - proc0) / steps
    finally:
        ctx.session.close()
        for tel in tels.values():
            if tel is not None:
                tel.shutdown()
    return times, extra


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_cpu_s(tid: int) -> float:
    """User + system CPU seconds of one thread of this process (Linux /proc)."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    ap.add_argument("--steps", type=int, default=300, help="measured steps per mode")
    ap.add_argument("--warmup", type=int, default=20, help="steps before measuring (all modes)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import trainer.loop  # noqa: F401
    except ImportError as e:
        print(f"the trainer is not importable ({e}); nothing to measure")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        server = start_mlflow(out)
        otlp = None
        if server is not None:
            otlp = {"otlp_endpoint": server[1] + "/v1/traces",
                    "otlp_headers": {"x-mlflow-experiment-id": _experiment(server[1])}}
        try:
            before = group_cpu_s(server[0].pid) if server is not None else 0.0
            times, extra = interleaved(args.steps, args.warmup, out, otlp)
            backend_ms = (group_cpu_s(server[0].pid) - before) / args.steps * 1000 if server is not None else None
            micro = tracing_only_ms(MICRO_STEPS, out, otlp)
        finally:
            if server is not None:
                os.killpg(server[0].pid, signal.SIGTERM)
                server[0].wait(timeout=30)
    base = statistics.median(times["off"])
    print(f"tiny CPU GRPO, one run, the mode changing every step: {args.steps} measured steps per mode "
          f"after {args.warmup} warm-up steps")
    print(f"{'mode':<6} {'median step ms':>15} {'ratio':>7} {'paired ratio':>13} {'+ amortized ms':>15} "
          f"{'added':>8}")
    for mode, ts in times.items():
        med = statistics.median(ts)
        paired = statistics.median(t / b for t, b in zip(ts, times["off"]))
        more = extra.get(mode, 0.0)
        print(f"{mode:<6} {med * 1000:>15.2f} {med / base:>7.3f} {paired:>13.3f} {more * 1000:>15.3f} "
              f"{(paired - 1 + more / base) * 100:>7.2f}%")
    print("paired ratio: the median, over cycles, of a step's time against the untraced step of the same cycle;")
    print("amortized: the batched trace writes (and the OTLP sender thread's CPU) per step, which land in single steps")
    print("added: paired ratio - 1 plus the amortized time, as a share of the untraced median step")
    if "export process" in extra:
        print(f"OTLP export process (protobuf encoding and sending, outside the training process): "
              f"{extra['export process'] * 1000:.3f} ms CPU per OTLP step")
    print(f"tracing alone, {MICRO_STEPS} steps without training, share of the median untraced step's wall time:")
    for mode, (ms, cms, flush_s) in micro.items():
        print(f"  {mode}: calls {ms:.3f} ms wall ({ms / (base * 1000) * 100:.2f}%), all tracing work {cms:.3f} ms "
              f"CPU ({cms / (base * 1000) * 100:.2f}%); shutdown flush {flush_s:.2f} s once")
    if backend_ms is not None:
        print(f"backend (mlflow server, same machine): {backend_ms:.1f} ms CPU per OTLP step, its own ingest; on a "
              "small machine it competes with training for the cores, whatever the mode of the step at hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
