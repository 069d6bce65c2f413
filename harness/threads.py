"""How many CPU threads torch uses for a model's matmuls: ``trainer.threads`` / ``eval.threads``, ``auto`` by default.

OpenMP splits each matmul across its threads and then waits for all of them. A small model's matmuls are too short
to split (a tiny model ran its demo 6x slower with 2 threads than with 1 on an idle 2-core machine), and on a busy
machine one descheduled thread stalls every matmul (the same demo did not finish in 5 minutes with 2 threads beside
one other busy process, against 18 s with 1). So ``auto`` uses one thread unless all of these hold:

1. the device is a CPU (on a GPU the host threads only feed it, and torch's default stays);
2. ``OMP_NUM_THREADS`` is not set (when it is, its value is used: the user or the launcher chose);
3. the model is large enough to split (hidden size >= :data:`MIN_HIDDEN_TO_SPLIT`);
4. the machine has more than one usable CPU that is idle (CPU affinity and cgroup quota, minus the 1-minute load
   average of other work);
5. a short matmul microbenchmark shaped like the model's layers (decode-sized and update-sized) runs at least
   :data:`MIN_SPEEDUP` times faster on those threads than on one.

An explicit number is used as given, with a warning when it exceeds the usable or idle CPUs.

The same size gate decides the CPU default of bfloat16 autocast (:func:`auto_bf16`): on where the CPU multiplies
bfloat16 natively (AVX512-BF16 or AMX; a 1024x576 @ 576x1536 matmul ran about 20x faster in bfloat16 than in float32
on one AMX core) and the model is large enough that the casts pay back (SmolLM2-135M: sampling 1.6-2.1x and a
forward+backward 1.4-1.6x faster on one loaded core).

Not covered: the load can change after the choice (another job starting later), inter-op threads (torch's default
stays), and processes other than this one (scoring workers run rewards, not matmuls).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ThreadChoice",
    "ThreadSetting",
    "MIN_HIDDEN_TO_SPLIT",
    "MIN_SPEEDUP",
    "usable_cpus",
    "other_load",
    "choose_threads",
    "apply_threads",
    "model_hidden_size",
    "cpu_has_bf16_matmul",
    "auto_bf16",
]

log = logging.getLogger(__name__)

ThreadSetting = int | Literal["auto"]

#: Below this hidden size a matmul is too short for OpenMP to pay back its fork and barrier (measured: hidden 64
#: and 256 ran 0.7x or slower on 2 threads, loaded or not).
MIN_HIDDEN_TO_SPLIT = 512
#: The speed-up more threads must show in the microbenchmark before ``auto`` takes them.
MIN_SPEEDUP = 1.4


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count chosen, why, and a warning when the machine looks oversubscribed."""

    threads: int
    reason: str
    warning: str | None = None


def _cgroup_quota() -> float | None:
    """CPUs allowed by the cgroup's quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), None when unlimited."""
    try:
        quota, _, period = Path("/sys/fs/cgroup/cpu.max").read_text().partition(" ")
        if quota.strip() != "max":
            return float(quota) / float(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        q = float(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        p = float(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return q / p if q > 0 and p > 0 else None
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by the cgroup's CPU quota (at least 1)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, max(1, math.floor(quota)))
    return max(1, n)


def other_load(own_threads: int = 1) -> float | None:
    """The 1-minute load average minus what this process contributes (assumed ``own_threads`` busy threads);
    None where the platform has no load average."""
    try:
        load1 = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return max(0.0, load1 - own_threads)


def model_hidden_size(model: Any) -> int | None:
    """``config.hidden_size`` (or ``n_embd`` / ``d_model``) of a transformers model; None when it has none."""
    cfg = getattr(model, "config", None)
    for name in ("hidden_size", "n_embd", "d_model"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _matmul_seconds(threads: int, hidden: int, reps: int = 5) -> float:
    """Best-of-``reps`` seconds for one decode-sized and one update-sized matmul of a hidden x 3*hidden layer."""
    import torch

    torch.set_num_threads(threads)
    w = torch.randn(hidden, 3 * hidden)
    xs = [torch.randn(16, hidden), torch.randn(256, hidden)]
    for x in xs:
        x @ w
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for x in xs:
            x @ w
        best = min(best, time.perf_counter() - t0)
    return best


def _oversubscribed(threads: int, cpus: int, others: float | None) -> str | None:
    if threads > cpus:
        return f"{threads} threads requested but only {cpus} CPU(s) are usable (affinity / cgroup quota)"
    if threads > 1 and others is not None and others + threads > cpus + 0.5:
        return (
            f"the machine is busy (load average of other work about {others:.1f} on {cpus} usable CPU(s)): "
            f"{threads} OpenMP threads will wait on each other; 'auto' or 1 thread is usually faster here"
        )
    return None


def choose_threads(
    setting: ThreadSetting,
    *,
    hidden_size: int | None,
    device: str = "cpu",
    env: Mapping[str, str] | None = None,
    measure: bool = True,
) -> ThreadChoice:
    """The thread count for ``setting`` (see the module docstring for the ``auto`` rule).

    Args:
        setting: a positive number, or ``"auto"``.
        hidden_size: the model's hidden size (None: unknown, treated as too small to split).
        device: where the model runs; ``auto`` leaves torch's count alone on a GPU.
        env: the environment to read ``OMP_NUM_THREADS`` from (default: ``os.environ``).
        measure: run the microbenchmark (off in tests that check the rule without timing).
    """
    import torch

    cpus = usable_cpus()
    if setting != "auto":
        if not isinstance(setting, int) or setting < 1:
            raise ValueError(f"threads: expected a positive integer or 'auto', got {setting!r}")
        return ThreadChoice(setting, "set in the config", _oversubscribed(setting, cpus, other_load()))
    omp = (os.environ if env is None else env).get("OMP_NUM_THREADS", "").strip()
    if omp:
        n = torch.get_num_threads()
        return ThreadChoice(n, f"OMP_NUM_THREADS={omp}", _oversubscribed(n, cpus, other_load()))
    if not device.startswith("cpu"):
        return ThreadChoice(torch.get_num_threads(), f"torch's default on {device}")
    if hidden_size is None or hidden_size < MIN_HIDDEN_TO_SPLIT:
        return ThreadChoice(1, f"hidden size {hidden_size} < {MIN_HIDDEN_TO_SPLIT}: too small to split")
    others = other_load()
    idle = cpus if others is None else max(1, math.floor(cpus - others + 0.5))
    if idle < 2:
        return ThreadChoice(1, f"no second idle CPU (other load about {others:.1f} on {cpus} usable CPU(s))")
    if not measure:
        return ThreadChoice(idle, f"{idle} idle CPU(s) (not measured)")
    one, many = _matmul_seconds(1, hidden_size), _matmul_seconds(idle, hidden_size)
    speedup = one / many if many > 0 else 0.0
    if speedup < MIN_SPEEDUP:
        return ThreadChoice(1, f"{idle} threads measured {speedup:.2f}x one thread (< {MIN_SPEEDUP}x)")
    return ThreadChoice(idle, f"{idle} threads measured {speedup:.2f}x one thread")


def apply_threads(setting: ThreadSetting, model: Any, device: str, *, what: str) -> ThreadChoice:
    """Choose the count for ``model`` on ``device``, set it with ``torch.set_num_threads``, log it, warn if needed.

    ``what`` names the setting in the log line (``trainer.threads``, ``eval.threads``).
    """
    import torch

    choice = choose_threads(setting, hidden_size=model_hidden_size(model), device=device)
    torch.set_num_threads(choice.threads)
    log.info("%s: %d thread(s) (%s)", what, choice.threads, choice.reason)
    if choice.warning:
        log.warning("%s: %s", what, choice.warning)
    return choice


def cpu_has_bf16_matmul() -> bool:
    """True where the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX tiles), as torch's CPU build sees it."""
    import torch

    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        fn = getattr(torch.cpu, probe, None)  # private probes: absent in some torch versions
        if fn is not None and fn():
            return True
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def auto_bf16(device: str, hidden_size: int | None) -> tuple[bool, str]:
    """The default of bfloat16 autocast (float32 weights) on a CPU: (on?, why). Not for GPUs (the caller's rule)."""
    if not device.startswith("cpu"):
        return False, f"not a CPU device ({device})"
    if hidden_size is None or hidden_size < MIN_HIDDEN_TO_SPLIT:
        return False, f"hidden size {hidden_size} < {MIN_HIDDEN_TO_SPLIT}: casts cost more than they save"
    if not cpu_has_bf16_matmul():
        return False, "the CPU has no native bfloat16 matmul (AVX512-BF16 or AMX)"
    return True, "the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX)"
