"""Make the misbehaving test plugins importable by name in this process and in the scoring workers."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # scoring workers are spawned with the parent's sys.path

import faulty_plugins  # noqa: E402,F401  (registers test_faulty and test_counter)
