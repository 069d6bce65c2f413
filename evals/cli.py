"""``harness eval``: score checkpoints on held-out prompts with the training rewards.

::

    harness eval --checkpoint runs/r1/checkpoints/step-000010 --data heldout.jsonl --k 8
    harness eval --checkpoints runs/r1 --watch --data hf:gsm8k:main:test --backend vllm
    harness eval --checkpoint DIR --data SOURCE --backend openai --base-url http://127.0.0.1:8000/v1
    harness eval --checkpoint DIR --task gsm8k,humaneval --num-fewshot 0 --gen-kwargs max_new_tokens=512,temperature=0

With ``--task`` (or a run config's ``eval.task``) the task sets the data, prompt, rewards and generation defaults and
the work moves to :mod:`evals.task_cli`, which ends with one table across checkpoints and tasks.

Rewards default to the specs saved in the run's config.yaml; ``--reward NAME[=WEIGHT]`` adds one or overrides
one of the same name. Every other setting defaults to the run config's ``eval`` section, then to the built-in
defaults; the sampling parameters in force are printed before each evaluation, with the settings inherited from
the saved config named as such, and recorded in results.json. A saved ``eval.limit`` applies to the run's own
held-out set, not to a file given with ``--data``.

``add_parser`` plugs the command into the ``harness`` CLI; :func:`main` runs it standalone. This module parses
arguments, picks checkpoints and prints; the work is :func:`evals.runner.evaluate`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.checkpoint import CheckpointInfo, list_checkpoints, resolve_checkpoint, watch_checkpoints
from evals.config import EvalSection
from evals.runner import EvalResult, evaluate, resolve_settings
from evals.task_cli import chat_flag, given_settings, run_tasks, task_names
from harness.cfg.common import FieldMap
from harness.cfg.scoring import ScoringSection
from harness.errors import HarnessError
from harness.types import RewardSpec

__all__ = ["add_parser", "run_eval", "main", "merge_specs", "settings_from_args", "inherited_settings"]

log = logging.getLogger(__name__)

# flag dest -> EvalSection field, for flags that override the eval settings when given
_SETTING_FLAGS = {
    "k": "k",
    "backend": "backend",
    "temperature": "temperature",
    "top_p": "top_p",
    "max_new_tokens": "max_new_tokens",
    "seed": "seed",
    "batch_size": "batch_size",
    "success_reward": "success_reward",
    "threshold": "success_threshold",
    "ngram": "ngram",
    "limit": "limit",
    "score_timeout": "score_timeout",
    "workers": "workers",
    "device": "device",
    "base_url": "base_url",
    "model": "model",
    "concurrency": "concurrency",
    "request_timeout": "request_timeout",
    "max_retries": "max_retries",
}


def _configure(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", help="one checkpoint directory (or any save_pretrained directory)")
    which.add_argument("--checkpoints", metavar="RUN_DIR", help="every checkpoint of a run")
    p.add_argument(
        "--watch",
        action="store_true",
        help="with --checkpoints RUN: evaluate each new checkpoint as it is saved (also --task)",
    )
    p.add_argument("--watch-interval", type=float, default=30.0, help="seconds between looks for new checkpoints")
    p.add_argument("--watch-timeout", type=float, default=None, help="stop watching after this many idle seconds")
    p.add_argument(
        "--data",
        help="held-out set: .jsonl/.json/.parquet or hf:NAME[:CONFIG]:SPLIT (default: data.heldout); with --task: "
        "a source in the task's schema replacing the task's (TASK=SOURCE,... with several tasks)",
    )
    p.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="KEY=COLUMN",
        help="column mapping, KEY in id/prompt/answer/tests/messages (repeatable)",
    )
    p.add_argument(
        "--task",
        metavar="NAME[,NAME...]",
        help="named benchmark task(s) (harness tasks list): data, prompt, rewards and generation defaults in one word",
    )
    p.add_argument("--num-fewshot", type=int, help="few-shot examples per prompt (default: the task's)")
    p.add_argument(
        "--gen-kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE,...",
        help="max_new_tokens, temperature, top_p, stop (repeatable; stop=a,stop=b or stop=[...]), do_sample",
    )
    p.add_argument(
        "--log-samples",
        action="store_true",
        help="with --task: also copy the per-sample records to samples_<task>.jsonl (lm-eval's name)",
    )
    p.add_argument("--k", type=int, help="samples per prompt (default 8)")
    p.add_argument(
        "--backend",
        choices=["hf", "vllm", "openai", "reference"],
        help="generation backend (default hf; reference: each prompt's reference solution, no model)",
    )
    p.add_argument(
        "--reward",
        action="append",
        default=[],
        metavar="NAME[=WEIGHT]",
        help="add a reward or override a saved one (repeatable)",
    )
    p.add_argument("--param", action="append", default=[], metavar="NAME.KEY=VALUE", help="a --reward parameter")
    p.add_argument("--only-rewards", action="store_true", help="use only the --reward rewards, not the saved ones")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--batch-size", type=int, help="hf: prompts per generate call")
    p.add_argument("--success-reward", help="the reward pass@k/maj@k judge (default: the first weighted one)")
    p.add_argument("--threshold", type=float, help="success when that reward >= this (default 1.0)")
    p.add_argument("--ngram", type=int, help="contamination n-gram size (default 13)")
    p.add_argument("--fail-on-overlap", action="store_true", help="error when held-out prompts overlap training ones")
    p.add_argument("--strict", action="store_true", help="a bad data row is an error, not skipped")
    p.add_argument("--limit", type=int, help="only the first N prompts")
    p.add_argument("--train-data", help="training prompts for the contamination check (default: data.train)")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--apply-chat-template", action="store_true", help="apply the tokenizer's chat template")
    chat.add_argument("--no-chat-template", action="store_true", help="give the model plain text, no chat template")
    p.add_argument("--system-prompt", help="a system message before each prompt")
    p.add_argument("--output", help="output directory (with --checkpoints: one subdirectory per checkpoint)")
    p.add_argument("--restart", action="store_true", help="discard finished samples in the output and start over")
    p.add_argument("--score-timeout", type=float, help="seconds per reward call")
    p.add_argument("--workers", type=int, help="scoring worker processes")
    p.add_argument("--device", help="hf: cpu, cuda, cuda:1 ... (default auto)")
    p.add_argument("--gguf-file", help="hf: a GGUF file inside the checkpoint directory (dequantized on load)")
    p.add_argument("--base-url", help="openai: server URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="openai: model name (default: the server's first); vllm: model path")
    p.add_argument("--concurrency", type=int, help="openai: requests in flight")
    p.add_argument("--request-timeout", type=float, help="openai: seconds per request")
    p.add_argument("--max-retries", type=int, help="openai: retries per request")
    p.add_argument("--no-telemetry", action="store_true", help="record no eval span in the run's traces")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    from harness.cli import add_plugin_argument, add_scoring_arguments

    add_plugin_argument(p)
    add_scoring_arguments(p)
    p.set_defaults(func=run_eval)


def add_parser(subparsers: Any) -> None:
    """Add the ``eval`` subcommand to the ``harness`` parser."""
    _configure(subparsers.add_parser("eval", help="score checkpoints on held-out prompts with the training rewards"))


def merge_specs(base: Sequence[RewardSpec], extra: Sequence[RewardSpec]) -> list[RewardSpec]:
    """``base`` with each ``extra`` spec replacing the one of the same name, or appended."""
    out = {s.name: s for s in base}
    for s in extra:
        out[s.name] = s
    return list(out.values())


def settings_from_args(args: argparse.Namespace, info: CheckpointInfo) -> EvalSection:
    """The run config's eval section (or defaults) with the flags that were given applied on top.

    A saved ``eval.limit`` belongs to the run's own held-out set: it does not cut a file given with ``--data``
    (only ``--limit`` does).
    """
    base = info.config.eval if info.config is not None else EvalSection()
    update = given_settings(args, _SETTING_FLAGS)
    if getattr(args, "data", None) is not None and args.limit is None and base.limit is not None:
        update["limit"] = None
    if args.fail_on_overlap:
        update["fail_on_overlap"] = True
    try:
        return EvalSection.model_validate({**base.model_dump(), **update})
    except ValueError as e:
        raise HarnessError(f"invalid eval setting: {e}") from None


def _saved_config_path(info: CheckpointInfo) -> Path | None:
    places = (info.path / "config.yaml", info.run_dir / "config.yaml" if info.run_dir else None)
    return next((c for c in places if c is not None and c.is_file()), None)


def inherited_settings(args: argparse.Namespace, info: CheckpointInfo, settings: EvalSection) -> list[str]:
    """Lines naming each setting that came from the run's saved config rather than a flag or a default."""
    if info.config is None:
        return []
    saved, default = info.config.eval, EvalSection()
    flagged = set(given_settings(args, _SETTING_FLAGS))
    got = [
        f"{name}={getattr(settings, name)!r}".replace("'", "")
        for name in EvalSection.model_fields
        if name not in flagged
        and getattr(saved, name) != getattr(default, name)
        and getattr(settings, name) == getattr(saved, name)
    ]
    if saved.max_new_tokens is None and "max_new_tokens" not in flagged:
        got.append(f"max_new_tokens={settings.max_new_tokens} (trainer.max_completion_length)")
    where = _saved_config_path(info) or "the run's config"
    lines = [f"settings inherited from {where}: {', '.join(got)} (a flag overrides any of them)"] if got else []
    if getattr(args, "data", None) is not None and args.limit is None and saved.limit is not None:
        lines.append(
            f"the saved eval.limit={saved.limit} is not applied to --data {args.data} (it was set for the "
            f"run's own held-out set); pass --limit {saved.limit} to cut it"
        )
    return lines


def _fields(items: Sequence[str], info: CheckpointInfo) -> FieldMap | None:
    if not items:
        return None
    base = (info.config.data.fields if info.config else FieldMap()).model_dump()
    for item in items:
        key, eq, col = item.partition("=")
        if not eq or key not in base:
            raise HarnessError(f"--field {item!r}: expected KEY=COLUMN with KEY one of {', '.join(base)}")
        base[key] = col or None
    return FieldMap.model_validate(base)


def _shared_vllm(
    engines: dict[str, Any] | None, args: argparse.Namespace, info: CheckpointInfo, settings: EvalSection, path: Path
) -> Any:
    """One vllm engine for every checkpoint of a run: built for the first, weights reloaded for the next."""
    if engines is None or settings.backend != "vllm":
        return None
    from evals.backends import make_backend

    data = info.config.data if info.config is not None else None
    chat = chat_flag(args)
    if chat is None:
        chat = data.chat_template if data is not None else True
    system = args.system_prompt
    if system is None and data is not None:
        system = data.system_prompt
    be = engines.get("vllm")
    if be is None:
        be = engines["vllm"] = make_backend("vllm", path, settings, chat_template=chat, system_prompt=system)
    else:
        be.load_checkpoint(settings.model or path)
        be.chat_template, be.system_prompt = chat, system
    return be


def _scoring(args: argparse.Namespace, info: CheckpointInfo) -> ScoringSection:
    """The run's saved ``scoring`` section (or the defaults) with ``--scoring-backend``/``--ray-address`` on top."""
    from harness.cli import scoring_overrides

    data = info.config.scoring.model_dump() if info.config is not None else {}
    data.update({k.partition(".")[2]: v for k, v in scoring_overrides(args).items()})
    return ScoringSection.model_validate(data)


def _eval_one(
    args: argparse.Namespace, path: Path, output: Path | None, engines: dict[str, Any] | None = None
) -> EvalResult:
    from harness.cli import parse_reward_args
    from harness.plugins import add_plugins

    add_plugins(args.plugin)

    info = resolve_checkpoint(path)
    settings = resolve_settings(info, settings_from_args(args, info), None, None)
    extra = parse_reward_args(args.reward, args.param)
    saved = [] if args.only_rewards or info.config is None else list(info.config.rewards)
    specs = merge_specs(saved, extra) or None
    print(
        f"harness eval: {path} (step {info.step}) backend={settings.backend} k={settings.k} "
        f"temperature={settings.temperature:g} top_p={settings.top_p:g} max_new_tokens={settings.max_new_tokens} "
        f"seed={settings.seed}; rewards: {', '.join(s.name for s in specs) if specs else '(none)'}",
        file=sys.stderr,
    )
    for line in inherited_settings(args, info, settings):
        print(f"harness eval: {line}", file=sys.stderr)
    res = evaluate(
        path,
        args.data,
        specs,
        settings=settings,
        output_dir=output,
        resume=not args.restart,
        fields=_fields(args.field, info),
        chat_template=chat_flag(args),
        system_prompt=args.system_prompt,
        train_data=args.train_data,
        gguf_file=args.gguf_file,
        telemetry=not args.no_telemetry,
        backend=_shared_vllm(engines, args, info, settings, path),
        progress=not args.no_progress,
        scoring=_scoring(args, info),
    )
    if res.results["dataset"]["skipped_rows"]:
        print(
            f"warning: {res.results['dataset']['skipped_rows']} bad data rows skipped, first: "
            f"{res.results['dataset']['row_errors'][0]}",
            file=sys.stderr,
        )
    print(res.table())
    print(f"results: {res.output_dir / 'results.json'}", file=sys.stderr)
    ev = res.results["evaluation"]
    if info.run_dir is not None and not args.no_telemetry:
        where = (
            "the run's own: harness report shows it"
            if ev["own"]
            else f"not the run's own: harness report {info.run_dir} shows it with --eval {ev['id']}"
        )
        print(f"evaluation {ev['id']} ({ev['data']}, k={ev['k']}; {where})", file=sys.stderr)
    return res


def run_eval(args: argparse.Namespace) -> int:
    """Handler of ``harness eval``."""
    _check_watch(args)
    names = task_names(args)
    if names:
        return run_tasks(args, names, _SETTING_FLAGS, settings_from_args, _scoring)
    if args.num_fewshot is not None or args.log_samples:
        raise HarnessError("--num-fewshot and --log-samples go with --task (a plain --data set has no few-shot split)")
    if not (args.checkpoint or args.checkpoints):
        raise HarnessError(
            "one of --checkpoint DIR or --checkpoints RUN is required (or --task with --backend reference)"
        )
    if args.checkpoint:
        _eval_one(args, Path(args.checkpoint), Path(args.output) if args.output else None)
        return 0
    engines: dict[str, Any] = {}  # vllm: one engine across checkpoints
    try:
        return _eval_run(args, Path(args.checkpoints), engines)
    finally:
        for be in engines.values():
            be.close()


def _eval_run(args: argparse.Namespace, run_dir: Path, engines: dict[str, Any]) -> int:
    if not args.watch:
        found = list_checkpoints(run_dir)
        if not found:
            raise HarnessError(f"{run_dir}: no complete checkpoints under checkpoints/")
        for ckpt in found:
            _eval_one(args, ckpt, Path(args.output) / ckpt.name if args.output else None, engines)
        return 0
    for ckpt in watch_checkpoints(run_dir, interval=args.watch_interval, idle_timeout=args.watch_timeout):
        _eval_one(args, ckpt, Path(args.output) / ckpt.name if args.output else None, engines)
    print(f"harness eval: no new checkpoint for {args.watch_timeout:g} s; stopping", file=sys.stderr)
    return 0


def _check_watch(args: argparse.Namespace) -> None:
    """``--watch`` looks for new checkpoints in a run directory: it needs ``--checkpoints RUN``.

    Raises:
        HarnessError: ``--watch`` without ``--checkpoints``, or a negative ``--watch-interval``/``--watch-timeout``.
    """
    if args.watch and not args.checkpoints:
        raise HarnessError("--watch needs --checkpoints RUN (it waits for new checkpoints in RUN/checkpoints/)")
    if args.watch_interval < 0 or (args.watch_timeout is not None and args.watch_timeout < 0):
        raise HarnessError("--watch-interval and --watch-timeout take seconds >= 0")


def main(argv: list[str] | None = None) -> int:
    """Run ``harness eval`` standalone (``python -m evals.cli ...``)."""
    from harness.cli import run_standalone

    return run_standalone("harness eval", __doc__.split("\n")[0], _configure, run_eval, argv)


if __name__ == "__main__":
    sys.exit(main())
