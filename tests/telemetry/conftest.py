"""Session-scoped MLflow and Phoenix servers for the telemetry integration tests (started once, stopped after)."""

from __future__ import annotations

import pytest
from tel_backends import start_mlflow, start_phoenix  # this directory is on pytest's pythonpath


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
