"""Session-wide test hooks: the summary names the sandbox isolation level this machine gave the code tests (each
pytest-xdist worker hands its line to the controller), and no test may leave torchrun's variables behind in this
process (every process started later would inherit them)."""

from __future__ import annotations

import os
import sys

import pytest

TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_ISOLATION_LINES = pytest.StashKey[set[str]]()


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


def _isolation_line() -> str | None:
    """The summary line for the sandbox this process started, or None when it started none."""
    service = sys.modules.get("sandbox.service")
    report = service.running_isolation() if service is not None else None
    if report is None:
        return None
    return (
        f"sandbox isolation level on this machine: {report.level} (missing: {', '.join(report.missing) or 'none'};"
        f" speed factor {report.speed_factor:.2f}; uid {os.geteuid()})"
    )


def pytest_sessionfinish(session):
    """Under pytest-xdist a worker hands its line to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    line = _isolation_line()
    if workeroutput is not None and line is not None:
        workeroutput["sandbox_isolation"] = line


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # noqa: ARG001 - pytest-xdist's hook signature
    line = getattr(node, "workeroutput", {}).get("sandbox_isolation")
    if line is not None:
        node.config.stash.setdefault(_ISOLATION_LINES, set()).add(line)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    """One line at the end: the level the code-execution tests ran under (when a test process started a sandbox)."""
    lines = set(config.stash.get(_ISOLATION_LINES, set()))
    own = _isolation_line()
    if own is not None:
        lines.add(own)
    for line in sorted(lines):
        terminalreporter.write_line(line)
