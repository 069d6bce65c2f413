"""``harness tasks list`` and ``harness tasks show NAME``: the registered tasks, where they come from, what they use.

Plugged into ``harness`` through the ``grpo_harness.commands`` entry point ``tasks``. Listing builds each task's
description only; it reads no data and imports no torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from harness.tasks._registry import get_task, list_tasks
from harness.tasks._types import Task

__all__ = ["add_parser", "format_task_line", "format_generation"]


def format_generation(t: Task) -> str:
    """``max_new_tokens=256 temperature=0.0 k=1 stop=['Question:']``: the defaults that are set."""
    g = t.generation
    parts = [
        f"{k}={v}" for k, v in (("max_new_tokens", g.max_new_tokens), ("temperature", g.temperature)) if v is not None
    ]
    parts += [f"{k}={v}" for k, v in (("top_p", g.top_p), ("k", g.k)) if v is not None]
    if g.stop:
        parts.append(f"stop={list(g.stop)!r}")
    if g.chat_stop:
        parts.append(f"chat_stop={list(g.chat_stop)!r}")
    return " ".join(parts) or "backend defaults"


def _rewards(t: Task) -> str:
    def one(r: Any) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in r.params.items())
        return f"{r.name}" + (f"={r.weight:g}" if r.weight != 1.0 else "") + (f" ({params})" if params else "")

    success = f"; success: {t.success_reward} >= {t.success_threshold:g}" if t.success_reward else ""
    return (", ".join(one(r) for r in t.rewards) or "none") + success


def format_task_line(t: Task) -> str:
    """The block ``harness tasks list`` prints for one task."""
    splits = ", ".join(f"{role}={split}" for role, split in t.splits.items())
    p = t.prompt
    shots = (
        f"{p.num_fewshot}-shot from {p.fewshot_split or t.splits.get('fewshot', '?')}" if p.num_fewshot else "0-shot"
    )
    return "\n".join(
        [
            f"{t.name}" + (f"  {t.description}" if t.description else ""),
            f"    source: {t.source or '(none: give --data FILE)'}",
            f"    splits: {splits or 'none'}",
            f"    rewards: {_rewards(t)}",
            f"    generation: {format_generation(t)}",
            f"    prompt: {'chat' if p.chat else 'plain'}, {shots}",
            f"    origin: {t.origin}",
        ]
    )


def _use_plugins(specs: list[str]) -> None:
    from harness.plugins import add_plugins

    add_plugins(specs)


def _cmd_list(args: argparse.Namespace) -> int:
    _use_plugins(args.plugin)
    tasks = list_tasks()
    if args.json:
        print(json.dumps([t.summary() for t in tasks], indent=2))
        return 0
    for t in tasks:
        print(format_task_line(t))
    print(f"{len(tasks)} task(s)", file=sys.stderr)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    _use_plugins(args.plugin)
    t = get_task(args.name)
    if args.json:
        print(json.dumps(t.summary(), indent=2))
    else:
        print(yaml.safe_dump(t.summary(), sort_keys=False, allow_unicode=True, width=120), end="")
    return 0


def add_parser(sub: Any) -> None:
    """Add ``harness tasks list|show``."""
    from harness.cli import add_plugin_argument

    p = sub.add_parser("tasks", help="list or show the named tasks (benchmarks and training sets)")
    tsub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    lp = tsub.add_parser("list", help="every task: source, splits, rewards, generation defaults, origin")
    lp.add_argument("--json", action="store_true", help="print JSON")
    add_plugin_argument(lp)
    lp.set_defaults(func=_cmd_list)
    sp = tsub.add_parser("show", help="one task in full (prompt template, fields, rewards, generation)")
    sp.add_argument("name", help="the task's name")
    sp.add_argument("--json", action="store_true", help="print JSON")
    add_plugin_argument(sp)
    sp.set_defaults(func=_cmd_show)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])
