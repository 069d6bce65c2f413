"""``harness report``: the training-vs-held-out report of a run's spans (wired into :mod:`harness.cli`).

``harness report RUN_DIR`` reads the run's file store, ``--from phoenix|mlflow URL`` a backend; it prints the
table, writes ``report.md`` and ``report.png`` (into ``--out``, else RUN_DIR, else ``.``) and, with
``--fail-on-alarm``, exits 1 on a divergence alarm. Logging is configured by :mod:`harness.cli`, not here.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from harness.cfg.telemetry import AlarmSection
from harness.errors import ConfigError, HarnessError

__all__ = ["add_report_parser", "cmd_report"]

logger = logging.getLogger(__name__)


def _alarm_config(args: argparse.Namespace) -> AlarmSection:
    base = AlarmSection()
    cfg_path = Path(args.config) if args.config else (Path(args.run_dir) / "config.yaml" if args.run_dir else None)
    if cfg_path is not None and cfg_path.is_file():
        from harness.config import load_config

        try:
            base = load_config(cfg_path).telemetry.alarm
        except ConfigError as e:
            if args.config:
                raise
            logger.warning("alarm thresholds: defaults used, %s does not load: %s", cfg_path, e)
    overrides = {k: v for k in ("window", "train_rise", "heldout_min_rise") if (v := getattr(args, k)) is not None}
    try:
        return AlarmSection.model_validate({**base.model_dump(), **overrides})
    except ValueError as e:
        raise HarnessError(f"alarm thresholds: {e}") from None


def cmd_report(args: argparse.Namespace) -> int:
    """Handler of ``harness report``."""
    from harness.report.build import build_report, format_table, write_report
    from harness.report.sources import load_file_store, load_mlflow, load_phoenix

    alarm = _alarm_config(args)
    backend, url = args.source or ("", "")
    if not backend:
        if not args.run_dir:
            raise HarnessError("give RUN_DIR (its traces.jsonl is read) or --from phoenix|mlflow URL")
        spans, source = load_file_store(args.run_dir), f"file store {Path(args.run_dir) / 'traces.jsonl'}"
    elif backend == "phoenix":
        spans, source = load_phoenix(url, project=args.project), f"Phoenix {url} project {args.project}"
    elif backend == "mlflow":
        spans = load_mlflow(url, experiment_id=args.experiment_id, run_id=args.run_id)
        source = f"MLflow {url} experiment {args.experiment_id}"
    else:
        raise HarnessError(f"--from: expected phoenix or mlflow, got {backend!r}")
    report = build_report(spans, alarm, run_id=args.run_id, source=source, evaluation=args.eval)
    md, png = write_report(report, Path(args.out or args.run_dir or "."))
    print(json.dumps(report.to_dict(), indent=1) if args.json else f"{format_table(report)}\nwrote {md} and {png}")
    return 1 if args.fail_on_alarm and report.alarms else 0


def add_report_parser(sub: Any) -> None:
    """Add ``harness report`` to an argparse subparsers object."""
    p = sub.add_parser("report", help="training reward vs held-out score per checkpoint, with a divergence alarm")
    p.add_argument("run_dir", nargs="?", help="run directory (reads its traces.jsonl; outputs go here)")
    p.add_argument(
        "--from",
        dest="source",
        nargs=2,
        metavar=("BACKEND", "URL"),
        help="read spans from a backend instead: phoenix URL or mlflow URL",
    )
    p.add_argument("--run-id", help="the run to report (default: the only or latest run found)")
    p.add_argument("--project", default="grpo-harness", help="Phoenix project (default: grpo-harness)")
    p.add_argument("--experiment-id", default="0", help="MLflow experiment id (default: 0)")
    p.add_argument(
        "--eval",
        metavar="ID|all",
        help="held-out evaluations to show: an evaluation id (or prefix) or "
        "data set name, or all (default: the run's own evaluation, its config's data.heldout, eval "
        "settings and rewards)",
    )
    p.add_argument("--out", help="directory for report.md and report.png (default: RUN_DIR or .)")
    p.add_argument("--config", help="run config whose telemetry.alarm thresholds to use (default: RUN_DIR/config.yaml)")
    p.add_argument("--window", type=int, help="alarm window in checkpoints")
    p.add_argument("--train-rise", type=float, help="training reward rise that counts as rising")
    p.add_argument("--heldout-min-rise", type=float, help="held-out rise below which it counts as flat")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--fail-on-alarm", action="store_true", help="exit 1 when any divergence alarm fires")
    p.set_defaults(func=cmd_report)
