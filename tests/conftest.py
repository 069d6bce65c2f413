"""Session-wide test hooks: the summary names the sandbox isolation level this machine gave the code tests."""

from __future__ import annotations

import os
import sys


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    """One line at the end: the level the code-execution tests ran under (when this process started a sandbox)."""
    service = sys.modules.get("sandbox.service")
    report = service.running_isolation() if service is not None else None
    if report is not None:
        terminalreporter.write_line(
            f"sandbox isolation level on this machine: {report.level} (missing: {', '.join(report.missing) or 'none'};"
            f" speed factor {report.speed_factor:.2f}; uid {os.geteuid()})"
        )
