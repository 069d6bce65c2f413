"""Run a function on N gloo ranks (CPU) with the environment ``torchrun`` would give each process.

The ranks are ``torch.multiprocessing`` spawned processes; ``fn(rank, *args)`` runs after RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT are set, so code under test joins the group through
``trainer.dist.init_distributed`` exactly as under torchrun. Results travel through files the caller names.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, world: int, port: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        fn(rank, *args)
        if dist.is_initialized():
            dist.barrier()  # no rank tears its gloo connections down while a peer may still be sending
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(world: int, fn: Callable[..., Any], *args: Any, timeout: float = 300.0) -> None:
    """Run ``fn(rank, *args)`` on ``world`` ranks and wait; raises if any rank fails or the time runs out."""
    ctx = mp.start_processes(
        _entry, args=(world, free_port(), fn, args), nprocs=world, join=False, start_method="spawn"
    )
    import time

    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise TimeoutError(f"{world} ranks did not finish within {timeout:.0f} s")
