"""Where the real-engine tests find ``.venv-vllm`` and how they run a process in it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-vllm"
OPT_OUT = "HARNESS_SKIP_VLLM_TESTS"


def engine_env(**extra: str) -> dict[str, str]:
    """The environment of an engine process: one thread, the engine in the calling process (vLLM's worker
    processes take 40-70 s to start here), no hub, this checkout's code first, no cache-size override."""
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_CPU_KVCACHE_SPACE", "VIRTUAL_ENV")}
    env.update(
        OMP_NUM_THREADS="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def run_in(
    venv: Path, args: list[str], *, timeout: float = 600, cwd: Path | None = None, worker_process: bool = False
) -> str:
    """Run ``venv``'s ``args[0]`` (python, harness) with ``args[1:]``; fail with the output's tail on an error.
    ``worker_process``: vLLM's default layout, the engine in a process of its own (slower to start)."""
    extra = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"} if worker_process else {}
    proc = subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        env=engine_env(**extra),
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-6000:]}")
    return proc.stdout + proc.stderr
