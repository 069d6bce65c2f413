"""``harness train --config run.yaml [--resume] [--set trainer.lr=1e-5 ...]``.

``add_parser`` plugs the command into the ``harness`` CLI; :func:`main` runs it standalone, which is the form to
give a launcher for data parallelism::

    torchrun --nproc_per_node 2 -m trainer.cli --config run.yaml

This module parses arguments and prints a summary (rank 0 only); the work is :func:`trainer.loop.train`. After a
Ctrl-C (the step in flight is finished and checkpointed, see :mod:`trainer.interrupt`) it prints the command that
resumes the run and exits 130.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

import yaml

from harness.errors import ConfigError
from trainer import metrics as M

__all__ = ["add_parser", "parse_sets", "run_train", "resume_command", "main"]


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["trainer.lr=1e-5", "trainer.loss=dapo"]`` -> ``{"trainer.lr": 1e-05, ...}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected SECTION.FIELD=VALUE, e.g. trainer.lr=1e-5")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str):  # YAML 1.1 reads 1e-5 as a string
            try:
                value = float(value)
            except ValueError:
                pass
        out[key.strip()] = value
    return out


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="run config, YAML or TOML")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint of run.id")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set trainer.lr=1e-5 (repeatable)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    from harness.cli import add_plugin_argument, add_scoring_arguments

    add_plugin_argument(p)
    add_scoring_arguments(p)
    p.set_defaults(func=run_train)


def add_parser(subparsers: Any) -> None:
    """Add the ``train`` subcommand to the ``harness`` parser."""
    _configure(subparsers.add_parser("train", help="GRPO-train a model on a run config"))


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``harness train``: load the config (with overrides), train, print where the run went."""
    from harness.cli import scoring_overrides
    from harness.config import load_config
    from trainer.loop import train

    overrides = {**parse_sets(args.sets), **scoring_overrides(args)}
    config = load_config(args.config, overrides=overrides)
    if args.plugin:  # saved with the run's config, so `harness eval` of its checkpoints imports them too
        from harness.plugins import normalize_plugin

        config = config.model_copy(update={"plugins": [*config.plugins, *map(normalize_plugin, args.plugin)]})
    result = train(config, resume=args.resume, progress=not args.no_progress)
    if result.rank != 0:  # one summary per run, from rank 0
        return 130 if result.interrupted else 0
    last = result.metrics[-1] if result.metrics else {}
    mean = last.get(M.TOTAL_MEAN)
    print(
        f"run {result.run_id}: {result.steps} steps in {result.run_dir}; last reward mean "
        f"{'-' if mean is None else f'{mean:.4g}'}; checkpoint {result.last_checkpoint}"
    )
    if result.warnings:
        print(f"{len(result.warnings)} monitor warning(s); see the log above", file=sys.stderr)
    if result.interrupted:
        print(
            f"interrupted after step {result.steps} (checkpoint {result.last_checkpoint}); resume with:\n"
            f"  {resume_command(args, result.run_id if config.run.id is None else None)}",
            file=sys.stderr,
        )
        return 130
    return 0


def resume_command(args: argparse.Namespace, generated_id: str | None) -> str:
    """The ``harness train`` command line that continues this run (its id added when it was generated)."""
    parts = ["harness", "train", "--config", args.config, "--resume"]
    sets = [*args.sets, *([f"run.id={generated_id}"] if generated_id else [])]
    for item in sets:
        parts += ["--set", item]
    for plugin in args.plugin:
        parts += ["--plugin", plugin]
    if getattr(args, "scoring_backend", None):
        parts += ["--scoring-backend", args.scoring_backend]
    if getattr(args, "ray_address", None):
        parts += ["--ray-address", args.ray_address]
    return " ".join(shlex.quote(p) for p in parts)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m trainer.cli`` / ``torchrun -m trainer.cli``)."""
    from harness.cli import run_standalone

    return run_standalone("harness train", "GRPO-train a model on a run config", _configure, run_train, argv)


if __name__ == "__main__":
    sys.exit(main())
