"""Sharded checkpoints with ``torch.distributed.checkpoint`` (DCP), resumable on any world size.

A checkpoint of a sharded run keeps the layout of :mod:`trainer.checkpoint` and adds ``sharded/``: every rank
writes its own shards of the model and the optimizer state there, in parallel, with a ``.metadata`` index keyed
by parameter names (not by rank), so a later run on another number of ranks, with or without FSDP, loads the
slices it needs (:func:`load_sharded`). ``trainer_state.pt`` then holds no optimizer (the step, scheduler and
per-rank RNG/data positions stay there), and rank 0 gathers the full weights once more for the ordinary
``save_pretrained`` export that ``harness eval`` loads in a plain process, without torch.distributed.

All ranks must call :func:`save_sharded_checkpoint` together. Ranks see the checkpoint directory through a
shared filesystem (each rank writes its own files; rank 0 renames the directory when all are done).
This module does not decide when to save and does not restore RNG or data positions (the loop does).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from trainer import checkpoint as ckpt_io
from trainer.dist import DistInfo, barrier
from trainer.fsdp import full_state_dict

__all__ = ["SHARDED_DIR", "has_sharded", "save_sharded", "load_sharded", "save_sharded_checkpoint"]

log = logging.getLogger(__name__)

#: the DCP folder inside a checkpoint directory
SHARDED_DIR = "sharded"


def has_sharded(ckpt: Path) -> bool:
    """True when ``ckpt`` holds a complete DCP folder (its ``.metadata`` is written last)."""
    return (ckpt / SHARDED_DIR / ".metadata").is_file()


def _states(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    return {"model": msd, "optim": osd}


def save_sharded(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> None:
    """Write this rank's shards of the model and optimizer state under ``path`` (every rank calls it)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(model, optimizer), checkpoint_id=str(path))


def load_sharded(ckpt: Path, model: Any, optimizer: torch.optim.Optimizer) -> None:
    """Load model and optimizer state from ``ckpt/sharded`` into this run's (possibly sharded) model.

    The saved world size does not matter: each rank reads the slices of its own shards (a plain process reads
    whole tensors). Raises FileNotFoundError naming the folder when it is incomplete.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    if not has_sharded(ckpt):
        raise FileNotFoundError(f"{ckpt / SHARDED_DIR}: no .metadata; not a complete sharded checkpoint")
    state = _states(model, optimizer)
    dcp.load(state, checkpoint_id=str(ckpt / SHARDED_DIR))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def save_sharded_checkpoint(
    run_dir: Path,
    step: int,
    *,
    info: DistInfo,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank_states: list[dict[str, Any]],
    config: Any,
    telemetry_ctx: dict[str, Any],
) -> Path | None:
    """Write the checkpoint of ``step`` from every rank; returns its directory on rank 0, None elsewhere.

    Order: rank 0 empties ``step-XXXXXX.tmp``; every rank writes its DCP shards into it; the full weights are
    gathered to rank 0, which writes the export and ``trainer_state.pt`` and renames the directory.
    """
    tmp = ckpt_io.fresh_tmp_dir(run_dir, step) if info.is_main else ckpt_io.tmp_dir(run_dir, step)
    barrier(info)
    save_sharded(tmp / SHARDED_DIR, model, optimizer)
    full = full_state_dict(model)  # a collective: every rank takes part, rank 0 receives
    path = None
    if info.is_main:
        path = ckpt_io.save_checkpoint(
            run_dir,
            step,
            model=model,
            tokenizer=tokenizer,
            optimizer=None,
            scheduler=scheduler,
            rank_states=rank_states,
            config=config,
            telemetry_ctx=telemetry_ctx,
            state_dict=full,
            fresh=False,
        )
    del full
    barrier(info)
    return path
