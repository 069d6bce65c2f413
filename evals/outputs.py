"""The evaluator's output directory: ``samples.jsonl`` appended per batch, ``results.json`` written atomically, and
``state.json`` saying which settings made them, so a crashed evaluation resumes without redoing finished prompts.

Layout of one evaluation (``<run>/eval/step-000010/`` for a checkpoint of a run)::

    state.json      identity of the evaluation: dataset fingerprint, k, sampling, rewards, model (for resume)
    samples.jsonl   one JSON object per completion: prompt id, sample index, seed, completion, finish reason,
                    every reward's Score and the weighted total
    results.json    metrics (written last, atomically: a reader never sees half a file)

A prompt counts as finished when all ``k`` of its completions are in ``samples.jsonl``. Each batch is appended
with a single write followed by ``fsync``; a line cut short by a crash is dropped (and trimmed from the file) on
resume. Resuming with different settings raises :class:`ResumeError` rather than mixing two evaluations.

This module does not compute metrics or run models.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evals.errors import ResumeError
from evals.result_types import EvalResults
from harness.jsonl import read_records

__all__ = ["EvalOutput", "atomic_write_text", "atomic_write_json", "read_records"]

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, fsync and rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - some filesystems do not open directories
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """:func:`atomic_write_text` of ``obj`` as indented JSON."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


class EvalOutput:
    """One evaluation's output directory.

    Args:
        directory: where the files go (created).
        identity: the settings that determine the samples (dataset fingerprint, k, sampling, rewards, model);
            stored in ``state.json`` and compared on resume.
        k: completions per prompt.
    """

    def __init__(self, directory: str | Path, identity: Mapping[str, Any], k: int) -> None:
        self.dir = Path(directory)
        self.identity = json.loads(json.dumps(dict(identity), default=str))
        self.k = k

    @property
    def samples_path(self) -> Path:
        return self.dir / SAMPLES_FILE

    @property
    def results_path(self) -> Path:
        return self.dir / RESULTS_FILE

    def open(self, *, resume: bool = True) -> dict[str, list[dict[str, Any]]]:
        """Prepare the directory; return the finished prompts' records (prompt id -> k records by sample index).

        Raises:
            ResumeError: ``resume`` and the directory holds an evaluation made with other settings.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        state_path = self.dir / STATE_FILE
        if not resume:
            for name in (SAMPLES_FILE, RESULTS_FILE, STATE_FILE):
                (self.dir / name).unlink(missing_ok=True)
        elif state_path.exists():
            old = json.loads(state_path.read_text(encoding="utf-8")).get("identity", {})
            diff = sorted(key for key in set(old) | set(self.identity) if old.get(key) != self.identity.get(key))
            if diff:
                raise ResumeError(
                    f"{self.dir} holds an evaluation made with other settings (differs in: {', '.join(diff)}); "
                    "pass --restart to start it over or --output to write elsewhere"
                )
        atomic_write_json(state_path, {"identity": self.identity})
        records, good = read_records(self.samples_path)
        if self.samples_path.exists() and good < self.samples_path.stat().st_size:
            with self.samples_path.open("r+b") as f:  # trim a torn tail so appends start on a fresh line
                f.truncate(good)
        return self._finished(records)

    def _finished(self, records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        by_prompt: dict[str, dict[int, dict[str, Any]]] = {}
        for r in records:
            by_prompt.setdefault(str(r["prompt_id"]), {})[int(r["sample_index"])] = r
        done = {
            pid: [recs[i] for i in range(self.k)]
            for pid, recs in by_prompt.items()
            if all(i in recs for i in range(self.k))
        }
        partial = len(by_prompt) - len(done)
        if done or partial:
            log.info("%s: resuming: %d prompt(s) finished, %d partial (redone)", self.dir, len(done), partial)
        return done

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append records with one write and fsync."""
        blob = "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in records)
        if not blob:
            return
        with self.samples_path.open("a", encoding="utf-8") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())

    def write_results(self, results: EvalResults) -> Path:
        """Write ``results.json`` atomically and return its path."""
        atomic_write_json(self.results_path, results)
        return self.results_path
