"""Session-wide test hooks: the summary names the sandbox isolation level this machine gave the code tests, and no
test may leave torchrun's variables behind in this process (every process started later would inherit them)."""

from __future__ import annotations

import os
import sys

import pytest

TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _no_torchrun_leak(request):
    """An error at teardown, naming the test, when it leaves a torchrun variable changed in this process: two
    engine processes started later with one inherited MASTER_PORT collide (EADDRINUSE). Restored either way."""
    before = {k: os.environ.get(k) for k in TORCHRUN}
    yield
    leaked = {k: os.environ.get(k) for k in TORCHRUN if os.environ.get(k) != before[k]}
    for k in leaked:
        if before[k] is None:
            del os.environ[k]
        else:
            os.environ[k] = before[k]
    assert not leaked, f"{request.node.nodeid} left torchrun variables changed in this process: {leaked}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    """One line at the end: the level the code-execution tests ran under (when this process started a sandbox)."""
    service = sys.modules.get("sandbox.service")
    report = service.running_isolation() if service is not None else None
    if report is not None:
        terminalreporter.write_line(
            f"sandbox isolation level on this machine: {report.level} (missing: {', '.join(report.missing) or 'none'};"
            f" speed factor {report.speed_factor:.2f}; uid {os.geteuid()})"
        )
