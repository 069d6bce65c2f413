"""``harness traces push`` (wired into :mod:`harness.cli`): replay a run's file store into an OTLP backend.

Logging is configured by :mod:`harness.cli`, not here.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import HarnessError

__all__ = ["add_traces_parser", "cmd_traces_push"]


def cmd_traces_push(args: argparse.Namespace) -> int:
    """Handler of ``harness traces push``."""
    from harness.telemetry._export import parse_headers
    from harness.telemetry.push import push_file_store

    try:
        headers = parse_headers(",".join(args.header or ()))
    except ValueError as e:
        raise HarnessError(f"--header: {e}") from None
    res = push_file_store(args.run_dir, args.endpoint, protocol=args.protocol, headers=headers, timeout=args.timeout)
    print(f"pushed {res.spans} spans in {res.requests} requests to {args.endpoint}")
    return 0


def add_traces_parser(sub: Any) -> None:
    """Add ``harness traces push`` to an argparse subparsers object."""
    p = sub.add_parser("traces", help="work with a run's trace file store")
    push = p.add_subparsers(dest="traces_command", metavar="SUBCOMMAND").add_parser(
        "push", help="replay RUN_DIR/traces.jsonl into an OTLP backend"
    )
    push.add_argument("run_dir", help="run directory or traces.jsonl file")
    push.add_argument(
        "--endpoint",
        required=True,
        help="http/protobuf: full traces URL (http://host:4318/v1/traces); grpc: http://host:4317",
    )
    push.add_argument("--protocol", choices=("http/protobuf", "grpc"), default="http/protobuf")
    push.add_argument(
        "--header",
        action="append",
        metavar="KEY=VALUE",
        help="request header, e.g. x-mlflow-experiment-id=1 (repeatable)",
    )
    push.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    push.set_defaults(func=cmd_traces_push)
