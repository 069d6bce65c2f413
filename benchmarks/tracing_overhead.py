"""What tracing costs a GRPO run: tracing off, the file store only, and the file store plus OTLP over
http/protobuf and over grpc to a live collector.

One real training run (the trainer's own step function; by default on the built-in toy task: a random-init
~77k-parameter Qwen2-style model, G=8, 2 prompts per step, 16 new tokens, about 20 ms a step; ``--config`` runs
any other config, SmolLM2-135M for a real step) with the telemetry set-ups side by side. The mode changes every
step, cycling through every order of the modes, so that a burst of load from elsewhere on a shared machine, the
model's own drift and the collector's ingest hit every mode alike. Step time is each step's wall time; the
report gives the median per mode, its ratio to the untraced median, and a paired ratio (per cycle, against the
untraced step of the same cycle; then the median over cycles).

Tracing work that does not land in the step it belongs to is measured and added ("amortized"): the CPU time of
the threads each telemetry set-up started (the SDK's batch processors encode and send there), any batched
writes made in the training thread, and, apart, the CPU of any export process it started. The tracing calls
alone (the same spans, no training) are timed too, as a share of the median untraced step.

The collector is a small process started here (``--sink``) that accepts OTLP over http/protobuf and grpc and
does nothing with it, so that what is measured is the exporter's cost, not a backend's ingest.

Usage: OMP_NUM_THREADS=1 python benchmarks/tracing_overhead.py [--steps 300] [--warmup 20]
       [--config RUN.yaml] [--modes off,file,http,grpc]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MICRO_STEPS = 500
TICK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sink(http_port: int, grpc_port: int) -> None:
    """The collector process: answers every OTLP export (http/protobuf and grpc) with success, keeps nothing."""
    import http.server
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    server.start()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", http_port), Handler).serve_forever()


def start_sink() -> tuple[subprocess.Popen, dict[str, dict[str, Any]]]:
    hp, gp = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--sink", str(hp), str(gp)], start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", hp), timeout=1), socket.create_connection(("127.0.0.1", gp)):
                break
        except OSError:
            time.sleep(0.2)
    return proc, {
        "http": {"otlp_endpoint": f"http://127.0.0.1:{hp}/v1/traces", "otlp_protocol": "http/protobuf"},
        "grpc": {"otlp_endpoint": f"http://127.0.0.1:{gp}", "otlp_protocol": "grpc"},
    }


def _thread_cpu_s(ident: int) -> float:
    """CPU seconds of a live thread of this process (its POSIX CPU clock, ns resolution); 0 once it has ended."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ProcessLookupError):
        return 0.0


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _reaped_s() -> float:
    """CPU seconds of this process's children that have ended and been waited for."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Traced:
    """One telemetry set-up and what it started: its threads and any export process."""

    def __init__(self, out: Path, mode: str, section: dict[str, Any] | None) -> None:
        from harness.cfg.telemetry import TelemetrySection
        from harness.telemetry import RunTelemetry

        before_t = {t.ident for t in threading.enumerate()}
        before_p = _children()
        self.tel = RunTelemetry.start(out / mode, f"overhead-{mode}", TelemetrySection(**(section or {})), environ={})
        time.sleep(0.5)  # an export process is up
        started = [t for t in threading.enumerate() if t.ident not in before_t]
        self.threads = [t.ident for t in started]
        self.names = sorted(t.name for t in started)
        self.procs = sorted(_children() - before_p)

    def inline_s(self) -> float:
        """Seconds of batched writes made in the training thread (a writer with ``busy_s``), else 0."""
        return float(getattr(self.tel._file_store, "busy_s", 0.0))

    def threads_s(self) -> float:
        return sum(_thread_cpu_s(t) for t in self.threads if t is not None)

    def procs_s(self) -> float:
        return sum(_proc_cpu_s(p) for p in self.procs)


def interleaved(args: argparse.Namespace, out: Path, otlp: dict[str, dict[str, Any]]):
    """Train ``warmup + len(modes) * steps`` steps, the mode changing every step; wall seconds of each measured step
    by mode, the amortized seconds per step by mode, and the export process CPU per step by mode."""
    from harness.config import load_config
    from trainer.loop import setup_training, train_step

    steps, warmup = args.steps, args.warmup
    cfg_path = Path(args.config) if args.config else ROOT / "examples" / "train_cpu.yaml"
    overrides = {"run.output_dir": str(out), "run.id": "overhead", "trainer.max_steps": warmup + 4 * steps + 4,
                 "trainer.save_steps": 0, "telemetry": {"enabled": False}}
    for kv in args.set or []:
        k, v = kv.split("=", 1)
        overrides[k] = v
    cfg = load_config(cfg_path, overrides=overrides)
    ctx, _, _ = setup_training(cfg, False)
    modes = args.modes
    traced = {m: (Traced(out, m, {} if m == "file" else otlp[m]) if m != "off" else None) for m in modes}
    times: dict[str, list[float]] = {m: [] for m in modes}
    perms = list(itertools.permutations(range(len(modes))))
    step = 0
    try:
        for _ in range(warmup):
            step += 1
            m = modes[step % len(modes)]
            train_step(ctx, step, traced[m].tel if traced[m] else None)
        base = {m: (t.inline_s(), t.threads_s(), t.procs_s()) for m, t in traced.items() if t is not None}
        for cycle in range(steps):
            for i in perms[cycle % len(perms)]:
                step += 1
                m = modes[i]
                t = time.perf_counter()
                train_step(ctx, step, traced[m].tel if traced[m] else None)
                times[m].append(time.perf_counter() - t)
        for m, t in traced.items():
            if t is not None:
                print(f"{m}: threads started {t.names}, processes started {len(t.procs)}")
        amortized = {m: (t.inline_s() - base[m][0] + t.threads_s() - base[m][1]) / steps for m, t in traced.items()
                     if t is not None}
        export_proc = {m: (t.procs_s() - base[m][2]) / steps for m, t in traced.items() if t is not None and t.procs}
    finally:
        ctx.session.close()
        for t in traced.values():
            if t is not None:
                t.tel.shutdown()
    return times, amortized, export_proc


def tracing_only(n: int, out: Path, modes: list[str], otlp: dict[str, dict[str, Any]]) -> dict[str, tuple]:
    """Per mode: wall ms of the tracing calls per step, CPU ms of all tracing work per step (threads included,
    the final flush too), and the shutdown flush in s. Each step records ~24 metrics and one reward."""
    from harness.telemetry import RewardStats

    metrics = {f"m{i}": 0.5 for i in range(24)}  # about as many numeric metrics as the trainer records
    stats = RewardStats.from_values([0.1 * (i % 8) for i in range(16)], group_size=8, latencies_s=[0.001] * 16)
    res = {}
    for mode in modes:
        if mode == "off":
            continue
        tr = Traced(out / "micro", mode, {} if mode == "file" else otlp[mode])
        t0, c0, p0 = time.perf_counter(), time.process_time(), tr.procs_s() + _reaped_s()
        for step in range(1, n + 1):
            with tr.tel.train_step(step) as st:
                st.set_metrics(metrics)
                st.record_reward("char_count", stats)
        t1 = time.perf_counter()
        tr.tel.shutdown()  # an export process ends and is reaped here: its CPU is then the children's
        t2 = time.perf_counter()
        proc_ms = (_reaped_s() - p0) * 1000 / n if tr.procs else 0.0
        res[mode] = ((t1 - t0) * 1000 / n, (time.process_time() - c0) * 1000 / n, t2 - t1, proc_ms)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="measured steps per mode")
    ap.add_argument("--warmup", type=int, default=20, help="steps before measuring (all modes)")
    ap.add_argument("--config", help="run config to train (default: examples/train_cpu.yaml, the toy task)")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override (repeatable)")
    ap.add_argument("--modes", default="off,file,http,grpc", help="comma-separated, from off,file,http,grpc")
    ap.add_argument("--micro", type=int, default=MICRO_STEPS, help="steps of the tracing-only measurement")
    ap.add_argument("--sink", nargs=2, type=int, metavar=("HTTP_PORT", "GRPC_PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sink:
        sink(*args.sink)
        return 0
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "off" not in args.modes:
        args.modes.insert(0, "off")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    proc, otlp = start_sink()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            times, amortized, export_proc = interleaved(args, out, otlp)
            micro = tracing_only(args.micro, out, args.modes, otlp)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    base = statistics.median(times["off"])
    print(f"{args.config or 'toy task'}: one run, the mode changing every step, {args.steps} measured steps per mode "
          f"after {args.warmup} warm-up steps; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'mode':<6} {'median step ms':>15} {'ratio':>7} {'paired ratio':>13} {'+ amortized ms':>15} {'added':>8}"
          f" {'export proc ms':>15}")
    for mode, ts in times.items():
        med = statistics.median(ts)
        paired = statistics.median(t / b for t, b in zip(ts, times["off"], strict=True))
        more = amortized.get(mode, 0.0)
        print(f"{mode:<6} {med * 1000:>15.2f} {med / base:>7.3f} {paired:>13.3f} {more * 1000:>15.3f} "
              f"{(paired - 1 + more / base) * 100:>7.2f}% {export_proc.get(mode, 0.0) * 1000:>15.3f}")
    print("paired ratio: the median, over cycles, of a step's time against the untraced step of the same cycle;")
    print("amortized: CPU of the threads the set-up started plus batched writes in the training thread, per step")
    print("added: paired ratio - 1 plus the amortized time, as a share of the untraced median step")
    print("export proc: CPU per step of an export process outside training (none on the SDK path)")
    print(f"tracing alone, {args.micro} steps without training, share of the median untraced step's wall time:")
    for mode, (ms, cms, flush_s, proc_ms) in micro.items():
        print(f"  {mode}: calls {ms:.3f} ms wall ({ms / (base * 1000) * 100:.2f}%), all tracing work in this process "
              f"{cms:.3f} ms CPU ({cms / (base * 1000) * 100:.2f}%); export process {proc_ms:.3f} ms CPU; "
              f"shutdown flush {flush_s:.2f} s once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
