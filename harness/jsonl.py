"""Reading a JSON-lines file that a job may still be writing, or that a killed job left with a torn last line.

Shared by the evaluator (resuming its ``samples.jsonl``) and the demo (reading it back); it writes nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

__all__ = ["read_records"]

log = logging.getLogger(__name__)


def read_records(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines of ``path`` and the byte length they span (a torn last line is excluded)."""
    path = Path(path)
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    good = 0
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # no newline: the write was cut short
        line = data[pos:end]
        pos = end + 1
        if not line.strip():
            good = pos
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s: dropping a corrupt line at byte %d and everything after it", path, good)
            break
        records.append(rec)
        good = pos
    return records, good
