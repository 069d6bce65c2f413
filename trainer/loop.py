"""The GRPO training loop, top to bottom: prompts -> rollout -> scoring -> advantages -> update -> checkpoint.

One step (:func:`_step`) samples ``prompts_per_step`` groups of G completions (split over ranks), submits them to
the one scoring path (:class:`harness.scoring.ScoringSession`), starts the update's first forward pass while the
rewards run, turns the weighted total rewards into group-relative advantages (unscored samples excluded), and
takes ``mu`` optimizer steps. Then it records metrics (console bar, ``metrics.jsonl``, a ``train.step`` span with
a ``reward/<name>`` child per reward), checks the monitors, and saves a checkpoint every ``save_steps``.

What it leaves out on purpose: a critic, reward models on the GPU, asynchronous off-policy generation (the batch
of step N+1 is sampled by the weights after step N), and callbacks beyond one ``on_step`` hook.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.config import RunConfig, dump_config
from harness.data import render_prompt
from harness.plugins import add_plugins
from harness.scoring import BatchResult, ScoringSession
from harness.telemetry import TRACES_FILE, RewardStats, RunTelemetry, drop_steps_after
from trainer import checkpoint as ckpt_io
from trainer import dcp
from trainer import fsdp as sharding
from trainer.advantages import group_advantages
from trainer.collect import Collected, collect, select_result, totals_tensor
from trainer.dist import (
    DistInfo,
    all_gather_object,
    barrier,
    broadcast_parameters,
    group_advantages_over_ranks,
    init_distributed,
)
from trainer.losses import LossConfig
from trainer.monitors import MetricsWriter, Monitors
from trainer.rollout.base import SamplingConfig
from trainer.setup import (
    PromptStream,
    load_policy,
    load_reference,
    load_train_samples,
    make_optimizer,
    use_bf16,
    validate,
)
from trainer.update import UpdateInputs, policy_update

__all__ = ["TrainResult", "train"]

log = logging.getLogger(__name__)


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
    """

    run_dir: Path
    run_id: str
    steps: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    last_checkpoint: Path | None = None
    warnings: list[str] = field(default_factory=list)
    model: Any = None
    tokenizer: Any = None


@dataclass
class _Ctx:
    config: RunConfig
    t: Any  # the resolved TrainerSection
    info: DistInfo
    model: Any
    tokenizer: Any
    ref: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    stream: PromptStream
    rollout: Any
    session: ScoringSession
    loss_cfg: LossConfig
    sampling: SamplingConfig
    bf16: bool
    rollout_generator: torch.Generator


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _make_rollout(
    t: Any, model: Any, tok: Any, generator: torch.Generator, bf16: bool, seed: int, world_size: int
) -> Any:
    if t.backend == "vllm":
        from trainer.rollout.vllm import VLLMRollout

        per_call = -(-t.prompts_per_step // world_size // t.rollout_chunks) * t.num_generations
        return VLLMRollout(
            model,
            tok,
            max_prompt_length=t.max_prompt_length,
            max_completion_length=t.max_completion_length,
            settings=t.vllm,
            seed=seed,
            max_num_seqs=per_call,
        )
    from trainer.rollout.hf import HFRollout

    return HFRollout(model, tok, max_prompt_length=t.max_prompt_length, generator=generator, bf16=bf16)


def _inputs_fn(col: Collected, t: Any) -> Callable[[], UpdateInputs]:
    def get() -> UpdateInputs:  # every rank calls it at the same point of the update: the batch std is global
        ga = group_advantages_over_ranks(totals_tensor(col.result()), t.num_generations, t.scale_rewards)
        mask = col.batch.completion_mask.float() * ga.trainable[:, None].float()
        if t.mask_truncated:
            mask = mask * (~col.batch.truncated)[:, None].float()
        return UpdateInputs(ga.advantages.float(), mask)

    return get


def _all_ranks_result(col: Collected, info: DistInfo) -> BatchResult:
    """The reward scores of every rank's first round, so metrics and spans describe the whole step."""
    mine = col.reward_result()
    if not info.enabled:
        return mine
    parts = all_gather_object(mine, info)
    return select_result(parts, [(r, i) for r, part in enumerate(parts) for i in range(len(part))])


def _reward_metrics(res: BatchResult, config: RunConfig, g: int) -> dict[str, Any]:
    totals = totals_tensor(res)
    scored = totals[~torch.isnan(totals)]
    m: dict[str, Any] = {
        "reward/total/mean": float(scored.mean()) if scored.numel() else None,
        "reward/total/std": float(scored.std()) if scored.numel() > 1 else None,
        "reward/total/scored_frac": scored.numel() / max(totals.numel(), 1),
        "frac_reward_zero_std": float(group_advantages(totals, g, scale="none").zero_variance.float().mean()),
    }
    for spec in config.rewards:
        s = res.summary()[spec.name]
        m[f"reward/{spec.name}/mean"] = s["mean"]
        m[f"reward/{spec.name}/std"] = s["std"]
        m[f"reward/{spec.name}/unscored_frac"] = 1.0 - s["scored"] / max(s["count"], 1)
        bad = {k: v for k, v in s["statuses"].items() if k not in ("ok", "pass", "fail", "no_answer", "parse_error")}
        if bad:
            m[f"reward/{spec.name}/statuses"] = ", ".join(f"{v} {k}" for k, v in sorted(bad.items()))
    return m


def _step(c: _Ctx, step: int) -> tuple[dict[str, Any], BatchResult]:
    t, t0 = c.t, time.perf_counter()
    col = collect(
        c.stream.take,
        c.rollout,
        c.session,
        lambda s: render_prompt(
            s.prompt, c.tokenizer, chat_template=c.config.data.chat_template, system_prompt=c.config.data.system_prompt
        ),
        num_prompts=t.prompts_per_step // c.info.world_size,
        group_size=t.num_generations,
        sampling=c.sampling,
        pad_id=c.rollout.pad_id,
        dynamic_sampling=bool(t.dynamic_sampling),
        max_rounds=t.max_resample_rounds,
        chunks=t.rollout_chunks,
    )
    t1 = time.perf_counter()
    c.rollout.release_memory()  # vLLM: sleep during the update
    upd = policy_update(
        c.model,
        c.optimizer,
        c.scheduler,
        col.batch,
        _inputs_fn(col, t),
        c.loss_cfg,
        temperature=t.temperature,
        mu=t.mu,
        micro_batch_size=t.micro_batch_size,
        micro_batch_tokens=t.micro_batch_tokens,
        max_grad_norm=t.max_grad_norm,
        ref_model=c.ref,
        dist=c.info,
        bf16=c.bf16,
        is_cap=t.vllm.is_cap,
    )
    c.rollout.sync_weights()  # vLLM: wake up, load the new weights
    step_s = time.perf_counter() - t0
    lengths = col.batch.completion_lengths.float()
    tokens = float(col.batch.prompt_mask.sum() + col.batch.completion_mask.sum())
    rewards = _all_ranks_result(col, c.info)
    m = {
        "step": step,
        **_reward_metrics(rewards, c.config, t.num_generations),
        **upd,
        **col.stats,
        "completions/mean_length": float(lengths.mean()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(col.batch.truncated.float().mean()),
        "timing/update_s": time.perf_counter() - t1,
        "timing/step_s": step_s,
        "tokens_per_s": tokens / step_s,
    }
    # the part of this step spent on rewards that nothing else overlapped (blocking submits and waits)
    m["timing/reward_critical_s"] = sum(
        m.get(k, 0.0) for k in ("timing/score_submit_s", "timing/score_wait_s", "timing/score_wait_s_sampling")
    )
    return m, rewards


def _setup(config: RunConfig, resume: bool) -> tuple[_Ctx, Path, int]:
    t = config.trainer.resolved()
    info = init_distributed()
    validate(config, t, info.world_size)

    add_plugins(config.plugins)  # user reward modules, imported here and in every scoring worker
    session = ScoringSession(config.rewards, timeout=t.score_timeout, workers=t.score_workers)  # checks reward names
    samples = load_train_samples(config)
    run_dir = Path(config.run.output_dir) / str(config.run.id)
    ckpt = ckpt_io.latest_checkpoint(run_dir) if resume else None
    if resume and ckpt is None:
        log.warning("--resume: no complete checkpoint under %s; starting from step 0", run_dir)
    _seed_everything(config.run.seed + info.rank)
    load_on = info.device if t.parallel == "ddp" else "cpu"  # a model that may be sharded is loaded on the host
    model, tok = load_policy(config, t, load_on, source=ckpt)
    broadcast_parameters(model, info)
    ref = load_reference(config, t, load_on)
    model, ref, info = sharding.prepare(model, ref, t, info)
    optimizer, scheduler = make_optimizer(model, t)
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
    loss_cfg = LossConfig(t.loss, float(t.epsilon), float(t.epsilon_high), t.cispo_cap, t.beta, t.max_completion_length)
    bf16 = use_bf16(config, t, info.device)
    rollout = _make_rollout(t, model, tok, generator, bf16, config.run.seed, info.world_size)
    ctx = _Ctx(
        config,
        t,
        info,
        model,
        tok,
        ref,
        optimizer,
        scheduler,
        stream,
        rollout,
        session,
        loss_cfg,
        SamplingConfig(t.max_completion_length, t.temperature, t.top_p),
        bf16,
        generator,
    )
    return ctx, run_dir, start


def _load_optimizer(optimizer: torch.optim.Optimizer, state: dict[str, Any], ckpt: Path, info: DistInfo) -> None:
    if info.parallel == "fsdp":
        from harness.errors import ConfigError

        raise ConfigError(
            f"{ckpt}: written by a parallel: ddp run (no sharded/ folder); resume it with trainer.parallel: ddp"
        )
    optimizer.load_state_dict(state["optimizer"])


def _save(c: _Ctx, run_dir: Path, step: int, tel: RunTelemetry | None) -> Path | None:
    states = all_gather_object({"rng": ckpt_io.rng_state(c.rollout_generator), "data": c.stream.state()}, c.info)
    if c.info.parallel == "fsdp":  # every rank writes its shards
        return dcp.save_sharded_checkpoint(
            run_dir,
            step,
            info=c.info,
            model=c.model,
            tokenizer=c.tokenizer,
            optimizer=c.optimizer,
            scheduler=c.scheduler,
            rank_states=states,
            config=c.config,
            telemetry_ctx=tel.checkpoint_context(step) if tel is not None else {},
        )
    path = None
    if c.info.is_main:
        ctx = tel.checkpoint_context(step) if tel is not None else {}
        path = ckpt_io.save_checkpoint(
            run_dir,
            step,
            model=c.model,
            tokenizer=c.tokenizer,
            optimizer=c.optimizer,
            scheduler=c.scheduler,
            rank_states=states,
            config=c.config,
            telemetry_ctx=ctx,
        )
    barrier(c.info)
    return path


def _traced_step(c: _Ctx, step: int, tel: RunTelemetry | None) -> dict[str, Any]:
    """One step inside a ``train.step`` span (rank 0), with a ``reward/<name>`` child span per reward."""
    if tel is None:
        return _step(c, step)[0]
    with tel.train_step(step) as st:
        m, rewards = _step(c, step)
        st.set_metrics({k: v for k, v in m.items() if isinstance(v, (int, float)) and v is not None})
        for spec in c.config.rewards:
            st.record_reward(spec.name, RewardStats.from_batch(rewards, spec.name, c.t.num_generations))
    return m


def train(
    config: RunConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train the configured policy with GRPO; see the module docstring for one step.

    Args:
        config: the whole run (``trainer`` section: :class:`harness.cfg.trainer.TrainerSection`).
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
    c, run_dir, start = _setup(config, resume)
    if c.info.parallel == "fsdp":
        c.rollout = sharding.GatheredRollout(c.rollout, c.model)  # whole weights while sampling
    result = TrainResult(run_dir, str(config.run.id), start, model=c.model, tokenizer=c.tokenizer)
    tel = None
    if c.info.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(config, run_dir / "config.yaml")
        if resume:  # the steps after the checkpoint run again: keep their traces once, as metrics.jsonl does
            drop_steps_after(run_dir / TRACES_FILE, start)
        tel = RunTelemetry.start(run_dir, str(config.run.id), config.telemetry)
    writer = (
        MetricsWriter(run_dir / "metrics.jsonl", resume_from_step=start if resume else None) if c.info.is_main else None
    )
    monitors = Monitors(c.t.monitors, [s.name for s in config.rewards])
    bar = None
    if progress and c.info.is_main:
        from tqdm.auto import tqdm

        bar = tqdm(total=c.t.max_steps, initial=start, desc="train", unit="step")
    try:
        for step in range(start + 1, c.t.max_steps + 1):
            m = _traced_step(c, step, tel)
            result.warnings += monitors.update(step, m)
            if writer is not None:
                writer.write(m)
            result.metrics.append(m)
            result.steps = step
            if (c.t.save_steps and step % c.t.save_steps == 0) or step == c.t.max_steps:
                result.last_checkpoint = _save(c, run_dir, step, tel) or result.last_checkpoint
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    reward=_fmt(m["reward/total/mean"]),
                    kl=_fmt(m["kl"]),
                    len=_fmt(m["completions/mean_length"]),
                    s=_fmt(m["timing/step_s"]),
                )
            if on_step is not None:
                on_step(step, m)
    finally:
        if bar is not None:
            bar.close()
        c.session.close()
        if tel is not None:
            tel.shutdown()
    return result


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"
