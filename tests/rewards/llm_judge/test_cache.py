"""The judge's disk cache survives a writer killed mid-write: every entry under its final name is whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rewards.llm_judge import DiskCache, request_key

WRITER = """
import sys
from rewards.llm_judge import DiskCache
cache = DiskCache(sys.argv[1])
i = 0
while True:  # overwrite four keys again and again; the value is a function of the key
    k = i % 4
    cache.put(f"{k:064x}", {"text": str(k) * 2_000_000, "usage": {"input_tokens": k}})
    i += 1
"""


def _check_whole(cache: DiskCache, root: Path) -> int:
    seen = 0
    for p in root.rglob("*.json"):
        if p.name.startswith(".tmp-"):
            continue
        k = int(p.stem, 16)
        entry = cache.get(p.stem)
        assert entry is not None, f"{p.name} is not a whole entry"
        assert entry["text"] == str(k) * 2_000_000 and entry["usage"]["input_tokens"] == k
        seen += 1
    return seen


def test_readers_and_a_killed_writer_only_ever_see_whole_entries(tmp_path: Path) -> None:
    """A reader polls while another process overwrites entries, then the writer is SIGKILLed mid-loop: every
    read of an entry under its final name is whole. (A writer that writes the final file in place fails this.)"""
    root = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], env=env)
    cache, reads = DiskCache(root), 0
    try:
        deadline = time.monotonic() + 120
        while reads < 200 and time.monotonic() < deadline and proc.poll() is None:
            reads += _check_whole(cache, root)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert reads >= 200, "the writer died or wrote nothing"
    assert _check_whole(cache, root) == 4


def test_an_unreadable_entry_is_a_miss_and_is_replaced(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    key = request_key("m", "sha", "prompt", 0.0, 16, 0)
    cache.put(key, {"text": "VERDICT: yes"})
    path = next(tmp_path.rglob(f"{key}.json"))
    path.write_text('{"key": "' + key + '", "value": {"te')  # a torn file, as a disk error could leave
    assert cache.get(key) is None and cache.misses == 1
    cache.put(key, {"text": "VERDICT: no"})
    assert cache.get(key) == {"text": "VERDICT: no"} and cache.hits == 1


def test_an_entry_under_another_key_is_not_returned(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    a, b = request_key("m", "s", "p1", 0, 8, 0), request_key("m", "s", "p2", 0, 8, 0)
    cache.put(a, {"text": "x"})
    (tmp_path / b[:2]).mkdir(exist_ok=True)
    (tmp_path / b[:2] / f"{b}.json").write_bytes(next(tmp_path.rglob(f"{a}.json")).read_bytes())
    assert cache.get(b) is None
