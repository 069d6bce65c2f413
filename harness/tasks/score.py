"""The task side of ``harness score --task NAME``: the task's held-out rows by id, for joining completions.

Rows are loaded zero-shot and plain: what a reward reads from a row is its gold answer, tests and entry point,
and the prompt it sees is the question alone (never few-shot examples, which hold other rows' answers). This
module does not score; :func:`harness.score_file.score_file` does, with the task's rewards.
"""

from __future__ import annotations

import logging

from harness.tasks._registry import get_task
from harness.tasks._types import Task, TaskError
from harness.types import Sample

__all__ = ["task_rows_by_id"]

log = logging.getLogger(__name__)


def task_rows_by_id(name: str, *, data: str | None = None, role: str = "test") -> tuple[Task, dict[str, Sample]]:
    """The task ``name`` and its ``role`` rows keyed by id (``data`` replaces the task's source).

    Raises:
        TaskError: unknown task, unreadable source, or a source without a single usable row.
    """
    task = get_task(name)
    res = task.load(role, data=data, num_fewshot=0, chat=False)
    if not res.samples:
        why = f"; first problem: {res.errors[0]}" if res.errors else ""
        raise TaskError(f"task {name!r}: {res.source} has no usable rows{why}")
    if res.errors:
        log.warning("task %s: %d row(s) of %s skipped; their ids cannot be scored", name, len(res.errors), res.source)
    log.info("task %s: %d %s rows from %s", name, len(res.samples), role, res.source)
    return task, {s.id: s for s in res.samples}
