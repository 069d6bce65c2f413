"""Fixtures of the evaluator tests (the helpers they use live in ``eval_runs``; this directory is on pytest's
``pythonpath``, so scoring workers, spawned with the parent's sys.path, import the test rewards too)."""

from __future__ import annotations

import os
from pathlib import Path

import evals_test_rewards  # noqa: F401  (registers evals_contains_answer, evals_length, evals_slow)
import pytest
from eval_runs import make_run, save_tiny_model

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture()
def run_dir(tmp_path: Path, tiny_model_dir: Path) -> Path:
    return make_run(tmp_path, tiny_model_dir)
