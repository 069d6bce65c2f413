"""``harness eval --task NAME[,NAME...]``: every checkpoint on every task, then one table across them.

::

    harness eval --task gsm8k,humaneval --checkpoint runs/r1/checkpoints/step-000010
    harness eval --task gsm8k --checkpoints runs/r1 --num-fewshot 5 --gen-kwargs max_new_tokens=256,temperature=0
    harness eval --task gsm8k --data gsm8k_test.jsonl --checkpoint DIR --no-chat-template --limit 50
    harness eval --task gsm8k,humaneval --data gsm8k=gsm8k_test.jsonl --checkpoint DIR   # one local source of two
    harness eval --task humaneval --backend reference           # canonical solutions: checks the task, not a model
    harness eval --task gsm8k --checkpoints runs/r1 --watch     # each new checkpoint of a training run as it is saved

Output layout (``--output OUT``; default ``<run>/eval/tasks`` for a run's checkpoints, else ``eval/tasks``)::

    OUT/results.json                 every (checkpoint, task) metric with stderr, the table, lm-eval's layout
    OUT/[<checkpoint>/]<task>/       one evaluation: state.json, samples.jsonl, results.json (resumable)
    OUT/[<checkpoint>/]samples_<task>.jsonl   with --log-samples: the per-sample records of that evaluation

The checkpoint level is left out only when ``--output`` is given for a single checkpoint (never with ``--watch``:
more may come). With ``--watch`` the table and ``OUT/results.json`` are brought up to date after each checkpoint.
This module parses what the command line says about tasks and prints; the work is
:func:`evals.task_run.evaluate_task`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evals.backends import Backend, make_backend
from evals.checkpoint import CheckpointInfo, list_checkpoints, resolve_checkpoint, watch_checkpoints
from evals.config import EvalSection
from evals.genkwargs import parse_gen_kwargs
from evals.outputs import atomic_write_json
from evals.runner import saved_data_path
from evals.task_results import EvaluationRecord, format_task_table, summary
from evals.task_run import TaskEvaluation, TaskOverrides, checkpoint_metrics, evaluate_task, get_tasks
from harness.cfg.scoring import ScoringSection
from harness.config import load_config
from harness.errors import HarnessError

__all__ = ["run_tasks", "task_names", "given_settings", "chat_flag", "data_for"]


def chat_flag(args: argparse.Namespace) -> bool | None:
    """``--apply-chat-template`` -> True, ``--no-chat-template`` -> False, neither -> None (the default's)."""
    if getattr(args, "apply_chat_template", False):
        return True
    return False if getattr(args, "no_chat_template", False) else None


def given_settings(args: argparse.Namespace, flags: dict[str, str]) -> dict[str, Any]:
    """The eval settings given on the command line: the flags in ``flags`` (dest -> field) and ``--gen-kwargs``.

    Raises:
        HarnessError: a ``--gen-kwargs`` key contradicts its own flag (``--temperature 1 --gen-kwargs temperature=0``).
    """
    given = {field: getattr(args, dest) for dest, field in flags.items() if getattr(args, dest, None) is not None}
    for key, value in parse_gen_kwargs(getattr(args, "gen_kwargs", None) or []).given().items():
        if key in given and given[key] != value:
            raise HarnessError(f"--gen-kwargs {key}={value!r} contradicts --{key.replace('_', '-')} {given[key]!r}")
        given[key] = value
    if getattr(args, "strict", False):
        given["strict"] = True
    return given


def task_names(args: argparse.Namespace) -> str | list[str] | None:
    """The tasks to run: ``--task``, else (with no ``--data``) the run config's ``eval.task``, else its
    ``data.task`` (a run trained on a task is evaluated on it)."""
    if getattr(args, "task", None):
        return str(args.task)
    if getattr(args, "data", None) or not (args.checkpoint or args.checkpoints):
        return None
    first = Path(args.checkpoint) if args.checkpoint else next(iter(list_checkpoints(args.checkpoints)), None)
    if first is not None:
        config = resolve_checkpoint(first).config
    else:  # --watch before the first checkpoint: the run's own config.yaml (written when training starts)
        saved = Path(args.checkpoints) / "config.yaml"
        config = load_config(saved) if saved.is_file() else None
    return (config.eval.task or config.data.task) if config is not None else None


def _run_heldout(over: TaskOverrides, info: CheckpointInfo, task: str) -> TaskOverrides:
    """``over`` with the run's ``data.heldout`` as the data when the run trained on this task with a held-out file
    in its schema and no ``--data`` was given."""
    cfg = info.config
    if over.data or cfg is None or cfg.data.task != task or not cfg.data.heldout:
        return over
    held = saved_data_path(info, cfg.data.heldout)
    print(f"harness eval: task {task}: the run's held-out rows {held} (data.heldout)", file=sys.stderr)
    return dataclasses.replace(over, data=held)


def data_for(data: str | None, tasks: list[str]) -> dict[str, str]:
    """Which task's source ``--data`` replaces: ``FILE`` with one task, ``TASK=SOURCE[,TASK=SOURCE...]`` with any.

    >>> data_for("g.jsonl", ["gsm8k"]), data_for("gsm8k=g.jsonl,mbpp=m.parquet", ["gsm8k", "humaneval", "mbpp"])
    ({'gsm8k': 'g.jsonl'}, {'gsm8k': 'g.jsonl', 'mbpp': 'm.parquet'})

    Raises:
        HarnessError: several tasks and a plain source, or a ``TASK=`` naming a task that is not being run.
    """
    if not data:
        return {}
    pairs = [p.partition("=") for p in data.split(",")]
    if all(eq and name.strip() in tasks for name, eq, _ in pairs):
        return {name.strip(): src.strip() for name, _, src in pairs}
    if len(tasks) == 1:
        return {tasks[0]: data}
    raise HarnessError(
        f"--data {data!r}: with several tasks, name the task each source replaces, e.g. --data "
        f"{tasks[0]}=FILE (tasks: {', '.join(tasks)})"
    )


def _check(args: argparse.Namespace) -> None:
    if args.field:
        raise HarnessError("--field does not apply with --task: the task maps its own columns (see harness tasks show)")
    if args.backend != "reference" and not (args.checkpoint or args.checkpoints):
        raise HarnessError("--task needs --checkpoint DIR or --checkpoints RUN (or --backend reference: no model)")


def _checkpoints(args: argparse.Namespace, root: Path) -> list[Path]:
    if args.checkpoint:
        return [Path(args.checkpoint)]
    if args.checkpoints:
        found = list_checkpoints(args.checkpoints)
        if not found:
            raise HarnessError(f"{args.checkpoints}: no complete checkpoints under checkpoints/")
        return found
    root.mkdir(parents=True, exist_ok=True)  # --backend reference: no model; the output root stands in for one
    return [root]


def _root(args: argparse.Namespace) -> Path:
    if args.output:
        return Path(args.output)
    if args.checkpoints:
        return Path(args.checkpoints) / "eval" / "tasks"
    run_dir = resolve_checkpoint(args.checkpoint).run_dir if args.checkpoint else None
    return run_dir / "eval" / "tasks" if run_dir is not None else Path("eval") / "tasks"


def _backend(args: argparse.Namespace, path: Path, settings: EvalSection) -> Backend | None:
    """One model for every task of a checkpoint (each task sets its own chat mode on it); none for reference."""
    if settings.backend == "reference":
        return None
    return make_backend(settings.backend, path, settings, system_prompt=args.system_prompt, gguf_file=args.gguf_file)


def _log_samples(ev: TaskEvaluation) -> Path:
    dest = ev.result.output_dir.parent / f"samples_{ev.task}.jsonl"
    shutil.copyfile(ev.result.output_dir / "samples.jsonl", dest)
    return dest


def run_tasks(
    args: argparse.Namespace,
    names: str | list[str],
    flags: dict[str, str],
    settings_for: Callable[[argparse.Namespace, CheckpointInfo], EvalSection],
    scoring_for: Callable[[argparse.Namespace, CheckpointInfo], ScoringSection] | None = None,
) -> int:
    """Evaluate every checkpoint on every task; print the table; write the summary. Returns the exit status.

    ``flags`` maps flag dests to EvalSection fields; ``settings_for(args, info)`` gives a checkpoint's base
    settings (its run config's eval section with the flags applied); ``scoring_for(args, info)`` where its rewards run.
    """
    from harness.cli import parse_reward_args
    from harness.plugins import add_plugins

    add_plugins(args.plugin)
    tasks = get_tasks(names)
    _check(args)
    sources = data_for(args.data, [t.name for t in tasks])
    over = TaskOverrides(
        settings=given_settings(args, flags),
        num_fewshot=args.num_fewshot,
        chat=chat_flag(args),
        rewards=tuple(parse_reward_args(args.reward, args.param)),
        only_rewards=args.only_rewards,
        system_prompt=args.system_prompt,
    )
    root = _root(args)
    done: list[TaskEvaluation] = []

    def on_checkpoint(path: Path, nested: bool) -> None:
        info = resolve_checkpoint(path)
        base = settings_for(args, info)
        be = _backend(args, path, base)
        label = "reference" if path == root and args.backend == "reference" else path.name
        try:
            for task in tasks:
                if be is not None:  # one model for all tasks; each sets its own chat mode (hf, vllm and openai
                    # have the attribute; the Backend protocol does not name it)
                    be.chat_template = over.chat if over.chat is not None else task.prompt.chat  # type: ignore[attr-defined]
                out = (root / label if nested else root) / task.name
                print(f"harness eval: task {task.name} on {label} ({task.source}) -> {out}", file=sys.stderr)
                ev = evaluate_task(
                    task,
                    path,
                    _run_heldout(dataclasses.replace(over, data=sources.get(task.name)), info, task.name),
                    settings=base,
                    output_dir=out,
                    backend=be,
                    resume=not args.restart,
                    gguf_file=args.gguf_file,
                    train_data=args.train_data,
                    telemetry=not args.no_telemetry,
                    progress=not args.no_progress,
                    label=label,
                    scoring=scoring_for(args, info) if scoring_for is not None else None,
                )
                _report_one(ev, args)
                done.append(ev)
        finally:
            if be is not None:
                be.close()

    if args.watch:  # each new checkpoint on every task; the table and summary so far after each one
        for path in watch_checkpoints(args.checkpoints, interval=args.watch_interval, idle_timeout=args.watch_timeout):
            on_checkpoint(path, nested=True)
            _summarize(root, done)
        print(f"harness eval: no new checkpoint for {args.watch_timeout:g} s; stopping", file=sys.stderr)
        return 0
    ckpts = _checkpoints(args, root)
    nested = len(ckpts) > 1 or not args.output  # one directory per checkpoint unless --output names one for it
    for path in ckpts:
        on_checkpoint(path, nested)
    _summarize(root, done)
    return 0


def _summarize(root: Path, done: list[TaskEvaluation]) -> None:
    """Print the table across checkpoints and tasks; write ``root/results.json``."""
    entries = [e for ev in done for e in checkpoint_metrics(ev)]
    print(format_task_table(entries), flush=True)
    dest = root / "results.json"
    atomic_write_json(dest, summary(entries, [_evaluation_record(ev) for ev in done]))
    print(f"results: {dest}", file=sys.stderr)


def _evaluation_record(ev: TaskEvaluation) -> EvaluationRecord:
    return EvaluationRecord(
        checkpoint=ev.checkpoint, task=ev.task, output_dir=str(ev.result.output_dir), results=ev.result.results
    )


def _report_one(ev: TaskEvaluation, args: argparse.Namespace) -> None:
    res = ev.result.results
    t = res["task"]
    gen = t["generation"]
    chat = "on" if t["chat_template"] else "off"
    print(
        f"harness eval: {ev.task} on {ev.checkpoint}: {res['dataset']['prompts']} prompts, k={t['k']}, "
        f"{t['num_fewshot']}-shot, chat template {chat}, temperature={gen['temperature']:g} "
        f"top_p={gen['top_p']:g} max_new_tokens={gen['max_new_tokens']} stop={json.dumps(gen['stop'])} "
        f"seed={gen['seed']}; rewards: {', '.join(r['name'] for r in t['rewards'])}; success: "
        f"{t['success_reward']} >= {t['success_threshold']:g}",
        file=sys.stderr,
    )
    ds = res["dataset"]
    if ds["skipped_rows"]:
        print(f"warning: {ds['skipped_rows']} bad data rows skipped, first: {ds['row_errors'][0]}", file=sys.stderr)
    samples = _log_samples(ev) if args.log_samples else ev.result.output_dir / "samples.jsonl"
    print(f"harness eval: per-sample records: {samples}", file=sys.stderr)
