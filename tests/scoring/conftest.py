"""Make the misbehaving test plugins registered in this process; the scoring workers import them by name
(this directory is on pytest's ``pythonpath``, and workers are spawned with the parent's sys.path)."""

from __future__ import annotations

import faulty_plugins  # noqa: F401  (registers test_faulty, test_counter, test_hang, test_slow_build, test_env)
