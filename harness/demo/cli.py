"""The `harness demo` subcommand: run :func:`harness.demo.run.run_demo` and print its last screen."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.demo.run import SMOLLM2, DemoResult, DemoSettings, run_demo

__all__ = ["add_parser", "cmd_demo", "format_outcome"]


def format_outcome(res: DemoResult) -> str:
    """The closing lines: report table, files, contamination, and the held-out rise of each reward."""
    lines = ["", res.report_table]
    if res.report_files:
        md, png = res.report_files
        lines.append(f"report: {md}  plot: {png}")
    c = res.contamination
    if c.get("checked"):
        lines.append(
            f"contamination check: {c.get('exact', 0)} exact and {c.get('ngram', 0)} {c.get('n', 13)}-gram "
            f"overlaps between held-out and training prompts"
        )
    last = max(res.heldout) if res.heldout else None
    for name, r in res.rises.items():
        se = f", stderr {r.stderr:.3f} over {r.prompts} prompts" if r.stderr is not None else ""
        lines.append(f"held-out {name}: {r.start:.3f} before GRPO -> {r.end:.3f} at step {last} ({r.rise:+.3f}{se})")
    lines.append(f"run directory: {res.run_dir}  ({res.seconds:.0f} s)")
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace) -> int:
    """Handler of ``harness demo``."""
    s = DemoSettings.for_model(
        args.model,
        steps=args.steps,
        save_steps=args.save_steps,
        k=args.k,
        seed=args.seed,
        output_dir=args.output_dir,
        run_id=args.run_id,
        progress=not args.no_progress,
    )
    res = run_demo(s)
    print(format_outcome(res))
    rise = res.rise("math")
    if rise is not None and rise <= 0:
        print("the held-out math score did not rise in this run", file=sys.stderr)
    return 0


def add_parser(subparsers: Any) -> None:
    """Add ``harness demo`` to the `harness` command's subparsers."""
    d = DemoSettings()
    p = subparsers.add_parser("demo", help="train, evaluate every checkpoint held-out, trace and report, on a CPU")
    p.add_argument(
        "--model",
        choices=["tiny", "smollm2"],
        default=d.model,
        help="tiny: a random-init model warmed up in seconds (default); smollm2: SmolLM2-135M-Instruct",
    )
    p.add_argument(
        "--steps", type=int, default=None, help=f"GRPO steps (default {d.steps}; smollm2: {SMOLLM2['steps']})"
    )
    p.add_argument(
        "--save-steps",
        type=int,
        default=None,
        help=f"checkpoint (and evaluate) every N steps (default {d.save_steps}; smollm2: only the last)",
    )
    p.add_argument(
        "--k", type=int, default=None, help=f"held-out samples per prompt (default {d.k}; smollm2: {SMOLLM2['k']})"
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--output-dir", default=d.output_dir, help="where runs/<run-id> goes")
    p.add_argument("--run-id", default=None, help="default: demo-<UTC timestamp>")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)
