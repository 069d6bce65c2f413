"""The GRPO training loop, top to bottom: prompts -> rollout -> scoring -> advantages -> update -> checkpoint.

One step (:func:`grpo_step`; :func:`train_step` wraps it in a ``train.step`` span) samples ``prompts_per_step``
groups of G completions (split over ranks), submits them to the one scoring path
(:class:`harness.scoring.ScoringSession`), computes the old and reference log-probs while the rewards run, turns
the weighted total rewards into group-relative advantages (unscored samples excluded), and takes ``mu`` optimizer
steps (:func:`optimize`: per micro-batch, forward, loss and backward; then clip and step). Then it records
metrics (console bar, ``metrics.jsonl``, a ``train.step`` span with a ``reward/<name>`` child per reward), checks
the monitors, and saves a checkpoint every ``save_steps`` (and after the step in flight when Ctrl-C stops the run:
:mod:`trainer.interrupt`).

The run's state between steps and its set-up and checkpoint writing are :mod:`trainer.context`.

What it leaves out on purpose: a critic, reward models on the GPU, asynchronous off-policy generation (the batch
of step N+1 is sampled by the weights after step N), and callbacks beyond one ``on_step`` hook.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from harness.config import RunConfig, dump_config
from harness.data import render_prompt
from harness.scoring import BatchResult
from harness.stats import mean_std, scored_values, zero_variance_group_frac
from harness.tasks.training import apply_task
from harness.telemetry import TRACES_FILE, RewardStats, RunTelemetry, drop_steps_after
from harness.types import VERDICT_STATUSES
from trainer import fsdp as sharding
from trainer import metrics as M
from trainer.advantages import GroupAdvantages
from trainer.collect import Collected, collect, select_result, totals_tensor
from trainer.config import Packing
from trainer.context import StepContext, save_step, setup_training
from trainer.dist import (
    DistInfo,
    GradientSync,
    all_gather_object,
    group_advantages_over_ranks,
)
from trainer.interrupt import StopRequest
from trainer.losses import LossConfig
from trainer.memory import trimmed_backward
from trainer.monitors import MetricsWriter, Monitors
from trainer.rollout.base import RolloutBatch
from trainer.update import UpdateBatch, UpdateInputs, UpdateTally, optimizer_step, prepare_update

__all__ = [
    "TrainResult",
    "StepContext",
    "train",
    "setup_training",
    "train_step",
    "grpo_step",
    "optimize",
    "policy_update",
    "update_inputs",
]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        run_dir: ``<output_dir>/<run_id>``.
        run_id: the run id (generated when the config has none).
        steps: the last step completed.
        metrics: the per-step metrics of this process's steps (also in ``metrics.jsonl``).
        last_checkpoint: the newest checkpoint directory, if any.
        warnings: every monitor warning raised.
        model: the trained policy (in memory, on its device).
        tokenizer: its tokenizer.
        interrupted: Ctrl-C stopped the run after ``steps`` (which was then checkpointed).
        rank: this process's rank (summaries are printed by rank 0 only).
    """

    run_dir: Path
    run_id: str
    steps: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    last_checkpoint: Path | None = None
    warnings: list[str] = field(default_factory=list)
    model: Any = None
    tokenizer: Any = None
    interrupted: bool = False
    rank: int = 0


def update_inputs(batch: RolloutBatch, advantages: GroupAdvantages, *, mask_truncated: bool) -> UpdateInputs:
    """The update's per-row advantages and per-token loss mask: completion tokens of trainable rows (scored, in a
    group with a baseline), minus truncated completions when ``mask_truncated`` (DAPO's overlong filtering)."""
    mask = batch.completion_mask.float() * advantages.trainable[:, None].float()
    if mask_truncated:
        mask = mask * (~batch.truncated)[:, None].float()
    return UpdateInputs(advantages.advantages.float(), mask)


def _all_ranks_result(collected: Collected, info: DistInfo) -> BatchResult:
    """The reward scores of every rank's first round, so metrics and spans describe the whole step."""
    mine = collected.reward_result()
    if not info.enabled:
        return mine
    parts = all_gather_object(mine, info)
    return select_result(parts, [(r, i) for r, part in enumerate(parts) for i in range(len(part))])


def _reward_metrics(res: BatchResult, config: RunConfig, group_size: int) -> dict[str, Any]:
    """``reward/*`` metrics; every std is :mod:`harness.stats`'s (n - 1), so one line mixes no conventions."""
    totals = res.totals
    total_mean, total_std = mean_std(totals)
    metrics: dict[str, Any] = {
        M.TOTAL_MEAN: total_mean,
        M.TOTAL_STD: total_std,
        M.TOTAL_SCORED_FRAC: len(scored_values(totals)) / max(len(totals), 1),
        M.ZERO_STD_FRAC: zero_variance_group_frac(totals, group_size),
    }
    summaries = res.summary()
    for spec in config.rewards:
        summary = summaries[spec.name]
        metrics[M.reward_key(spec.name, "mean")] = summary["mean"]
        metrics[M.reward_key(spec.name, "std")] = summary["std"]
        metrics[M.reward_key(spec.name, "unscored_frac")] = 1.0 - summary["scored"] / max(summary["count"], 1)
        problems = {k: v for k, v in summary["statuses"].items() if k not in VERDICT_STATUSES}
        if problems:
            metrics[M.reward_key(spec.name, "statuses")] = ", ".join(f"{v} {k}" for k, v in sorted(problems.items()))
    return metrics


def grpo_step(ctx: StepContext, step: int) -> tuple[dict[str, Any], BatchResult]:
    """One GRPO step: prompts -> G completions each -> scores -> advantages -> ``mu`` optimizer steps.

    Returns the step's metrics and the reward scores of every rank's batch (for the ``reward/<name>`` spans).
    """
    trainer, data, started = ctx.trainer, ctx.config.data, time.perf_counter()
    per_loss = ctx.per_loss
    # 1. Sample G completions per prompt; their scoring is submitted, not awaited.
    collected = collect(
        ctx.stream.take,
        ctx.rollout,
        ctx.session,
        lambda sample: render_prompt(
            sample.prompt, ctx.tokenizer, chat_template=data.chat_template, system_prompt=data.system_prompt
        ),
        num_prompts=trainer.prompts_per_step // ctx.dist.world_size,
        group_size=trainer.num_generations,
        sampling=ctx.sampling,
        pad_id=ctx.rollout.pad_id,
        dynamic_sampling=per_loss.dynamic_sampling,
        max_rounds=trainer.max_resample_rounds,
        chunks=trainer.rollout_chunks,
    )
    generated = time.perf_counter()
    ctx.rollout.release_memory()  # vLLM: sleep during the update
    # 2. While the reward workers still score the batch: micro-batches, old and reference log-probs (no grad).
    prepared = prepare_update(
        ctx.forwards[0],
        collected.batch,
        temperature=trainer.temperature,
        mu=trainer.mu,
        micro_batch_size=trainer.micro_batch_size,
        micro_batch_tokens=trainer.micro_batch_tokens,
        ref_model=ctx.forwards[1],
        bf16=ctx.bf16,
        packing=trainer.packing,
    )
    # 3. Wait for the scores; group-relative advantages of the weighted totals (over every rank's batch).
    waited = time.perf_counter()
    scores = collected.result()
    score_wait_s = time.perf_counter() - waited
    advantages = group_advantages_over_ranks(totals_tensor(scores), trainer.num_generations, per_loss.scale_rewards)
    # 4. mu optimizer steps on the batch with those advantages.
    update_stats = optimize(
        prepared,
        update_inputs(collected.batch, advantages, mask_truncated=per_loss.mask_truncated),
        ctx.optimizer,
        ctx.scheduler,
        ctx.loss_cfg,
        max_grad_norm=trainer.max_grad_norm,
        dist=ctx.dist,
        is_cap=trainer.vllm.is_cap,
    )
    ctx.optimizer.zero_grad(set_to_none=True)  # the gradients are not needed until the next update: free them
    ctx.rollout.sync_weights()  # vLLM: wake up, load the new weights
    timing = {
        M.SCORE_WAIT_S: score_wait_s,
        M.UPDATE_S: time.perf_counter() - generated,
        M.STEP_S: time.perf_counter() - started,
    }
    # 5. Metrics over every rank's first-round scores.
    rewards = _all_ranks_result(collected, ctx.dist)
    return _step_metrics(step, ctx.config, collected, rewards, {**update_stats, **timing}), rewards


def optimize(
    prepared: UpdateBatch,
    inputs: UpdateInputs,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    loss_cfg: LossConfig,
    *,
    max_grad_norm: float | None = None,
    dist: DistInfo = DistInfo(),
    is_cap: float | None = None,
) -> dict[str, float]:
    """``prepared.mu`` optimizer steps: per micro-batch, log-probs with grad, the loss, backward; then the
    gradients summed over ranks, clipped, and one optimizer step. Returns loss, clip fractions, KL, entropy, grad
    norm, lr (and ``is_ratio/*`` when the off-policy correction ran: :class:`trainer.update.UpdateTally`)."""
    tally = UpdateTally(prepared, inputs, loss_cfg, dist, is_cap)
    model, last = prepared.policy.model, len(prepared.slices) - 1
    sync = GradientSync(model.parameters(), dist)  # sums gradients over ranks while the last backward runs
    grad_norm = 0.0
    for it in range(prepared.mu):
        optimizer.zero_grad(set_to_none=True)
        for k in range(last + 1):
            logp, ent = prepared.logprobs(k, with_entropy=it == 0)  # (rows, T), entropies on the first pass
            out = tally.loss(k, logp, first_pass=it == 0)
            if k == last:
                sync.arm()
            with trimmed_backward(model.parameters()):  # CPU: free heap memory handed back (trainer.memory)
                out.loss.backward()
            if it == 0:
                tally.add(k, out, ent)
        grad_norm = optimizer_step(model, optimizer, scheduler, sync, max_grad_norm)
    sync.close()
    return tally.metrics(grad_norm, float(scheduler.get_last_lr()[0]))


def policy_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    batch: RolloutBatch,
    inputs: UpdateInputs,
    loss_cfg: LossConfig,
    *,
    temperature: float,
    mu: int = 1,
    micro_batch_size: int | None = None,
    micro_batch_tokens: int | None = None,
    max_grad_norm: float | None = None,
    ref_model: Any | None = None,
    dist: DistInfo = DistInfo(),
    bf16: bool = False,
    is_cap: float | None = None,
    logprob_chunk: int | None = None,
    packing: Packing = "auto",
) -> dict[str, float]:
    """One update without a rollout: :func:`trainer.update.prepare_update` then :func:`optimize`, for a batch whose
    advantages are already known (tests and benchmarks).

    ``model`` is a :class:`trainer.head.PolicyForward` or a bare model (then probed on every call)."""
    prep = prepare_update(
        model,
        batch,
        temperature=temperature,
        mu=mu,
        micro_batch_size=micro_batch_size,
        micro_batch_tokens=micro_batch_tokens,
        ref_model=ref_model,
        bf16=bf16,
        logprob_chunk=logprob_chunk,
        packing=packing,
    )
    return optimize(prep, inputs, optimizer, scheduler, loss_cfg, max_grad_norm=max_grad_norm, dist=dist, is_cap=is_cap)


def _step_metrics(
    step: int, config: RunConfig, collected: Collected, rewards: BatchResult, update_stats: dict[str, float]
) -> dict[str, Any]:
    lengths = collected.batch.completion_lengths.float()
    tokens = float(collected.batch.prompt_mask.sum() + collected.batch.completion_mask.sum())
    metrics = {
        M.STEP: step,
        **_reward_metrics(rewards, config, config.trainer.num_generations),
        **update_stats,
        **collected.stats,
        M.MEAN_LENGTH: float(lengths.mean()),
        M.MAX_LENGTH: float(lengths.max()),
        M.CLIPPED_RATIO: float(collected.batch.truncated.float().mean()),
        M.TOKENS_PER_S: tokens / update_stats[M.STEP_S],
    }
    # the part of this step spent on rewards that nothing else overlapped (blocking submits and waits)
    metrics[M.REWARD_CRITICAL_S] = sum(metrics.get(k, 0.0) for k in M.REWARD_CRITICAL_PARTS)
    return metrics


def train_step(ctx: StepContext, step: int, telemetry: RunTelemetry | None) -> dict[str, Any]:
    """:func:`grpo_step` inside a ``train.step`` span (rank 0), with a ``reward/<name>`` child span per reward."""
    if telemetry is None:
        return grpo_step(ctx, step)[0]
    with telemetry.train_step(step) as span:
        metrics, rewards = grpo_step(ctx, step)
        span.set_metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float)) and v is not None})
        for spec in ctx.config.rewards:
            span.record_reward(spec.name, RewardStats.from_batch(rewards, spec.name, ctx.trainer.num_generations))
    return metrics


def train(
    config: RunConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train the configured policy with GRPO; see the module docstring for one step.

    Args:
        config: the whole run (``trainer`` section: :class:`trainer.config.TrainerSection`).
        resume: continue from the newest complete checkpoint of ``runs/<run.id>`` (needs ``run.id``).
        progress: show a console progress bar (rank 0).
        on_step: called with ``(step, metrics)`` after each step (and its checkpoint).

    Raises:
        ConfigError: before any model loads, for settings that cannot work.
    """
    if config.run.id is None:
        if resume:
            from harness.errors import ConfigError

            raise ConfigError("run.id: --resume needs the id of the run to continue")
        config = config.model_copy(
            update={"run": config.run.model_copy(update={"id": datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")})}
        )
    config = apply_task(config)  # data.task: saved with the task's rewards, so the evaluator reads them
    ctx, run_dir, start = setup_training(config, resume)
    if ctx.dist.parallel == "fsdp":
        ctx.rollout = sharding.GatheredRollout(ctx.rollout, ctx.model)  # whole weights while sampling
    result = TrainResult(
        run_dir, str(config.run.id), start, model=ctx.model, tokenizer=ctx.tokenizer, rank=ctx.dist.rank
    )
    telemetry = None
    if ctx.dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(config, run_dir / "config.yaml")
        if resume:  # the steps after the checkpoint run again: keep their traces once, as metrics.jsonl does
            drop_steps_after(run_dir / TRACES_FILE, start)
        telemetry = RunTelemetry.start(run_dir, str(config.run.id), config.telemetry)
    writer = (
        MetricsWriter(run_dir / "metrics.jsonl", resume_from_step=start if resume else None)
        if ctx.dist.is_main
        else None
    )
    monitors = Monitors(
        ctx.trainer.monitors,
        [s.name for s in config.rewards],
        mask_truncated=ctx.per_loss.mask_truncated,
    )
    bar = None
    if progress and ctx.dist.is_main:
        from tqdm.auto import tqdm

        bar = tqdm(total=ctx.trainer.max_steps, initial=start, desc="train", unit="step")
    stop = StopRequest.install()  # Ctrl-C: finish the step in flight, checkpoint it, stop (trainer/interrupt.py)
    try:
        for step in range(start + 1, ctx.trainer.max_steps + 1):
            metrics = train_step(ctx, step, telemetry)
            result.warnings += monitors.update(step, metrics)
            if writer is not None:
                writer.write(metrics)
            result.metrics.append(metrics)
            result.steps = step
            stopping = stop.agreed(ctx.dist) and step < ctx.trainer.max_steps
            due = (ctx.trainer.save_steps and step % ctx.trainer.save_steps == 0) or step == ctx.trainer.max_steps
            if due or stopping:
                result.last_checkpoint = save_step(ctx, run_dir, step, telemetry) or result.last_checkpoint
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    reward=_fmt(metrics[M.TOTAL_MEAN]),
                    kl=_fmt(metrics[M.KL]),
                    len=_fmt(metrics[M.MEAN_LENGTH]),
                    s=_fmt(metrics[M.STEP_S]),
                )
            if on_step is not None:
                on_step(step, metrics)
            if stopping:
                result.interrupted = True
                break
    finally:
        stop.uninstall()
        if bar is not None:
            bar.close()
        ctx.session.close()
        if telemetry is not None:
            telemetry.shutdown()
    return result


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"
