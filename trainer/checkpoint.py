"""Checkpoints a killed run can resume from, and that the evaluator can load like any transformers model.

Layout of ``runs/<id>/checkpoints/step-000010/``:

* ``config.json``, ``model.safetensors``, tokenizer files: ``save_pretrained`` of the policy (for LoRA, the
  adapter only) and the tokenizer;
* ``trainer_state.pt``: step, optimizer, LR scheduler and, per rank, RNG states and the data position (a sharded
  run keeps its model and optimizer shards in ``sharded/`` instead, see :mod:`trainer.dcp`);
* ``config.yaml``: the resolved run config (the evaluator reads the reward specs from it);
* ``telemetry.json``: ``RunTelemetry.checkpoint_context(step)``, the span ids the evaluation links to.

A checkpoint is written to ``step-XXXXXX.tmp`` and renamed when complete, so a run killed while saving leaves
no half checkpoint that resume would pick. This module does not decide when to save (the loop does).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.config import RunConfig, dump_config

__all__ = [
    "checkpoint_dir",
    "tmp_dir",
    "fresh_tmp_dir",
    "latest_checkpoint",
    "save_checkpoint",
    "load_trainer_state",
    "rng_state",
    "set_rng_state",
    "world_size_note",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^step-(\d{6,})$")


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """``run_dir/checkpoints/step-000010`` for step 10."""
    return run_dir / "checkpoints" / f"step-{step:06d}"


def tmp_dir(run_dir: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` is written before it is complete."""
    final = checkpoint_dir(run_dir, step)
    return final.with_name(final.name + ".tmp")


def fresh_tmp_dir(run_dir: Path, step: int) -> Path:
    """:func:`tmp_dir`, emptied of a killed run's leftovers and created."""
    tmp = tmp_dir(run_dir, step)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return None
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _NAME.match(p.name)) and (p / "trainer_state.pt").is_file()
    ]
    return max(found)[1] if found else None


def rng_state(generator: torch.Generator | None) -> dict[str, Any]:
    """Every RNG a step draws from: python, numpy, torch CPU/CUDA and the sampling generator."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.random.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "sampler": generator.get_state() if generator is not None else None,
    }


def set_rng_state(state: dict[str, Any], generator: torch.Generator | None) -> None:
    """Restore what :func:`rng_state` captured."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.random.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if generator is not None and state.get("sampler") is not None:
        generator.set_state(state["sampler"])


def save_checkpoint(
    run_dir: Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any,
    rank_states: list[dict[str, Any]],
    config: RunConfig,
    telemetry_ctx: dict[str, Any],
    state_dict: dict[str, torch.Tensor] | None = None,
    fresh: bool = True,
) -> Path:
    """Write a complete checkpoint for ``step`` (call on rank 0 only) and return its directory.

    Args:
        optimizer: None when its state is saved elsewhere (the ``sharded/`` folder of :mod:`trainer.dcp`).
        rank_states: one dict per rank (RNG states and data position), in rank order.
        state_dict: the weights to export (a sharded model's gathered state dict); default: the model's own.
        fresh: start from an empty temporary directory; False keeps what other ranks already wrote there.
    """
    final = checkpoint_dir(run_dir, step)
    tmp = fresh_tmp_dir(run_dir, step) if fresh else tmp_dir(run_dir, step)
    model.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    state: dict[str, Any] = {"step": step, "scheduler": scheduler.state_dict(), "ranks": rank_states}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    torch.save(state, tmp / "trainer_state.pt")
    dump_config(config, tmp / "config.yaml")
    (tmp / "telemetry.json").write_text(json.dumps(telemetry_ctx, indent=2, default=str), encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    log.info("saved checkpoint %s", final)
    return final


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    """The ``trainer_state.pt`` of a checkpoint (weights are loaded with from_pretrained by the caller)."""
    path = ckpt / "trainer_state.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; {ckpt} is not a complete checkpoint")
    return torch.load(path, map_location="cpu", weights_only=False)


def world_size_note(saved: int, now: int, sharded: bool) -> str | None:
    """What resuming a checkpoint written by ``saved`` ranks on ``now`` ranks changes (None when they are equal).

    >>> world_size_note(2, 2, True) is None
    True
    """
    if saved == now:
        return None
    state = (
        "weights and optimizer state are resharded onto the new ranks"
        if sharded
        else "every rank loads the whole weights and optimizer state"
    )
    return (
        f"written by {saved} rank(s), resumed on {now}: {state}; each rank's prompt position and random state come "
        f"from the saved rank of the same number (rank 0's for ranks beyond {saved - 1}) in a split over {now} "
        f"rank(s), so the steps from here differ from a run that kept {saved} rank(s) (prompts may repeat or be "
        "skipped until the next epoch)"
    )
