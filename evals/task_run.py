"""Evaluate one checkpoint on one named task (:mod:`harness.tasks`): :func:`evaluate_task`.

A task bundles its data source, prompt template (system prompt, chat or plain, few-shot examples), rewards, success
reward and threshold, and generation defaults. This module turns a task plus what the caller overrides into the
arguments of :func:`evals.runner.evaluate`, and adds the task's entries to the evaluation's ``results.json``.

Precedence of a setting, highest first: what the caller gives (``--gen-kwargs``, ``--k``, ``--num-fewshot``,
``--apply-chat-template``...); a value in the run config's ``eval`` section that differs from the built-in default
(the user's choice for that run); the task's default; the built-in default. The task's rewards are used (a
``--reward`` adds one or replaces the one of the same name; ``only_rewards`` uses just those); a run's saved
training rewards are not, since the task says how it is scored.

Prompts are rendered by the task (:meth:`harness.tasks.Task.load`): with the chat template on, a message list
(system prompt, few-shot user/assistant turns, the question); off, one plain string with the few-shot examples
before the question. The backend gets them as they are, with no system prompt of its own added.

This module does not print, pick checkpoints or build the table across tasks (:mod:`evals.task_results`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.backends import Backend
from evals.checkpoint import CheckpointInfo, resolve_checkpoint
from evals.config import EvalSection
from evals.errors import EvalError
from evals.outputs import atomic_write_json
from evals.runner import EvalResult, evaluate
from evals.task_contamination import task_contamination
from evals.task_results import CheckpointMetric, TaskConfig, TaskMetric, lm_eval_section, task_metrics
from harness.cfg.scoring import ScoringSection
from harness.types import RewardSpec

if TYPE_CHECKING:
    from harness.tasks import Task

__all__ = ["TaskOverrides", "task_settings", "evaluate_task", "TaskEvaluation", "get_tasks", "checkpoint_metrics"]

log = logging.getLogger(__name__)

#: EvalSection fields a task has a default for.
_TASK_FIELDS = ("k", "temperature", "top_p", "max_new_tokens", "stop", "success_reward", "success_threshold")


@dataclass(frozen=True)
class TaskOverrides:
    """What the caller sets over a task's defaults (None: not given).

    Attributes:
        settings: EvalSection fields given explicitly (flags, ``--gen-kwargs``), by name.
        num_fewshot: few-shot examples per prompt.
        chat: apply the chat template (True), give plain text (False).
        data: a local file (or ``hf:`` source) in the task's hub schema, replacing the task's source.
        rewards: added to the task's rewards, replacing one of the same name.
        only_rewards: use only ``rewards``.
        system_prompt: a system message the backend puts first (a task's own system prompt is already there).
    """

    settings: Mapping[str, Any] = field(default_factory=dict)
    num_fewshot: int | None = None
    chat: bool | None = None
    data: str | None = None
    rewards: tuple[RewardSpec, ...] = ()
    only_rewards: bool = False
    system_prompt: str | None = None


@dataclass
class TaskEvaluation:
    """One checkpoint on one task: the evaluation's result (its ``results.json`` content and directory)."""

    task: str
    checkpoint: str
    checkpoint_path: str
    result: EvalResult

    @property
    def metrics(self) -> list[TaskMetric]:
        """The task's entries (``results.json`` ``results``)."""
        return list(self.result.results["results"])


def checkpoint_metrics(ev: TaskEvaluation) -> list[CheckpointMetric]:
    """The evaluation's entries, each with the checkpoint's label and path (for the table across checkpoints)."""
    return [
        CheckpointMetric(
            task=m["task"],
            metric=m["metric"],
            value=m["value"],
            stderr=m["stderr"],
            n=m["n"],
            config=m["config"],
            checkpoint=ev.checkpoint,
            checkpoint_path=ev.checkpoint_path,
        )
        for m in ev.metrics
    ]


def get_tasks(names: str | Sequence[str]) -> list[Task]:
    """The tasks named (a comma-separated string or a list), each once, in order.

    Raises:
        harness.tasks.TaskError: an unknown name (the message lists the known tasks).
    """
    from harness.tasks import get_task

    items = names.split(",") if isinstance(names, str) else [n for part in names for n in part.split(",")]
    wanted = list(dict.fromkeys(n.strip() for n in items if n.strip()))
    if not wanted:
        raise EvalError("--task: no task named; e.g. --task gsm8k or --task humaneval,mbpp (see harness tasks list)")
    return [get_task(n) for n in wanted]


def task_settings(task: Task, base: EvalSection, given: Mapping[str, Any], chat: bool) -> EvalSection:
    """The eval settings for ``task``: ``base`` (a run's eval section, or the defaults) with the task's defaults for
    the fields ``base`` leaves at the built-in default, then ``given`` on top. The task's stop strings are those of
    the prompt mode (``chat``): plain-mode stops such as ``"\\ndef"`` would cut a chat reply's code block short.

    Raises:
        EvalError: a given value does not validate (the message names the field).
    """
    default = EvalSection()
    gen = task.generation
    task_values: dict[str, Any] = {
        "k": gen.k,
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        "max_new_tokens": gen.max_new_tokens,
        "stop": list(gen.stop_for(chat)) or None,
        "success_reward": task.success_reward,
        "success_threshold": task.success_threshold,
    }
    update = {
        name: v
        for name, v in task_values.items()
        if v is not None and getattr(base, name) == getattr(default, name)  # the run config did not choose it
    }
    update.update(given)
    try:
        return EvalSection.model_validate({**base.model_dump(), **update})
    except ValueError as e:
        raise EvalError(f"task {task.name}: invalid eval setting: {e}") from None


def _merge_rewards(task: Task, over: TaskOverrides) -> list[RewardSpec]:
    out = {} if over.only_rewards else {s.name: s for s in task.rewards}
    for s in over.rewards:
        out[s.name] = s
    if not out:
        raise EvalError(f"task {task.name}: no rewards (the task has none and no --reward was given)")
    return list(out.values())


def _task_config(
    task: Task, cfg: EvalSection, over: TaskOverrides, chat: bool, fewshot: int, source: str
) -> TaskConfig:
    return TaskConfig(
        task=task.name,
        source=source,
        split=task.splits.get("test"),
        num_fewshot=fewshot,
        chat_template=chat,
        system_prompt=task.prompt.system_prompt,
        k=cfg.k,
        generation={
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_new_tokens": cfg.max_new_tokens,
            "stop": list(cfg.stop),
            "seed": cfg.seed,
        },
        rewards=[s.model_dump(mode="json") for s in _merge_rewards(task, over)],
        success_reward=cfg.success_reward,
        success_threshold=cfg.success_threshold,
        limit=cfg.limit,
        origin=task.origin,
    )


def evaluate_task(
    task: Task,
    checkpoint: str | Path,
    over: TaskOverrides | None = None,
    *,
    settings: EvalSection | None = None,
    output_dir: str | Path | None = None,
    backend: Backend | None = None,
    resume: bool = True,
    gguf_file: str | None = None,
    train_data: str | None = None,
    telemetry: bool = True,
    progress: bool = False,
    label: str | None = None,
    scoring: ScoringSection | None = None,
) -> TaskEvaluation:
    """Evaluate ``checkpoint`` on ``task``; ``results.json`` gets ``task``, ``results`` and ``lm_eval`` keys.

    Args:
        task: the task (see :func:`get_tasks`).
        checkpoint: the checkpoint directory (for the ``reference`` backend: any directory; no model is loaded).
        over: the caller's overrides of the task's defaults.
        settings: the base eval settings; default: the checkpoint's run config ``eval`` section, else the defaults.
        output_dir: where this evaluation's files go (default ``<run>/eval/tasks/<checkpoint>/<task>``).
        backend, resume, gguf_file, train_data, telemetry, progress: as :func:`evals.runner.evaluate`.
        label: the checkpoint's name in tables (default: its directory name).
        scoring: where the reward calls run (``backend: local|ray``); default: the run config's ``scoring``.
    """
    over = over or TaskOverrides()
    info = resolve_checkpoint(checkpoint)
    base = settings or (info.config.eval if info.config is not None else EvalSection())
    chat = over.chat if over.chat is not None else task.prompt.chat
    cfg = task_settings(task, base, over.settings, chat)
    fewshot = over.num_fewshot if over.num_fewshot is not None else cfg.num_fewshot
    held = task.load(
        "test",
        data=over.data,
        limit=cfg.limit,
        num_fewshot=fewshot,
        chat=chat,
        seed=over.settings.get("seed"),
        strict=cfg.strict,
    )
    n_shot = fewshot if fewshot is not None else task.prompt.num_fewshot
    specs = _merge_rewards(task, over)
    contamination = task_contamination(task, info, cfg, over.data, train_data)
    res = evaluate(
        info.path,
        held,
        specs,
        settings=cfg,
        output_dir=output_dir or default_task_output(info, task.name),
        resume=resume,
        fields=task.fields,
        chat_template=chat,
        system_prompt=over.system_prompt,
        train_data=train_data,
        gguf_file=gguf_file,
        telemetry=telemetry,
        backend=backend,
        progress=progress,
        contamination=contamination,
        scoring=scoring,
    )
    tcfg = _task_config(task, _used_settings(res, cfg), over, chat, n_shot, held.source)
    res.results["task"] = tcfg
    res.results["results"] = task_metrics(task.name, res.results, tcfg)
    res.results["lm_eval"] = lm_eval_section({task.name: res.results})
    atomic_write_json(res.output_dir / "results.json", res.results)
    return TaskEvaluation(task.name, label or info.path.name, str(info.path), res)


def _used_settings(res: EvalResult, cfg: EvalSection) -> EvalSection:
    """``cfg`` with the token limit and success reward the evaluation actually used (both filled in by the runner)."""
    sampling = res.results.get("sampling", {})
    success = res.results.get("success", {})
    return cfg.model_copy(
        update={
            "max_new_tokens": sampling.get("max_new_tokens", cfg.max_new_tokens),
            "success_reward": success.get("reward", cfg.success_reward),
        }
    )


def default_task_output(info: CheckpointInfo, task: str) -> Path:
    """``<run>/eval/tasks/<checkpoint>/<task>`` inside a run, else ``eval/tasks/<checkpoint>/<task>``."""
    root = info.run_dir / "eval" / "tasks" if info.run_dir is not None else Path("eval") / "tasks"
    return root / info.path.resolve().name / task
