"""``harness sandbox``: print the isolation level this machine gives untrusted code, and check it works.

Prints the level, the layers found and what is missing, the machine's speed factor, then (unless ``--no-check``)
runs one correct and one forged solution (an answer whose ``__eq__`` always says True, and an exit hook) through
the sandbox and says whether each verdict came out right: the correct one must pass, the forged one must fail
(it must never pass). Exit status 0 when the level is at least ``--min`` and both verdicts were right; when it is
1, a last line says which check failed and why.

This module only reports; it changes nothing on the machine.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from sandbox._results import LEVELS
from sandbox.service import SandboxError, get_sandbox

__all__ = ["main", "build_parser", "add_parser", "run"]

_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0"
_GOOD = "def add(a, b):\n    return a + b\n"
_FORGED = (
    "class A:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return A()\n"
    "import atexit, os\natexit.register(lambda: os._exit(0))\n"
)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``sandbox`` command's options (on ``parser`` when the CLI passes a subparser)."""
    p = parser or argparse.ArgumentParser(prog="harness sandbox", description=__doc__.split("\n")[0])
    p.add_argument("--min", choices=LEVELS, default="strong", help="fail (exit 1) below this level")
    p.add_argument("--no-check", action="store_true", help="only report the layers, run nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def add_parser(subparsers: Any) -> None:
    """Add ``harness sandbox`` to the `harness` command's subparsers."""
    p = subparsers.add_parser(
        "sandbox", help="report the sandbox's isolation level and check that a forged verdict fails (never passes)"
    )
    build_parser(p)
    p.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The command's body, for parsed ``args``."""
    sb = get_sandbox()
    try:
        rep = sb.isolation()
    except SandboxError as e:
        print(f"sandbox: could not start: {e}")
        return 1
    out: dict = {
        "level": rep.level,
        "missing": list(rep.missing),
        "speed_factor": round(rep.speed_factor, 3),
        "layers": rep.layers,
    }
    failures = []
    if not rep.at_least(args.min):
        failures.append(
            f"isolation level {rep.level} is below the required {args.min} (missing: {', '.join(rep.missing)})"
        )
    if not args.no_check:
        good = sb.run_tests(_GOOD, _TESTS)
        forged = sb.run_tests(_FORGED, _TESTS)
        out["check"] = {"correct_solution": good.status, "forged_solution": forged.status}
        if good.status != "pass":
            failures.append(f"the correct solution got {good.status!r}, not 'pass' ({good.reason})")
        if forged.status != "fail":
            failures.append(f"the forged solution got {forged.status!r}, not 'fail' ({forged.reason})")
    out["ok"] = not failures
    if failures:
        out["failed"] = failures
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(f"isolation level: {rep.level} (required: {args.min})")
        print(f"missing: {', '.join(rep.missing) or 'none'}")
        print(f"speed factor: {rep.speed_factor:.2f}")
        print("layers: " + ", ".join(f"{k}={v}" for k, v in sorted(rep.layers.items())))
        if "check" in out:
            print(
                f"check: correct solution -> {out['check']['correct_solution']} (must pass), "
                f"forged solution -> {out['check']['forged_solution']} (must fail)"
            )
        for why in failures:
            print(f"check failed: {why}")
        if not failures:
            print("check passed")
    return 0 if not failures else 1
