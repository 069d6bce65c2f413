"""The `harness` command: score | rewards list | train | eval | report | traces | sandbox | demo.

``score``, ``train``, ``eval`` and ``rewards list`` take ``--plugin MODULE_OR_FILE.py`` to import user rewards;
``score``, ``train`` and ``eval`` take ``--scoring-backend local|ray`` and ``--ray-address ADDRESS`` (over the run
config's ``scoring`` section).

Only this module configures logging. Subcommands owned by other packages register their own argparse parsers
through the ``grpo_harness.commands`` entry-point group (:mod:`harness.hooks`); their modules are imported when the
command line is parsed and import torch only inside the command, so ``harness score`` never imports torch.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError
from harness.types import RewardSpec

__all__ = [
    "main",
    "build_parser",
    "parse_reward_args",
    "run_standalone",
    "add_plugin_argument",
    "add_scoring_arguments",
    "scoring_overrides",
]

log = logging.getLogger("harness")


def parse_reward_args(rewards: list[str], params: list[str]) -> list[RewardSpec]:
    """``["math", "format=0.2"]`` and ``["math.tolerance=1e-6"]`` into RewardSpecs (values parsed as YAML)."""
    specs: dict[str, dict[str, Any]] = {}
    for r in rewards:
        name, _, w = r.partition("=")
        name = name.strip()
        if not name:
            raise HarnessError(f"--reward {r!r}: expected NAME or NAME=WEIGHT")
        try:
            weight = float(w) if w else 1.0
        except ValueError:
            raise HarnessError(f"--reward {r!r}: weight {w!r} is not a number") from None
        specs[name] = {"name": name, "weight": weight, "params": {}}
    for p in params:
        key, eq, value = p.partition("=")
        name, dot, pkey = key.partition(".")
        if not eq or not dot or not pkey:
            raise HarnessError(f"--param {p!r}: expected NAME.KEY=VALUE")
        if name not in specs:
            raise HarnessError(f"--param {p!r}: reward {name!r} is not selected with --reward")
        specs[name]["params"][pkey] = yaml.safe_load(value) if value.strip() else ""
    return [RewardSpec.model_validate(s) for s in specs.values()]


def add_plugin_argument(p: argparse.ArgumentParser) -> None:
    """``--plugin MODULE_OR_FILE.py`` (repeatable): import a module or file that registers rewards with @reward."""
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE.py",
        help="import a module or .py file that registers rewards with @reward (repeatable)",
    )


def add_scoring_arguments(p: argparse.ArgumentParser) -> None:
    """``--scoring-backend local|ray`` and ``--ray-address ADDRESS`` (the run config's ``scoring`` section)."""
    p.add_argument(
        "--scoring-backend",
        choices=("local", "ray"),
        default=None,
        help="where reward calls run: this machine's worker pool (local, the default) or Ray actors (ray)",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="with ray: 'auto' joins the running cluster, HOST:PORT that one; none starts a local Ray for the "
        "command (implies --scoring-backend ray)",
    )


def scoring_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``scoring.*`` config overrides the scoring flags ask for (``--ray-address`` alone implies ``ray``)."""
    out: dict[str, Any] = {}
    backend = getattr(args, "scoring_backend", None)
    address = getattr(args, "ray_address", None)
    if address and backend == "local":
        raise HarnessError("--ray-address goes with --scoring-backend ray, not local")
    if backend or address:
        out["scoring.backend"] = backend or "ray"
    if address:
        out["scoring.ray_address"] = address
    return out


def _scoring_section(args: argparse.Namespace, base: Any) -> Any:
    from harness.cfg import ScoringSection

    data = base.model_dump() if base is not None else {}
    data.update({k.partition(".")[2]: v for k, v in scoring_overrides(args).items()})
    return ScoringSection.model_validate(data)


def _cmd_score(args: argparse.Namespace) -> int:
    from harness.config import load_config
    from harness.plugins import add_plugins
    from harness.score_file import format_summary, score_file

    config = load_config(args.config) if args.config else None
    add_plugins([*(config.plugins if config else []), *args.plugin])
    specs = list(config.rewards) if config else []
    joined, task = None, None
    if args.task:
        from harness.tasks.score import task_rows_by_id

        task, joined = task_rows_by_id(args.task, data=args.data)
        specs = specs or list(task.rewards)
    elif args.data:
        print("harness score: --data needs --task (it replaces the task's source)", file=sys.stderr)
        return 2
    cli_specs = parse_reward_args(args.reward or [], args.param or [])
    by_name = {s.name: s for s in specs}
    for s in cli_specs:  # --reward overrides or adds to the config's rewards
        by_name[s.name] = s
    specs = list(by_name.values())
    if not specs:
        print("harness score: no rewards selected; use --reward NAME or --config run.yaml", file=sys.stderr)
        return 2
    from harness.scoring import scoring_pool

    pool = scoring_pool(_scoring_section(args, config.scoring if config else None))
    output = args.output or str(Path(args.input).with_suffix("")) + ".scored.jsonl"
    report = score_file(
        args.input,
        output,
        specs,
        workers=args.workers,
        timeout=args.timeout,
        resume=args.resume,
        samples=joined,
        samples_name=f"task {args.task!r}",
        id_keys=("id", task.fields.id) if task is not None and task.fields.id else ("id",),
        pool=pool,
    )
    print(format_summary(report), file=sys.stderr)
    print(f"scores written to {output}", file=sys.stderr)
    if report.bad_rows:
        for _lineno, reason in report.bad_rows[:10]:
            print(f"{args.input}: {reason}", file=sys.stderr)
        if args.strict:
            print(f"harness score: {len(report.bad_rows)} bad rows (--strict)", file=sys.stderr)
            return 1
    return 0


def _cmd_rewards_list(args: argparse.Namespace) -> int:
    from harness.plugins import add_plugins
    from harness.registry import list_rewards

    add_plugins(args.plugin)
    for e in list_rewards():
        params = ", ".join(str(p) for p in e.params) or "no parameters"
        print(f"{e.name}\n    origin: {e.origin}\n    isolation: {e.isolation}\n    params: {params}")
        if e.description:
            print(f"    {e.description}")
    return 0


def _add_score_parser(sub: Any) -> None:
    p = sub.add_parser("score", help="score a JSONL file of completions with registered rewards")
    p.add_argument("--reward", action="append", metavar="NAME[=WEIGHT]", help="a reward to run (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME.KEY=VALUE", help="a reward parameter (repeatable)")
    p.add_argument("--input", required=True, help="JSONL with a 'completion' field per row")
    p.add_argument("--output", help="JSONL written row by row (default with --task: INPUT.scored.jsonl)")
    p.add_argument("--task", help="join rows by 'id' to this task's test rows and score with its rewards")
    p.add_argument("--data", help="with --task: a local file in the hub's schema replacing the task's source")
    p.add_argument("--config", help="a run config whose 'rewards' section to use")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock seconds per reward call (default 30)")
    p.add_argument("--resume", action="store_true", help="skip ids already in the output")
    p.add_argument("--strict", action="store_true", help="exit non-zero when any row is bad")
    add_plugin_argument(p)
    add_scoring_arguments(p)
    p.set_defaults(func=_cmd_score)


def build_parser() -> argparse.ArgumentParser:
    """The full `harness` argument parser, with every installed subcommand."""
    parser = argparse.ArgumentParser(
        prog="harness", description="grpo-harness: rewards, GRPO training, held-out evaluation"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_score_parser(sub)
    rw = sub.add_parser("rewards", help="inspect registered rewards")
    rsub = rw.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND")
    rl = rsub.add_parser("list", help="every reward with its origin and parameters")
    add_plugin_argument(rl)
    rl.set_defaults(func=_cmd_rewards_list)
    from harness.report.cli import add_report_parser
    from harness.telemetry.cli import add_traces_parser

    add_report_parser(sub)
    add_traces_parser(sub)
    _add_plugged_commands(sub)  # train, eval, judge-agreement, sandbox, demo and other packages' commands
    return parser


def _add_plugged_commands(sub: Any) -> None:
    """Subcommands from the ``grpo_harness.commands`` entry points; one whose module is absent is skipped."""
    from harness.hooks import COMMANDS, other_entry_points, own_entry_points

    taken = set(sub.choices)
    own = own_entry_points(COMMANDS)
    for ep in [*own, *other_entry_points(COMMANDS)]:
        if ep.name in taken:
            continue  # a name harness or an earlier package already added
        try:
            add: Callable[[Any], None] = ep.load()
        except ModuleNotFoundError as e:
            module = ep.value.partition(":")[0]
            if e.name and not module.startswith(e.name):
                raise
            continue
        except Exception as e:  # noqa: BLE001 - another package's broken command must not take `harness` down
            if ep in own:
                raise
            warnings.warn(
                f"command plugin {ep.name} = {ep.value} failed to load: {type(e).__name__}: {e}", stacklevel=2
            )
            continue
        add(sub)
        taken = set(sub.choices)


def run_standalone(
    prog: str,
    description: str,
    configure: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: list[str] | None = None,
) -> int:
    """Run one subcommand on its own (``python -m trainer.cli``, ``torchrun -m trainer.cli``), as `harness` would."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    configure(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except HarnessError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `harness` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        rc = func(args)
    except HarnessError as e:
        print(f"harness {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0) if not inspect.isawaitable(rc) else 0


if __name__ == "__main__":
    sys.exit(main())
