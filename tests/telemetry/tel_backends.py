"""Start and stop the real tracing backends used by the integration tests, each from its own venv.

``tests/backends/setup_backends.sh`` creates the venvs (``.venv-mlflow``, ``.venv-phoenix``). A missing venv is a
failure with the command that creates it, never a skip. Servers listen on random free ports of 127.0.0.1, run in
their own process group (``start_new_session``) and are stopped as a whole group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = "tests/backends/setup_backends.sh"
READY_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_python(name: str) -> Path:
    """The interpreter of ``.venv-<name>``; fails the test (not skip) with the setup command when absent."""
    py = ROOT / f".venv-{name}" / "bin" / "python"
    if not py.exists():
        pytest.fail(f"{py} is missing: create it with `{SETUP} {name}` (run from the repository root)", pytrace=False)
    return py


@dataclass
class Server:
    name: str
    url: str
    proc: subprocess.Popen
    log: Path
    grpc_port: int | None = None

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=20)

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _wait_ready(server: Server, probe: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"{server.name} exited with {server.proc.returncode}:\n{server.log_tail()}", pytrace=False)
        try:
            with urllib.request.urlopen(server.url + probe, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    server.stop()
    pytest.fail(f"{server.name} not ready after {READY_TIMEOUT_S:.0f} s:\n{server.log_tail()}", pytrace=False)


def _spawn(name: str, argv: list[str], env: dict[str, str], workdir: Path) -> subprocess.Popen:
    log = open(workdir / f"{name}.log", "wb")
    return subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def start_mlflow(workdir: Path) -> Server:
    """``mlflow server`` with a SQLite store; OTLP/HTTP at ``<url>/v1/traces``."""
    py = backend_python("mlflow")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "PYTHONUNBUFFERED": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    argv = [
        str(py),
        "-m",
        "mlflow",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{workdir / 'mlflow.db'}",
        "--default-artifact-root",
        str(workdir / "artifacts"),
    ]
    server = Server("mlflow", f"http://127.0.0.1:{port}", _spawn("mlflow", argv, env, workdir), workdir / "mlflow.log")
    _wait_ready(server, "/health")
    return server


def start_phoenix(workdir: Path) -> Server:
    """``phoenix serve`` with its own working dir; OTLP/HTTP at ``<url>/v1/traces`` and gRPC on ``grpc_port``."""
    py = backend_python("phoenix")
    workdir.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_WORKING_DIR": str(workdir / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        "PYTHONUNBUFFERED": "1",
    }
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    argv = [str(py), "-m", "phoenix.server.main", "serve"]
    server = Server(
        "phoenix",
        f"http://127.0.0.1:{port}",
        _spawn("phoenix", argv, env, workdir),
        workdir / "phoenix.log",
        grpc_port=grpc_port,
    )
    _wait_ready(server, "/healthz")
    return server
