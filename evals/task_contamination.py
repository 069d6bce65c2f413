"""The contamination check of a task evaluation: the task's held-out questions against the run's training rows.

Both sides are bare questions, never rendered prompts: a few-shot prompt carries other rows' text (drawn from the
training split by design) and every prompt shares the template's words, which would read as overlap that is not
there. The held-out side is the task's test rows (or ``--data``) through :meth:`harness.tasks.Task.questions`. The
training side, first found:

* ``--train-data FILE``: read with the run's column mapping (or the default one outside a run);
* a run trained with ``data.task``: that task's train split (``data.train`` replacing its source), bare;
* a run's ``data.train``: read with the run's column mapping, as the trainer read it.

A side that cannot be read leaves the check undone, with the reason in ``results.json`` and a warning; with
``eval.fail_on_overlap`` an overlap is a :class:`~evals.errors.ContaminationError`. This module checks; it does
not sample or score.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from evals._plan import report_overlap, saved_data_path
from evals.checkpoint import CheckpointInfo
from evals.config import EvalSection
from harness.cfg.common import FieldMap
from harness.contamination import check_contamination
from harness.data import LoadResult, load_samples
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.tasks import Task

__all__ = ["task_contamination"]

log = logging.getLogger(__name__)


def _training_rows(info: CheckpointInfo, train_data: str | None) -> LoadResult | None:
    config = info.config
    fields = config.data.fields if config is not None else FieldMap()
    if train_data:
        return load_samples(train_data, fields)
    if config is None:
        return None
    if config.data.task:
        from harness.tasks import get_task

        trained = get_task(config.data.task)
        role = "train" if "train" in trained.splits else "test"
        return trained.questions(role, data=saved_data_path(info, config.data.train) or None)
    source = saved_data_path(info, config.data.train)
    return load_samples(source, fields) if source and not source.startswith("toy:") else None


def task_contamination(
    task: Task, info: CheckpointInfo, cfg: EvalSection, data: str | None, train_data: str | None
) -> dict[str, Any]:
    """The ``contamination`` record of a task evaluation (see the module docstring).

    Raises:
        ContaminationError: an overlap with ``cfg.fail_on_overlap``.
    """
    try:
        train = _training_rows(info, train_data)
        if train is None:
            return {"checked": False, "reason": "no training data (run config data.train or data.task) to compare with"}
        held = task.questions("test", data=data, limit=cfg.limit)
    except HarnessError as e:  # an unreadable side (a hub split offline): the check is skipped, and says why
        log.warning("contamination check skipped: %s", e)
        return {"checked": False, "reason": str(e)}
    report = check_contamination(held.samples, train.samples, n=cfg.ngram)
    report_overlap(report, cfg, what=f"task {task.name}: ")
    return {"checked": True, "train_source": train.source, "compared": "bare questions", **report.to_dict()}
