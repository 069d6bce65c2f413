"""User tasks from a file: YAML (``.yaml``/``.yml``) or a small Python file, both reachable with ``--plugin FILE``.

A YAML file holds one task (its keys at the top level) or several (``tasks: [...]``)::

    name: my_sums
    source: data/sums_{split}.jsonl          # relative to this file; or hf:NAME[:CONFIG]
    splits: {train: train, test: test}
    fields: {id: id, prompt: question, answer: answer}
    prompt: {template: "Q: {question}\\nA:", target: "{answer}", chat: false, num_fewshot: 2}
    rewards: [math]                          # or [{name: math, weight: 1.0, params: {strict: false}}]
    success_reward: math
    generation: {max_new_tokens: 64, stop: ["\\n\\n"]}

Every key is checked: an unknown or mistyped one is a :class:`~harness.tasks.TaskError` naming the file and the
field path (``tasks[0].prompt.num_fewshot``). A reward name is checked when the task's rewards are built (by the
scoring path), not here. A Python file registers tasks with ``@task`` or defines module-level ``Task`` objects;
both are returned. This module does not sandbox a Python task file: it runs with the rights of the process.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.cfg.common import FieldMap
from harness.tasks._registry import _REGISTRY, _Entry, register_task
from harness.tasks._types import GenerationDefaults, PromptTemplate, Task, TaskError
from harness.types import RewardSpec

__all__ = ["load_task_file", "task_from_dict", "TASK_FILE_SUFFIXES"]

TASK_FILE_SUFFIXES = (".yaml", ".yml")


class _Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    template: str = "{prompt}"
    target: str | None = None
    system_prompt: str | None = None
    chat: bool = True
    fewshot_split: str | None = None
    num_fewshot: int = Field(0, ge=0)
    fewshot_seed: int = 1234
    chat_prompt: str | None = None
    chat_target: str | None = None
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"


class _Generation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_new_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    stop: list[str] = Field(default_factory=list)
    chat_stop: list[str] = Field(default_factory=list)
    k: int | None = Field(None, gt=0)

    @field_validator("stop", "chat_stop", mode="before")
    @classmethod
    def _one_word(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class _TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    source: str = Field(min_length=1)
    splits: dict[str, str] = Field(default_factory=lambda: {"test": "test"})
    fields: FieldMap = Field(default_factory=FieldMap)
    prompt: _Prompt = Field(default_factory=_Prompt)
    rewards: list[RewardSpec] = Field(min_length=1)
    success_reward: str | None = None
    success_threshold: float = 1.0
    generation: _Generation = Field(default_factory=_Generation)

    @field_validator("rewards", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if isinstance(v, (str, dict)):
            v = [v]
        return [{"name": r} if isinstance(r, str) else r for r in v] if isinstance(v, list) else v


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def task_from_dict(spec: dict[str, Any], *, origin: str, base: Path | None = None, where: str = "") -> Task:
    """A Task from the mapping a YAML task file holds; ``base`` resolves a relative local source.

    Raises:
        TaskError: naming ``origin``, the field path and what was expected.
    """
    try:
        s = _TaskSpec.model_validate(spec)
    except ValidationError as e:
        problems = "; ".join(f"{where}{_where(tuple(x['loc']))}: {x['msg']}" for x in e.errors())
        raise TaskError(f"{origin}: {problems}") from None
    names = [r.name for r in s.rewards]
    if s.success_reward is not None and s.success_reward not in names:
        raise TaskError(f"{origin}: {where}success_reward: {s.success_reward!r} is not one of the rewards {names}")
    source = s.source
    if base is not None and not source.startswith(("hf:", "pypi:")) and not Path(source).is_absolute():
        source = str(base / source)
    return Task(
        name=s.name,
        description=s.description,
        source=source,
        splits=dict(s.splits),
        fields=s.fields,
        prompt=PromptTemplate(**s.prompt.model_dump()),
        rewards=tuple(s.rewards),
        success_reward=s.success_reward or names[0],
        success_threshold=s.success_threshold,
        generation=GenerationDefaults(
            **{
                **s.generation.model_dump(),
                "stop": tuple(s.generation.stop),
                "chat_stop": tuple(s.generation.chat_stop),
            }
        ),
        origin=origin,
    )


def _load_yaml(path: Path) -> list[Task]:
    origin = f"file {path}"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise TaskError(f"{path}: not valid YAML: {e}") from None
    if isinstance(doc, dict) and set(doc) == {"tasks"}:
        items = doc["tasks"]
        if not isinstance(items, list) or not items:
            raise TaskError(f"{path}: tasks: expected a non-empty list of tasks")
        return [_one(item, origin, path, f"tasks[{i}].") for i, item in enumerate(items)]
    return [_one(doc, origin, path, "")]


def _one(item: Any, origin: str, path: Path, where: str) -> Task:
    if not isinstance(item, dict):
        raise TaskError(f"{path}: {where or 'top level'}: expected a mapping of task fields, got {type(item).__name__}")
    return task_from_dict(item, origin=origin, base=path.parent, where=where)


def _load_python(path: Path) -> list[Task]:
    from harness._plugin_import import import_plugin
    from harness.errors import RegistryError

    try:
        modname = import_plugin(str(path))
    except RegistryError as e:
        raise TaskError(str(e)) from None
    module = sys.modules[modname]
    origin = f"module {modname}"
    found = {n: e for n, e in _REGISTRY.entries.items() if e.origin in (origin, f"file {path}")}
    for value in vars(module).values():
        if isinstance(value, Task) and value.name not in found:
            register_task(dataclasses.replace(value, origin=value.origin or f"file {path}"))
            found[value.name] = _REGISTRY.entries[value.name]
    if not found:
        raise TaskError(f"{path}: defines no task (use @task('name') on a factory, or a module-level Task)")
    return [e.build() for e in found.values()]


def load_task_file(path: str | Path) -> list[Task]:
    """Read and register the tasks of a ``.yaml``/``.yml`` or ``.py`` file; return them.

    Raises:
        TaskError: the file is missing, of another kind, or malformed (naming the file and the field).
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise TaskError(f"{path}: task file not found")
    if p.suffix.lower() == ".py":
        return _load_python(p)
    if p.suffix.lower() not in TASK_FILE_SUFFIXES:
        raise TaskError(f"{path}: a task file is .yaml, .yml or .py, got {p.suffix or '(no suffix)'!r}")
    tasks = _load_yaml(p)
    for t in tasks:
        _REGISTRY.add(_Entry(t.name, t.origin, built=t))
    return tasks
