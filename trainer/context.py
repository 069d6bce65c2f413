"""What a training run holds between steps (:class:`StepContext`) and how it is built and saved:
:func:`setup_training` loads the policy, the reference, the optimizer, the prompts, the scoring session and the
rollout backend (resuming from the newest checkpoint when asked), and :func:`save_step` writes a checkpoint.

This module runs no step; the step and the loop over steps are :mod:`trainer.loop`.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.config import RunConfig
from harness.plugins import add_plugins
from harness.scoring import ScoringSession, scoring_pool
from harness.tasks.training import apply_task, check_task_contamination
from harness.telemetry import RunTelemetry
from harness.threads import apply_threads
from trainer import checkpoint as ckpt_io
from trainer import dcp
from trainer import fsdp as sharding
from trainer.config import LossSettings, TrainerSection
from trainer.dist import DistInfo, all_gather_object, barrier, broadcast_parameters, init_distributed
from trainer.head import PolicyForward, probe_logit_map
from trainer.losses import LossConfig
from trainer.memory import cap_kernel_cache
from trainer.rollout.base import Rollout, SamplingConfig
from trainer.setup import (
    PromptStream,
    load_policy,
    load_reference,
    load_train_samples,
    make_optimizer,
    use_bf16,
    validate,
)

__all__ = ["StepContext", "setup_training", "save_step"]

log = logging.getLogger(__name__)


@dataclass
class StepContext:
    """Everything one GRPO step reads, built once by :func:`setup_training`.

    ``trainer`` is the resolved trainer section (per-loss defaults filled in), ``per_loss`` those per-loss settings
    typed without None; ``dist`` says where this process
    sits (rank, world size, device, ddp or fsdp); ``reference`` is the frozen reference policy (None without a
    KL term); ``rollout_generator`` seeds HF sampling and is saved in checkpoints; ``forwards`` are the policy's
    and the reference's forward (:class:`trainer.head.PolicyForward`: model, probed head map, packing checks).
    """

    config: RunConfig
    trainer: TrainerSection
    dist: DistInfo
    model: Any
    tokenizer: Any
    reference: Any | None
    optimizer: torch.optim.Optimizer
    scheduler: Any
    stream: PromptStream
    rollout: Rollout
    session: ScoringSession
    loss_cfg: LossConfig
    per_loss: LossSettings
    sampling: SamplingConfig
    bf16: bool
    rollout_generator: torch.Generator
    forwards: tuple[PolicyForward, PolicyForward | None]  # policy and reference with their probed head maps


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _make_rollout(
    trainer: TrainerSection,
    model: Any,
    tokenizer: Any,
    generator: torch.Generator,
    bf16: bool,
    seed: int,
    world_size: int,
) -> Rollout:
    if trainer.backend == "vllm":
        from trainer.rollout.vllm import VLLMRollout

        per_call = -(-trainer.prompts_per_step // world_size // trainer.rollout_chunks) * trainer.num_generations
        return VLLMRollout(
            model,
            tokenizer,
            max_prompt_length=trainer.max_prompt_length,
            max_completion_length=trainer.max_completion_length,
            settings=trainer.vllm,
            seed=seed,
            max_num_seqs=per_call,
            bf16=bf16,
        )
    from trainer.rollout.hf import HFRollout

    return HFRollout(model, tokenizer, max_prompt_length=trainer.max_prompt_length, generator=generator, bf16=bf16)


def setup_training(config: RunConfig, resume: bool) -> tuple[StepContext, Path, int]:
    """Load everything a run needs (models, optimizer, prompts, scoring session, rollout backend), resuming from
    the newest checkpoint when ``resume``; returns the step context, the run directory and the last step done."""
    trainer = config.trainer.resolved()
    info = init_distributed()
    config = apply_task(config)  # data.task: the task's rewards when the config lists none
    validate(config, trainer, info.world_size)
    cap_kernel_cache()  # before the first matmul: oneDNN's kernel cache grows with every new shape (trainer.memory)

    add_plugins(config.plugins)  # user reward modules, imported here and in every scoring worker
    # the session checks the reward names before any model loads
    pool = scoring_pool(config.scoring)  # None: this machine's pool; scoring.backend ray: actors on a Ray cluster
    session = ScoringSession(config.rewards, timeout=trainer.score_timeout, workers=trainer.score_workers, pool=pool)
    samples = load_train_samples(config)
    if config.data.task and info.rank == 0:
        check_task_contamination(config)  # between the task's train and test questions; logs what it finds
    run_dir = Path(config.run.output_dir) / str(config.run.id)
    ckpt = ckpt_io.latest_checkpoint(run_dir) if resume else None
    if resume and ckpt is None:
        log.warning("--resume: no complete checkpoint under %s; starting from step 0", run_dir)
    _seed_everything(config.run.seed + info.rank)
    load_on = info.device if trainer.parallel == "ddp" else "cpu"  # a model that may be sharded is loaded on the host
    model, tokenizer = load_policy(config, trainer, load_on, source=ckpt)
    apply_threads(trainer.threads, model, info.device, what="trainer.threads")
    broadcast_parameters(model, info)
    reference = load_reference(config, trainer, load_on)
    logit_map = probe_logit_map(model)  # before sharding: refuses a model whose logits we cannot match
    model, reference, info = sharding.prepare(model, reference, trainer, info)
    optimizer, scheduler = make_optimizer(model, trainer)
    stream = PromptStream(samples, config.run.seed, info.rank, info.world_size)
    generator = torch.Generator().manual_seed(config.run.seed * 7919 + info.rank)
    start = 0
    if ckpt is not None:
        state = ckpt_io.load_trainer_state(ckpt)
        if dcp.has_sharded(ckpt):  # saved by a sharded run on any number of ranks
            dcp.load_sharded(ckpt, model, optimizer)
        else:
            _load_optimizer(optimizer, state, ckpt, info)
        scheduler.load_state_dict(state["scheduler"])
        mine = state["ranks"][info.rank] if info.rank < len(state["ranks"]) else state["ranks"][0]
        stream.load_state(mine["data"])
        ckpt_io.set_rng_state(mine["rng"], generator)
        start = int(state["step"])
        log.info("resuming %s from step %d", ckpt, start)
        note = ckpt_io.world_size_note(len(state["ranks"]), info.world_size, dcp.has_sharded(ckpt))
        if note and info.is_main:
            log.warning("%s: %s", ckpt, note)
    per_loss = trainer.loss_settings()
    loss_cfg = LossConfig(
        loss_type=trainer.loss,
        epsilon_low=per_loss.epsilon,
        epsilon_high=per_loss.epsilon_high,
        cispo_cap=trainer.cispo_cap,
        beta=trainer.beta,
        max_completion_length=trainer.max_completion_length,
    )
    bf16 = use_bf16(config, trainer, info.device, model)
    if info.is_main:
        log.info("bf16 autocast (float32 weights): %s", "on" if bf16 else "off")
    rollout = _make_rollout(trainer, model, tokenizer, generator, bf16, config.run.seed, info.world_size)
    ctx = StepContext(
        config=config,
        trainer=trainer,
        dist=info,
        model=model,
        tokenizer=tokenizer,
        reference=reference,
        optimizer=optimizer,
        scheduler=scheduler,
        stream=stream,
        rollout=rollout,
        session=session,
        loss_cfg=loss_cfg,
        per_loss=per_loss,
        sampling=SamplingConfig(trainer.max_completion_length, trainer.temperature, trainer.top_p),
        bf16=bf16,
        rollout_generator=generator,
        forwards=(
            PolicyForward(model, logit_map),
            PolicyForward(reference, logit_map) if reference is not None else None,
        ),
    )
    return ctx, run_dir, start


def _load_optimizer(optimizer: torch.optim.Optimizer, state: dict[str, Any], ckpt: Path, info: DistInfo) -> None:
    if info.parallel == "fsdp":
        from harness.errors import ConfigError

        raise ConfigError(
            f"{ckpt}: written by a parallel: ddp run (no sharded/ folder); resume it with trainer.parallel: ddp"
        )
    optimizer.load_state_dict(state["optimizer"])


def save_step(ctx: StepContext, run_dir: Path, step: int, telemetry: RunTelemetry | None) -> Path | None:
    """Checkpoint the run after ``step``: every rank's shards (fsdp) or rank 0's whole state (ddp), with each
    rank's sampler and prompt-stream state; returns the checkpoint directory on the rank that wrote it."""
    states = all_gather_object({"rng": ckpt_io.rng_state(ctx.rollout_generator), "data": ctx.stream.state()}, ctx.dist)
    telemetry_ctx = telemetry.checkpoint_context(step) if telemetry is not None else {}  # (telemetry: rank 0 only)
    saved: dict[str, Any] = {
        "model": ctx.model,
        "tokenizer": ctx.tokenizer,
        "optimizer": ctx.optimizer,
        "scheduler": ctx.scheduler,
        "rank_states": states,
        "config": ctx.config,
        "telemetry_ctx": telemetry_ctx,
    }
    if ctx.dist.parallel == "fsdp":  # every rank writes its shards
        return dcp.save_sharded_checkpoint(run_dir, step, info=ctx.dist, **saved)
    path = ckpt_io.save_checkpoint(run_dir, step, **saved) if ctx.dist.is_main else None
    barrier(ctx.dist)
    return path
