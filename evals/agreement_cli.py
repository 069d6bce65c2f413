"""``harness judge-agreement``: how often a judge reward agrees with a deterministic one on the same rows.

::

    harness judge-agreement --reward llm_judge --param llm_judge.base_url=http://127.0.0.1:8000/v1 \\
        --param llm_judge.model=qwen2.5-7b-instruct --against math --data completions.jsonl

Every row of ``--data`` (the JSONL ``harness score`` reads: ``completion`` plus ``prompt``, ``answer`` and any
other column) is scored by both rewards through the scoring path; values ``>= --threshold`` count as pass.
Prints the confusion table, agreement and Cohen's kappa (:mod:`evals.agreement`); ``--output`` also writes
them as JSON. Rows either reward left unscored are counted apart, never as a fail; bad rows are skipped and
counted.

This module reads the file and prints; the statistics are :mod:`evals.agreement`'s pure functions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from evals.agreement import agreement_report, format_agreement
from harness.errors import DataError, HarnessError
from harness.types import Sample

__all__ = ["add_parser", "run_agreement"]


def add_parser(sub: Any) -> None:
    """Plug ``judge-agreement`` into the ``harness`` command."""
    p = sub.add_parser("judge-agreement", help="agreement of a judge reward with a deterministic reward on a file")
    p.add_argument("--reward", required=True, metavar="NAME", help="the judge reward, e.g. llm_judge")
    p.add_argument("--against", required=True, metavar="NAME", help="the reference reward, e.g. math")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME.KEY=VALUE",
        help="a parameter of either reward (repeatable)",
    )
    p.add_argument("--data", required=True, help="JSONL rows with 'completion' and the columns the rewards read")
    p.add_argument("--threshold", type=float, default=0.5, help="values >= this count as pass (default 0.5)")
    p.add_argument("--workers", type=int, default=None, help="scoring worker processes")
    p.add_argument("--timeout", type=float, default=None, help="seconds per reward call (default 30)")
    p.add_argument("--output", help="also write the result as JSON here")
    p.set_defaults(func=run_agreement)


def _load(path: Path) -> tuple[list[Sample], list[str], int]:
    from harness.score_file import parse_row

    if not path.is_file():
        raise DataError(f"--data {str(path)!r}: no such file")
    samples, completions, bad = [], [], 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            first, second = parse_row(line, lineno)
            if isinstance(first, Sample):
                samples.append(first)
                completions.append(second)
            else:
                bad += 1
                print(f"{path}: {second}; skipped", file=sys.stderr)
    if not samples:
        raise DataError(f"--data {str(path)!r}: no usable rows (each needs a 'completion')")
    return samples, completions, bad


def run_agreement(args: argparse.Namespace) -> int:
    """Score ``--data`` with both rewards and print their agreement."""
    from harness.cli import parse_reward_args
    from harness.scoring import score_batch

    if args.reward == args.against:
        raise HarnessError("--reward and --against name the same reward")
    specs = parse_reward_args([args.reward, args.against], args.param)
    samples, completions, bad = _load(Path(args.data))
    res = score_batch(samples, completions, specs, workers=args.workers, timeout=args.timeout)
    judge, ref = res.scores[args.reward], res.scores[args.against]
    statuses: Counter[str] = Counter(str(s.status) for s in judge)
    report = agreement_report([s.value for s in judge], [s.value for s in ref], args.threshold, dict(statuses))
    print(format_agreement(report, args.reward, args.against))
    if bad:
        print(f"{bad} bad rows skipped", file=sys.stderr)
    if args.output:
        out = {
            "judge": args.reward,
            "reference": args.against,
            "data": str(args.data),
            "rows": len(samples),
            "bad_rows": bad,
            "params": {s.name: s.params for s in specs},
            **report.to_dict(),
        }
        Path(args.output).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0
