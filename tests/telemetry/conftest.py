"""Session-scoped MLflow and Phoenix servers for the telemetry integration tests (started once, stopped after)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the helpers tel_backends and tel_runs

from tel_backends import start_mlflow, start_phoenix  # noqa: E402


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    server = start_mlflow(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def phoenix_server(tmp_path_factory):
    server = start_phoenix(tmp_path_factory.mktemp("phoenix"))
    yield server
    server.stop()
