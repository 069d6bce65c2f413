"""Sharded data parallelism with PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``).

:func:`choose_parallel` resolves ``trainer.parallel`` (``auto`` picks DDP when one node holds the whole training
state, FSDP otherwise, and logs why). :func:`shard_model` applies ``fully_shard`` to every decoder layer and then
to the root, so each rank keeps 1/world of every parameter, gradient and AdamW moment (parameters become
DTensors). On a GPU the mixed-precision policy computes in bfloat16 and keeps float32 master weights and float32
gradient reduction; ``cpu_offload`` moves the shards, their gradients and the optimizer state to host memory.
Gradients are *summed* over ranks (divide factor 1), as in :func:`trainer.dist.sync_gradients`, because the loss
normalizers are already global.

Generation needs whole weights: :func:`gathered` all-gathers every layer's parameters once, keeps them for the
whole rollout (no collective per decoding step, so ranks may decode different numbers of tokens), and frees them
after; the full model then exists once per rank, in place of the shards' views, never as a second copy.
:func:`iter_full_parameters` streams full tensors one parameter at a time for an engine that loads weights
itself (vLLM's ``load_weights``), and :func:`full_state_dict` gathers a CPU copy on rank 0 for export.

Not here: tensor/pipeline parallelism, hybrid sharding across node groups, meta-device initialization (each
rank loads the whole model into host memory once before sharding), LoRA under FSDP.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

import torch
import torch.distributed as dist

from trainer.dist import DistInfo

__all__ = [
    "prepare",
    "choose_parallel",
    "ensure_process_group",
    "decoder_layers",
    "shard_model",
    "gathered",
    "iter_full_parameters",
    "full_state_dict",
    "local_bytes",
    "GatheredRollout",
]

log = logging.getLogger(__name__)

#: bytes per trainable parameter of the training state: fp32 weight, gradient and AdamW's two moments
STATE_BYTES_PER_PARAM = 16
_ROOT_RESHARD = False  # the root's parameters (embeddings, head) are needed first in backward: keep them
_LAYER_RESHARD = True


def _multi_node() -> bool:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return world > int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))


def choose_parallel(choice: str, model: Any, info: DistInfo) -> str:
    """``ddp`` or ``fsdp`` for ``trainer.parallel`` = ``ddp``, ``fsdp`` or ``auto`` (logged with the reason).

    ``auto``: one process gets DDP (nothing to shard); several nodes get FSDP; one GPU node gets FSDP when the
    training state (16 bytes per trainable parameter) exceeds 80% of a GPU's memory, DDP otherwise.
    """
    if choice in ("ddp", "fsdp"):
        return choice
    if info.world_size == 1:
        reason, pick = "one process", "ddp"
    elif _multi_node():
        reason, pick = "several nodes", "fsdp"
    elif info.device.startswith("cuda"):
        need = STATE_BYTES_PER_PARAM * sum(p.numel() for p in model.parameters() if p.requires_grad)
        have = torch.cuda.get_device_properties(info.local_rank).total_memory
        pick = "fsdp" if need > 0.8 * have else "ddp"
        reason = f"training state {need / 2**30:.1f} GiB vs {have / 2**30:.1f} GiB per GPU"
    else:
        reason, pick = "one node, CPU", "ddp"
    log.info("trainer.parallel=auto: %s (%s)", pick, reason)
    return pick


def ensure_process_group(info: DistInfo) -> DistInfo:
    """``info`` with ``parallel="fsdp"``; starts a one-rank group when the process runs alone (FSDP needs one)."""
    if not dist.is_initialized():
        backend = "nccl" if info.device.startswith("cuda") else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return replace(info, parallel="fsdp")


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The repeated transformer blocks (the classes a transformers model names in ``_no_split_modules``)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(
            f"{type(model).__name__}: no decoder layers found to shard (_no_split_modules={names or None})"
        )
    return layers


def shard_model(model: Any, info: DistInfo, *, mixed_precision: bool | None = None, cpu_offload: bool = False) -> Any:
    """Apply ``fully_shard`` to each decoder layer and the root, in place; returns the model.

    Args:
        mixed_precision: bf16 compute, fp32 master weights and reduction; default: on for CUDA.
        cpu_offload: keep shards, gradients and optimizer state in host memory (CPUOffloadPolicy).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    cuda = info.device.startswith("cuda")
    mesh = init_device_mesh("cuda" if cuda else "cpu", (dist.get_world_size(),))
    if mixed_precision is None:
        mixed_precision = cuda
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if mixed_precision
        else MixedPrecisionPolicy()
    )
    offload = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=_LAYER_RESHARD)
    fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=_ROOT_RESHARD)
    for m in _fsdp_modules(model):  # neither setter recurses
        m.set_gradient_divide_factor(1.0)  # sum, as DDP's sync_gradients: the loss normalizers are global
        m.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no PREMUL_SUM)
    return model


def _fsdp_modules(model: Any) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


@contextlib.contextmanager
def gathered(model: Any) -> Iterator[Any]:
    """Whole parameters on every rank for the duration (e.g. a rollout); every rank must enter together.

    A model that is not sharded passes through unchanged.
    """
    mods = _fsdp_modules(model)
    if not mods:
        yield model
        return
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield model
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(_ROOT_RESHARD if m is model else _LAYER_RESHARD, recurse=False)


def iter_full_parameters(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) per parameter, one all-gather at a time (every rank iterates, in the same order)."""
    from torch.distributed.tensor import DTensor

    with torch.no_grad():
        for name, p in model.named_parameters():
            yield name, p.full_tensor() if isinstance(p, DTensor) else p.detach()


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The whole state dict gathered to host memory on rank 0 (other ranks get ``{}``); every rank calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if not _fsdp_modules(model):
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}  # a snapshot
    # a model's state dict holds tensors only (the declared type also covers nested optimizer-style values)
    full = cast(
        "dict[str, torch.Tensor]",
        get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)),
    )
    # on one rank (CPU) a "gathered" tensor can be the live shard itself: copy those, so this is a snapshot
    live = {_local(p).untyped_storage().data_ptr() for p in model.parameters()}
    return {k: v.clone() if v.untyped_storage().data_ptr() in live else v for k, v in full.items()}


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def local_bytes(tensors: Any) -> int:
    """Bytes this rank holds for ``tensors`` (a DTensor counts its local shard only)."""
    from torch.distributed.tensor import DTensor

    total = 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if isinstance(t, DTensor) else t
        total += local.numel() * local.element_size()
    return total


def prepare(model: Any, ref: Any | None, t: Any, info: DistInfo) -> tuple[Any, Any | None, DistInfo]:
    """Place the policy and reference for ``t.parallel``: moved to the device (ddp) or sharded (fsdp).

    Both come loaded in host memory when they may be sharded. The reference (``beta > 0``) is sharded like the
    policy: 1/world of a frozen copy per rank costs less device memory than a whole copy kept on the host and
    streamed in for each forward, and its all-gathers ride the same schedule as the policy's.
    """
    parallel = choose_parallel(t.parallel, model, info)
    if parallel == "ddp":
        return model.to(info.device), ref.to(info.device) if ref is not None else None, info
    if t.lora is not None:
        from harness.errors import ConfigError

        raise ConfigError(
            "trainer.parallel=fsdp with trainer.lora: not supported; use parallel: ddp for LoRA "
            "(the adapters are small enough to replicate)"
        )
    if getattr(t, "micro_batch_tokens", None):
        from harness.errors import ConfigError

        raise ConfigError(
            "trainer.micro_batch_tokens with trainer.parallel=fsdp: every rank must run the same number "
            "of forward/backward passes (each is a collective); use micro_batch_size"
        )
    info = ensure_process_group(info)
    bf16 = t.bf16 if t.bf16 is not None else info.device.startswith("cuda")
    n_layers = len(decoder_layers(model))
    for m in (model, ref):
        if m is not None:
            shard_model(
                m, info, mixed_precision=bf16 and info.device.startswith("cuda"), cpu_offload=t.fsdp_cpu_offload
            )
    log.info(
        "fsdp: %d decoder layers sharded over %d ranks%s",
        n_layers,
        info.world_size,
        " (CPU offload)" if t.fsdp_cpu_offload else "",
    )
    return model, ref, info


class GatheredRollout:
    """A rollout backend around a sharded policy.

    A backend that samples with the policy itself (HF) generates inside :func:`gathered`. A backend with its own
    engine weights (vLLM, which reads the policy through its ``_weights()`` iterator in ``sync_weights``) gets
    :func:`iter_full_parameters` instead: one full tensor at a time, so the GPU never holds the whole policy
    twice beside the engine's copy.
    """

    def __init__(self, inner: Any, model: Any) -> None:
        self.inner, self.model = inner, model
        self.streams = hasattr(inner, "_weights")
        if self.streams:
            inner._weights = lambda: iter_full_parameters(model)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if self.streams:
            return self.inner.generate(*args, **kwargs)
        with gathered(self.model):
            return self.inner.generate(*args, **kwargs)

    def sync_weights(self) -> None:
        self.inner.sync_weights()
