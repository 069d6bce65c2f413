"""Where the real-engine tests find ``.venv-vllm``, how they run a process in it, and how a module starts its
independent engine processes ahead of the tests that read them (:class:`Ahead`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-vllm"
OPT_OUT = "HARNESS_SKIP_VLLM_TESTS"
#: never inherited: each engine run is a single process that picks its own free port (two runs side by side that
#: inherit one MASTER_PORT collide: EADDRINUSE)
TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def engine_env(**extra: str) -> dict[str, str]:
    """The environment of an engine process: one thread, the engine in the calling process (vLLM's worker
    processes take 40-70 s to start here), no hub, this checkout's code first, no cache-size override, no torchrun
    variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_CPU_KVCACHE_SPACE", "VIRTUAL_ENV", *TORCHRUN)}
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


class Ahead:
    """Independent runs (engine processes, each on one thread) started when a module begins, two at a time, so
    that a 2-core machine runs two engines side by side instead of one after the other. Every run is keyed by
    the test that reads it and writes only its own directory; ``get`` waits for it and raises what the run raised
    (``run_in``'s failure with the output's tail), so a failed run fails the test that reads it, and only that."""

    def __init__(self, selected: set[str], workers: int = 2) -> None:
        self.selected = selected
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="engine-run")
        self._runs: dict[str, Future[Any]] = {}

    @classmethod
    def for_module(cls, request: pytest.FixtureRequest) -> Ahead:
        """Runs for the tests of ``request``'s module that this session runs (a selection starts only theirs)."""
        return cls({i.name for i in request.session.items if getattr(i, "module", None) is request.module})

    def start(self, key: str, readers: set[str], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Starts ``fn(*args, **kwargs)`` as run ``key`` when one of the tests named in ``readers`` is selected."""
        assert key not in self._runs, f"run {key!r} started twice"
        if readers & self.selected:
            self._runs[key] = self._pool.submit(fn, *args, **kwargs)

    def get(self, key: str) -> Any:
        return self._runs[key].result()

    def close(self) -> None:
        """Drops the runs no test asked for (a selection of the module's tests) and waits for the running ones."""
        self._pool.shutdown(wait=True, cancel_futures=True)
