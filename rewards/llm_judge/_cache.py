"""A crash-safe disk cache of judge replies: one JSON file per key, written atomically.

An entry is written to a temporary file in the same directory, flushed and fsynced, then renamed over its final
name (``os.replace`` is atomic on POSIX), so a crash or a kill leaves either the whole entry or none: a reader
never sees half an entry. A file that still fails to parse (a disk error, a hand edit) counts as a miss and is
overwritten by the next put. Concurrent writers of the same key are harmless: each rename is whole.

What is cached is the judge's raw reply (text and token usage) for one request, keyed by the caller (see
:func:`rewards.llm_judge._plugin.request_key`), never a parsed score, so a fix to the parser applies to cached
replies too. Nothing here expires entries or bounds the directory's size; delete the directory to clear it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["DiskCache", "default_cache_dir"]

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$GRPO_HARNESS_JUDGE_CACHE``, else ``$XDG_CACHE_HOME/grpo-harness/llm_judge`` (``~/.cache`` by default)."""
    env = os.environ.get("GRPO_HARNESS_JUDGE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "grpo-harness" / "llm_judge"


class DiskCache:
    """``get(key)`` / ``put(key, entry)`` of JSON-serializable dicts under ``root`` (created on first put)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        if not key.isalnum():
            raise ValueError(f"cache key must be alphanumeric, got {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            entry = None
        except (OSError, ValueError) as e:
            log.debug("judge cache entry %s unreadable (%s); treated as a miss", path, e)
            entry = None
        ok = isinstance(entry, dict) and entry.get("key") == key
        with self._lock:
            if ok:
                self.hits += 1
            else:
                self.misses += 1
        return dict(entry["value"]) if ok else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"key": key, "value": value}, ensure_ascii=False).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
