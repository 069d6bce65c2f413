"""``harness sandbox`` / ``python -m sandbox``: the report and its self-check; the package docstring example."""

from __future__ import annotations

import doctest
import json
import os

import pytest

import sandbox
from sandbox.cli import main


def test_report_json_with_check(capsys):
    rc = main(["--json", "--min", "basic"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["level"] in ("basic", "strong", "full") and out["speed_factor"] >= 1.0
    assert out["check"] == {"correct_solution": "pass", "forged_solution": "fail"} and out["ok"] is True


def test_report_fails_below_the_required_level(capsys, monkeypatch):
    import sandbox.cli as cli
    from sandbox import IsolationReport

    class _Weak:
        def isolation(self):
            return IsolationReport("basic", {"seccomp": False}, ("seccomp",), 1.0)

    monkeypatch.setattr(cli, "get_sandbox", lambda: _Weak())
    assert main(["--no-check", "--min", "full"]) == 1
    out = capsys.readouterr().out
    assert "missing: seccomp" in out
    assert (
        out.strip().splitlines()[-1]
        == "check failed: isolation level basic is below the required full (missing: seccomp)"
    )


def test_a_forged_verdict_that_passed_fails_the_check_and_says_so(capsys, monkeypatch):
    """The help promises that a forged verdict fails: a sandbox whose forged solution passed exits 1 and says why."""
    import sandbox.cli as cli
    from sandbox import TestsResult, get_sandbox

    real = get_sandbox()

    class _Fooled:
        def isolation(self):
            return real.isolation()

        def run_tests(self, code, tests):
            return TestsResult("pass", 2, 2)

    monkeypatch.setattr(cli, "get_sandbox", lambda: _Fooled())
    assert main(["--min", "basic"]) == 1
    assert "check failed: the forged solution got 'pass', not 'fail'" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0, reason="the full level needs root (uid switch, cgroups)")
def test_root_machine_reports_full(capsys):
    assert main(["--no-check", "--min", "full"]) == 0


def test_package_docstring_example_runs():
    result = doctest.testmod(sandbox)
    assert result.failed == 0 and result.attempted >= 1
