"""`harness score`: score a JSONL file of completions with registered rewards, row by row, resumable.

Input rows hold ``completion`` (required: text, or chat messages whose last message is scored), ``id`` (default:
the line number), ``prompt``, ``answer``, ``tests`` and any other column (passed to plugins as Sample fields).
Each output row, in input order::

    {"id": ..., "rewards": {name: float | null}, "total": float | null,
     "scores": {name: {"value": ..., "status": ..., "answer": ..., "info": {...}}}}

Rows are written and flushed as soon as they are scored, so an interrupted run loses nothing already scored, and
``resume=True`` skips ids already in the output. A bad row (invalid JSON, no completion, a wrong type) is written
with status ``bad_input`` and the line number; the rest is scored.

With ``samples`` (``harness score --task NAME``), each row is joined by its ``id`` to the task's row of that id,
whose columns (gold answer, tests, entry point) are what the rewards see; the input row gives only ``id`` and
``completion`` (a row without ``id`` may give the dataset's own id column, HumanEval's ``task_id``). A row without
an id, or with an id the task does not have, is written unscored (``bad_input``) with the reason.

This module reads and writes files; the scoring itself is :mod:`harness.scoring`'s.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.errors import DataError
from harness.scoring import BatchResult, ScoringSession, TaskPool, score_while_generating
from harness.scoring._result import RewardSummary, reward_summary
from harness.types import RewardSpec, Sample, Score

__all__ = ["score_file", "ScoreFileReport", "parse_row", "join_row", "format_summary"]

_CHUNK = 64


@dataclass
class ScoreFileReport:
    """What a :func:`score_file` run did."""

    rows: int = 0  # rows written, bad ones included
    skipped: int = 0
    bad_rows: list[tuple[int, str]] = field(default_factory=list)
    scores: dict[str, list[Score]] = field(default_factory=dict)
    latency_s: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, RewardSummary]:
        return {n: reward_summary(col, self.latency_s.get(n, ())) for n, col in self.scores.items()}


def _completion_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        content = value[-1].get("content")
        return content if isinstance(content, str) else None
    return None


def parse_row(line: str, lineno: int) -> tuple[Sample, str] | tuple[str, str]:
    """``(Sample, completion)`` for a good JSONL line, else ``(id, reason)`` naming the line and the field."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        return str(lineno), f"line {lineno}: invalid JSON ({e.msg} at column {e.colno})"
    if not isinstance(row, dict):
        return str(lineno), f"line {lineno}: expected a JSON object, got {type(row).__name__}"
    rid = row.get("id", lineno)
    rid_s = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else str(lineno)
    if "completion" not in row:
        return rid_s, f"line {lineno}: missing field 'completion'"
    completion = _completion_text(row.pop("completion"))
    if completion is None:
        return rid_s, f"line {lineno}: field 'completion' must be a string or a list of chat messages"
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return rid_s, f"line {lineno}: field 'id' must be a string or an integer, got {type(rid).__name__}"
    row["id"] = rid
    prompt = row.get("prompt", "")
    if prompt is None:
        row["prompt"] = ""
    elif not isinstance(prompt, (str, list)):
        return (
            rid_s,
            f"line {lineno}: field 'prompt' must be a string or a list of chat messages, got {type(prompt).__name__}",
        )
    try:
        return Sample.model_validate(row), completion
    except ValueError as e:
        return rid_s, f"line {lineno}: {str(e).splitlines()[0]}"


def join_row(
    line: str, lineno: int, samples: Mapping[str, Sample], what: str, id_keys: Sequence[str] = ("id",)
) -> tuple[Sample, str] | tuple[str, str]:
    """``(the task's Sample, completion)`` for a line whose id is one of ``samples``, else ``(id, reason)``.

    The id is the first of ``id_keys`` the row has (``id``, then the dataset's own id column, so HumanEval's
    ``{"task_id", "completion"}`` sample files join as they are).
    """
    parsed = parse_row(line, lineno)
    if not isinstance(parsed[0], Sample):
        return parsed
    _, completion = parsed
    row = json.loads(line)  # parse_row has read it: a JSON object
    rid = next((row[k] for k in id_keys if k in row), None)
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        keys = " or ".join(repr(k) for k in dict.fromkeys(id_keys))
        return str(lineno), f"line {lineno}: missing field {keys} (the id of a row of {what})"
    sample = samples.get(str(rid))
    if sample is None:
        return str(rid), f"line {lineno}: id {str(rid)!r} is not a row of {what}"
    return sample, completion


def _read_rows(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                yield lineno, line


def _done_ids(output: Path) -> set[str]:
    """Ids already scored in ``output``; a torn last line (a killed run) is dropped from the file."""
    if not output.exists():
        return set()
    good, ids = [], set()
    for line in output.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
            ids.add(str(row["id"]))
            good.append(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    tmp = output.with_suffix(output.suffix + ".tmp")
    tmp.write_text("".join(x + "\n" for x in good), encoding="utf-8")
    os.replace(tmp, output)
    return ids


def _out_row(rid: str, specs: Sequence[RewardSpec], scores: dict[str, Score], total: float | None) -> str:
    return json.dumps(
        {
            "id": rid,
            "rewards": {s.name: scores[s.name].value for s in specs},
            "total": total,
            "scores": {s.name: scores[s.name].model_dump() for s in specs},
        },
        ensure_ascii=False,
        default=repr,
    )


def _bad_scores(specs: Sequence[RewardSpec], reason: str, lineno: int) -> dict[str, Score]:
    return {s.name: Score.unscored("bad_input", reason, line=lineno) for s in specs}


def score_file(
    input_path: str | Path,
    output_path: str | Path,
    specs: Sequence[RewardSpec],
    *,
    workers: int | None = None,
    timeout: float | None = None,
    resume: bool = False,
    progress: bool | None = None,
    samples: Mapping[str, Sample] | None = None,
    samples_name: str = "the task",
    id_keys: Sequence[str] = ("id",),
    pool: TaskPool | None = None,
) -> ScoreFileReport:
    """Score every row of ``input_path`` into ``output_path`` (see the module docstring).

    ``samples`` (by id) joins each row to a task's row: ``samples_name`` names the task in the reasons, and a
    row's id is the first of ``id_keys`` it has. ``pool``: where the reward calls run
    (:func:`harness.scoring.scoring_pool`); default: this machine's pool.
    """
    src, out = Path(input_path), Path(output_path)
    if not src.is_file():
        raise DataError(f"{src}: input file not found")
    session = ScoringSession(specs, timeout=timeout, workers=workers, pool=pool)
    done = _done_ids(out) if resume else set()
    report = ScoreFileReport(scores={s.name: [] for s in session.specs}, latency_s={s.name: [] for s in session.specs})
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm.auto import tqdm

    total_lines = sum(1 for _ in _read_rows(src))
    bar = tqdm(total=total_lines, desc="scoring", unit="row", disable=not show)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a" if resume else "w", encoding="utf-8") as f:
        parse = (lambda ln, no: join_row(ln, no, samples, samples_name, id_keys)) if samples is not None else parse_row
        chunks = _chunks(_read_rows(src), done, report, bar, parse)
        score_while_generating(  # chunk i is written while chunk i + 1 is read and scored
            session, chunks, _good_rows, on_scored=lambda sub, res: _write(session, sub.part, res, f, report, bar)
        )
    bar.close()
    session.close()
    return report


_Entry = tuple[int, str, Sample | None, str]  # line number, id, the sample (None: a bad row), completion or reason


def _chunks(
    rows: Iterator[tuple[int, str]],
    done: set[str],
    report: ScoreFileReport,
    bar: Any,
    parse: Callable[[str, int], tuple[Sample, str] | tuple[str, str]] = parse_row,
) -> Iterator[list[_Entry]]:
    """The rows not yet scored, parsed, ``_CHUNK`` at a time (read lazily: the next chunk is read while one scores)."""
    chunk: list[_Entry] = []
    for lineno, line in rows:
        parsed = parse(line, lineno)
        entry: _Entry
        if isinstance(parsed[0], Sample):
            sample, completion = parsed
            entry = (lineno, sample.id, sample, completion)
        else:
            rid, reason = parsed
            entry = (lineno, rid, None, reason)
        if entry[1] in done:
            report.skipped += 1
            bar.update(1)
            continue
        chunk.append(entry)
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _good_rows(chunk: list[_Entry]) -> tuple[list[_Entry], list[Sample], list[str]]:
    good = [(s, c) for (_, _, s, c) in chunk if s is not None]
    return chunk, [s for s, _ in good], [c for _, c in good]


def _write(
    session: ScoringSession, chunk: list[_Entry], res: BatchResult, f: TextIO, report: ScoreFileReport, bar: Any
) -> None:
    j = 0
    for lineno, rid, sample, payload in chunk:
        if sample is None:
            scores, total = _bad_scores(session.specs, payload, lineno), None
            report.bad_rows.append((lineno, payload))
            lats = {s.name: 0.0 for s in session.specs}
        else:
            scores = res.row(j)
            total = res.totals[j]
            lats = {n: res.latency_s[n][j] for n in res.scores}
            j += 1
        for name, sc in scores.items():
            report.scores[name].append(sc)
            report.latency_s[name].append(lats[name])
        f.write(_out_row(rid, session.specs, scores, total) + "\n")
        f.flush()
        report.rows += 1
        bar.update(1)


def format_summary(report: ScoreFileReport) -> str:
    """A plain-text table: per reward the mean over scored, counts per status, p50/p99 latency."""
    lines = [f"{'reward':<20} {'mean':>8} {'scored':>9}  {'p50 ms':>8} {'p99 ms':>8}  statuses"]
    for name, s in report.summary().items():
        mean = "-" if s["mean"] is None else f"{s['mean']:.4f}"
        p50 = "-" if s["p50_s"] is None else f"{s['p50_s'] * 1e3:.1f}"
        p99 = "-" if s["p99_s"] is None else f"{s['p99_s'] * 1e3:.1f}"
        st = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items(), key=lambda kv: -kv[1]))
        lines.append(f"{name:<20} {mean:>8} {s['scored']:>4}/{s['count']:<4}  {p50:>8} {p99:>8}  {st}")
    for name, col in report.scores.items():  # sandboxed rewards record their isolation level per score
        levels = sorted({str(sc.info["isolation"]) for sc in col if "isolation" in sc.info})
        if levels:
            lines.append(f"{name}: sandbox isolation level {', '.join(levels)}")
    tail = f"{report.rows - len(report.bad_rows)} rows scored"  # bad rows are written, never scored
    if report.skipped:
        tail += f", {report.skipped} skipped (already in the output)"
    if report.bad_rows:
        tail += f", {len(report.bad_rows)} bad rows not scored (written with status bad_input)"
    return "\n".join(lines + [tail])
