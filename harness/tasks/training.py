"""Training on a task: ``data.task: NAME`` in a run config.

One name sets the training data (the task's ``train`` split; ``data.train``, when given, is a local file in the
task's schema that replaces the source), the rewards (the task's, unless the config lists its own) and the held-out
set (the task's ``test`` split, or ``data.heldout`` in the task's schema). Before training, the contamination check
(:func:`harness.contamination.check_contamination`) runs between the two splits' bare questions and logs what it
finds.

Training prompts are zero-shot: the task's template, as chat messages or one plain string by
``data.chat_template``. This module loads rows and checks; it does not train (``trainer/`` does) and does not
evaluate checkpoints (``evals/`` does).
"""

from __future__ import annotations

import logging

from harness.cfg.common import FieldMap
from harness.config import RunConfig
from harness.contamination import ContaminationReport, check_contamination
from harness.errors import ConfigError
from harness.tasks._registry import get_task
from harness.tasks._types import Task, TaskError
from harness.types import Sample

__all__ = ["config_task", "apply_task", "task_train_samples", "check_task_contamination"]

log = logging.getLogger(__name__)


def config_task(config: RunConfig) -> Task | None:
    """The task ``data.task`` names (None when unset).

    Raises:
        ConfigError: ``data.task: unknown task 'x'; registered tasks: ...``.
    """
    name = config.data.task
    if not name:
        return None
    from harness.plugins import add_plugins

    add_plugins(config.plugins)  # a task file or module named in plugins: registers its tasks
    try:
        task = get_task(name)
    except TaskError as e:
        raise ConfigError(f"data.task: {e}") from None
    if config.data.fields != FieldMap():
        log.warning("data.fields is ignored with data.task: task %r maps its own columns", name)
    if "train" not in task.splits and not config.data.train:
        raise ConfigError(
            f"data.task: task {name!r} has no train split (splits: {', '.join(task.splits)}); "
            "give the training rows with data.train (a file in the task's schema)"
        )
    return task


def apply_task(config: RunConfig) -> RunConfig:
    """``config`` with the task's rewards when ``data.task`` is set and ``rewards:`` is empty; else unchanged."""
    task = config_task(config)
    if task is None or config.rewards:
        return config
    log.info("data.task %s: rewards %s", task.name, ", ".join(f"{r.name}={r.weight:g}" for r in task.rewards))
    return config.model_copy(update={"rewards": list(task.rewards)})


def task_train_samples(config: RunConfig) -> list[Sample]:
    """The training prompts of ``data.task`` (zero-shot; ``data.train`` replaces the task's source).

    Raises:
        ConfigError: the task is unknown; DataError-like TaskError: its rows cannot be read or none is usable.
    """
    task = config_task(config)
    if task is None:
        raise ConfigError("data.task: not set")
    role = "train" if "train" in task.splits else "test"
    res = task.load(role, data=config.data.train or None, num_fewshot=0, chat=config.data.chat_template)
    if not res.samples:
        why = f"; first problem: {res.errors[0]}" if res.errors else ""
        raise TaskError(f"data.task {task.name!r}: {res.source}: no usable training prompt{why}")
    log.info("data.task %s: %d training prompts from %s", task.name, len(res.samples), res.source)
    return res.samples


def check_task_contamination(config: RunConfig, *, n: int = 13) -> ContaminationReport | None:
    """Overlap between the task's test and train questions, logged; None when a split cannot be read.

    The held-out side is ``data.heldout`` (in the task's schema) or the task's test split; the training side is
    ``data.train`` or its train split. A split that cannot be read (offline hub) skips the check with a warning.
    """
    task = config_task(config)
    if task is None or "test" not in task.splits:
        return None
    try:
        train = task.questions("train" if "train" in task.splits else "test", data=config.data.train or None)
        held = task.questions("test", data=config.data.heldout or None)
    except TaskError as e:
        log.warning("data.task %s: contamination check skipped: %s", task.name, e)
        return None
    report = check_contamination(held.samples, train.samples, n=n)
    if report.exact or report.ngram:
        log.warning(
            "data.task %s: %d of %d held-out questions overlap the training questions (%d exact, %d sharing a "
            "%d-gram); first: %s",
            task.name,
            report.exact + report.ngram,
            report.heldout,
            report.exact,
            report.ngram,
            n,
            report.examples[:1],
        )
    else:
        log.info(
            "data.task %s: no overlap between %d held-out and %d training questions",
            task.name,
            report.heldout,
            report.train,
        )
    return report
