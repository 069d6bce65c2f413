"""Multi-process data parallelism on torch.distributed, launched by ``torchrun`` or ``accelerate launch``.

Each rank samples and scores its own whole prompt groups (a group is never split across ranks), computes the
loss with normalizers summed over all ranks, and gradients are *summed* over ranks by :class:`GradientSync`:
bucketed all-reduces launched during the last backward of an update, as torch's DDP does, so the communication
overlaps the backward of the earlier layers. The update equals the single-process update on the union of the
ranks' batches. The model is not wrapped (no ``DistributedDataParallel``): rollouts, packing, LoRA and
checkpoints see the plain module, and ranks may run different numbers of micro-batches. Parameters are broadcast from
rank 0 at start so every rank begins from identical weights.

Batch-scaled advantages (``scale_rewards: batch``) use the std of the *global* batch: each rank's reward
moments are summed with one all-reduce (:func:`group_advantages_over_ranks`).

Sharded training (FSDP2) lives in :mod:`trainer.fsdp`; with ``DistInfo.parallel == "fsdp"`` gradients are
reduce-scattered by the model itself and :func:`sync_gradients` does nothing. Not covered: tensor/pipeline
parallelism.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from trainer.advantages import GroupAdvantages, Scale, batch_moments, group_advantages

__all__ = [
    "DistInfo",
    "init_distributed",
    "all_reduce_sum",
    "GradientSync",
    "sync_gradients",
    "broadcast_parameters",
    "barrier",
    "all_gather_object",
    "free_port",
    "launcher_env",
    "group_advantages_over_ranks",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: its rank, the world size, its device, and how the model is parallelized.

    ``parallel`` is ``"ddp"`` (whole model per rank, gradients summed by :func:`sync_gradients`) or ``"fsdp"``
    (sharded by :mod:`trainer.fsdp`, which reduces gradients itself).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"
    parallel: str = "ddp"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(prefer_cuda: bool = True) -> DistInfo:
    """Join the process group named by the ``torchrun`` environment (RANK, WORLD_SIZE...), if any.

    Uses NCCL when CUDA is available and ``prefer_cuda``, else gloo. A single process without those variables
    gets a :class:`DistInfo` of world size 1 and no process group.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = prefer_cuda and torch.cuda.is_available()
    device = f"cuda:{local_rank}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(local_rank)
    if world <= 1:
        return DistInfo(0, 1, 0, device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device)


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Sum a few floats over ranks (returned unchanged on one process)."""
    if not info.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=info.device if info.device != "cpu" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def group_advantages_over_ranks(
    rewards: torch.Tensor, group_size: int, scale: Scale, info: DistInfo | None = None
) -> GroupAdvantages:
    """This rank's group advantages, with ``scale="batch"`` using the std of every rank's scored rewards.

    Groups never span ranks, so means and group stds are local; only the batch std needs the other ranks, and
    their (count, sum, sum of squares) suffice. Every rank must call this at the same point (a collective).
    ``info`` defaults to the default process group's rank and size (world size 1 without one).
    """
    if info is None:
        info = DistInfo(dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else DistInfo()
    moments = None
    if scale == "batch" and info.enabled:
        n, s, sq = all_reduce_sum(list(batch_moments(rewards)), info)
        moments = (n, s, sq)
    return group_advantages(rewards, group_size, scale=scale, global_moments=moments)


class GradientSync:
    """Sums the gradients of ``params`` over ranks in buckets, launched while the last backward of an update runs.

    Buckets hold about ``bucket_bytes`` of gradients of one dtype and device each, in reverse parameter order
    (backward produces the last layers' gradients first). After :meth:`arm`, a hook on each parameter counts its
    gradient as final; once every gradient of a bucket is, the bucket is flattened and all-reduced asynchronously
    while backward goes on with the layers before it, at most ``max_inflight`` buckets at a time (so the extra
    memory is a few buckets, not a second copy of every gradient). Buckets launch strictly in order, on every rank
    alike, whatever order one rank's backward produced its gradients in. :meth:`finish` launches what is left (a
    parameter that got no gradient in the last backward contributes zeros), waits, and writes the sums back.

    Gradient accumulation: arm only before the last micro-batch's backward; the earlier ones only accumulate.
    With one process, or FSDP (which reduces its own gradients), every method does nothing.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        info: DistInfo,
        *,
        bucket_bytes: int = 25 << 20,
        max_inflight: int = 2,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.active = info.enabled and info.parallel != "fsdp"
        self.buckets: list[list[int]] = []
        key, size = None, 0
        for i in reversed(range(len(self.params))):
            p = self.params[i]
            nbytes = p.numel() * p.element_size()
            if not self.buckets or (p.dtype, p.device) != key or (size + nbytes > bucket_bytes and size):
                self.buckets.append([])
                key, size = (p.dtype, p.device), 0
            self.buckets[-1].append(i)
            size += nbytes
        self._bucket_of = {id(self.params[i]): b for b, idx in enumerate(self.buckets) for i in idx}
        self._max_inflight = max(1, max_inflight)
        self._left: list[int] = []
        self._next = 0
        self._inflight: collections.deque[tuple[int, torch.Tensor, Any]] = collections.deque()
        self._armed = False
        self.launched_in_backward = 0  # buckets whose all-reduce started before finish() (the overlap)
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self.params] if self.active else []

    def arm(self) -> None:
        """Reduce during the next backward (call it before the last micro-batch's ``backward``)."""
        if not self.active:
            return
        self._left = [len(b) for b in self.buckets]
        self._next = 0
        self._armed = True

    def _on_grad(self, p: torch.Tensor) -> None:
        if not self._armed:
            return
        b = self._bucket_of[id(p)]
        self._left[b] -= 1
        while self._next < len(self.buckets) and self._left[self._next] <= 0:
            self._launch()
            self.launched_in_backward += 1

    def _launch(self) -> None:
        if len(self._inflight) >= self._max_inflight:
            self._land()
        b = self._next
        self._next += 1
        grads = []
        for i in self.buckets[b]:
            p = self.params[i]
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        flat = torch.cat([g.reshape(-1) for g in grads])
        self._inflight.append((b, flat, dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)))

    def _land(self) -> None:
        b, flat, work = self._inflight.popleft()
        work.wait()
        offset = 0
        for i in self.buckets[b]:
            g = self.params[i].grad
            assert g is not None  # set before its bucket was launched
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def finish(self) -> None:
        """Every gradient summed over ranks (what an armed backward has not launched is reduced now)."""
        if not self.active:
            return
        if not self._armed:
            self.arm()
        while self._next < len(self.buckets):
            self._launch()
        while self._inflight:
            self._land()
        self._armed = False

    def close(self) -> None:
        """Remove the hooks (the sums of a finished update stay in ``.grad``)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._armed = False


def sync_gradients(params: Iterable[torch.nn.Parameter], info: DistInfo) -> None:
    """Sum every trainable parameter's gradient over ranks after backward, bucket by bucket (no overlap; the
    update overlaps them with backward through :class:`GradientSync`). FSDP: already reduced, nothing done."""
    sync = GradientSync(params, info)
    try:
        sync.finish()
    finally:
        sync.close()


def broadcast_parameters(model: torch.nn.Module, info: DistInfo) -> None:
    """Copy rank 0's parameters and buffers to every rank (call before any sharding)."""
    if not info.enabled:
        return
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=0)


def barrier(info: DistInfo) -> None:
    """Wait for every rank (no-op on one process)."""
    if info.enabled:
        dist.barrier()


def all_gather_object(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    if not info.enabled:
        return [obj]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now (the OS picks it; another process could still take it
    before it is bound, so bind it soon)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def launcher_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The torchrun variables an in-process engine reads (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
    filled in for a single process where they are missing; MASTER_PORT is a free port, never a fixed number, so
    two runs on one machine do not collide. Existing values (torchrun's) are kept. Returns what was added."""
    env = os.environ if environ is None else environ
    added: dict[str, str] = {}
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        if key not in env:
            env[key] = added[key] = value
    if "MASTER_PORT" not in env:
        env["MASTER_PORT"] = added["MASTER_PORT"] = str(free_port(env["MASTER_ADDR"]))
    return added
