"""Find checkpoints on disk and what was saved with them: step, run directory, run config, span context.

The run layout (written by ``harness train``)::

    runs/<run_id>/config.yaml
    runs/<run_id>/checkpoints/step-000010/   weights + tokenizer, config.yaml, trainer_state.pt, telemetry.json
    runs/<run_id>/eval/step-000010/          written by the evaluator

A checkpoint directory outside that layout (any ``save_pretrained`` directory) can be evaluated too; then there
is no run config (rewards must be given) and no span context.

This module reads only; it loads no weights. :func:`watch_checkpoints` is the one loop that waits for a run's new
checkpoints, for ``harness eval --watch`` with and without ``--task``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.errors import EvalError
from harness.config import RunConfig, load_config

__all__ = ["CheckpointInfo", "resolve_checkpoint", "list_checkpoints", "is_ready", "watch_checkpoints"]

log = logging.getLogger(__name__)

_STEP = re.compile(r"^step-(\d+)$")
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_ADAPTER = ("adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint and what was saved beside it."""

    path: Path
    step: int | None
    run_dir: Path | None
    config: RunConfig | None
    telemetry_ctx: dict[str, Any] | None
    run_id: str | None

    @property
    def default_output(self) -> Path:
        """``<run>/eval/<checkpoint name>`` inside a run; else ``eval/<checkpoint name>`` in the working directory
        (never inside a model directory that is not ours, such as an installed package)."""
        if self.run_dir is not None:
            return self.run_dir / "eval" / self.path.name
        return Path("eval") / self.path.resolve().name


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        log.warning("%s: not valid JSON (%s); ignored", path, e)
        return None
    return data if isinstance(data, dict) else None


def resolve_checkpoint(path: str | Path) -> CheckpointInfo:
    """Describe the checkpoint at ``path``; its config is ``<ckpt>/config.yaml``, else the run's ``config.yaml``.

    Raises:
        EvalError: ``path`` is not a directory.
        harness.errors.ConfigError: a saved config.yaml does not validate (the message names the file and field).
    """
    p = Path(path)
    if not p.is_dir():
        raise EvalError(f"{p}: checkpoint directory not found")
    run_dir = p.parent.parent if p.parent.name == "checkpoints" else None
    cfg_path = next(
        (c for c in (p / "config.yaml", run_dir / "config.yaml" if run_dir else None) if c and c.is_file()), None
    )
    config = load_config(cfg_path) if cfg_path else None
    ctx = _read_json(p / "telemetry.json")
    m = _STEP.match(p.name)
    step = int(m.group(1)) if m else None
    if step is None and ctx and isinstance(ctx.get("step"), int):
        step = ctx["step"]
    run_id = (config.run.id if config else None) or (ctx or {}).get("run_id") or (run_dir.name if run_dir else None)
    return CheckpointInfo(path=p, step=step, run_dir=run_dir, config=config, telemetry_ctx=ctx, run_id=run_id)


def is_ready(path: Path) -> bool:
    """True when a checkpoint directory looks complete: a model config and weights (or a LoRA adapter) are present."""
    if (path / "adapter_config.json").is_file():
        return any((path / w).exists() for w in _ADAPTER)
    return (path / "config.json").is_file() and any((path / w).exists() for w in _WEIGHTS)


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's ``checkpoints/step-N`` directories that are complete, by step; none for a run that has saved
    nothing yet (its ``config.yaml``, written when training starts, but no ``checkpoints/``).

    Raises:
        EvalError: ``run_dir`` has neither a ``checkpoints`` directory nor a ``config.yaml``.
    """
    base = Path(run_dir) / "checkpoints"
    if not base.is_dir():
        if (Path(run_dir) / "config.yaml").is_file():
            return []
        raise EvalError(f"{run_dir}: no checkpoints/ directory; expected a run directory written by harness train")
    found = [(int(m.group(1)), d) for d in base.iterdir() if d.is_dir() and (m := _STEP.match(d.name))]
    return [d for _, d in sorted(found) if is_ready(d)]


#: How :func:`watch_checkpoints` waits between looks (a test replaces it to save a checkpoint between two looks).
_pause: Callable[[float], None] = time.sleep


def watch_checkpoints(run_dir: str | Path, *, interval: float, idle_timeout: float | None) -> Iterator[Path]:
    """Each complete checkpoint of the run once, by step, as it appears: look, yield what is new, wait ``interval``
    seconds (at least 0.1), look again. The caller's work on a checkpoint happens between two looks, so a checkpoint
    saved meanwhile is found by the next one.

    Stops at a look that finds nothing new, made after at least one wait, once no checkpoint has been new for
    ``idle_timeout`` seconds (counted from the start, then from the end of the caller's work on the last new one);
    ``None`` watches until interrupted. With ``idle_timeout=0`` it waits once after the last new checkpoint (or once
    when there is none yet), looks again, and stops if nothing came.

    Raises:
        EvalError: ``run_dir`` is not a run directory (:func:`list_checkpoints`).
    """
    done: set[Path] = set()
    idle_since, waited = time.monotonic(), False
    while True:
        new = [c for c in list_checkpoints(run_dir) if c not in done]
        for ckpt in new:
            yield ckpt
            done.add(ckpt)
        if new:
            idle_since, waited = time.monotonic(), False
        elif waited and idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
            return
        _pause(max(0.1, interval))
        waited = True
