"""Rubric templates: the four built-in ones (package data) or a user's template file, and their rendering.

A rubric is plain text with ``{field}`` placeholders: ``{prompt}`` (chat prompts as their concatenated
contents), ``{completion}``, ``{answer}``, ``{context}``, any other column of the row, and ``{verdict_format}``
(filled with the verdict line the scale asks for). Placeholders must be plain names: ``{x.attr}``,
``{x[0]}`` and format specs are refused when the rubric loads, so a template cannot reach into Python objects.
Literal braces are written ``{{`` and ``}}``. Values are inserted as text and never formatted again, so braces
in a completion are harmless.

This module does not call the judge or parse its reply.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["BUILTIN_RUBRICS", "Rubric", "RubricFieldMissing", "load_rubric"]

BUILTIN_RUBRICS: tuple[str, ...] = ("correctness", "hallucination", "instruction_following", "reasoning_soundness")
_RESERVED = "verdict_format"
MAX_FIELD_CHARS = 20_000  # a completion longer than this is cut (and the cut is said in the text)


class RubricFieldMissing(KeyError):
    """The row lacks a column the rubric reads."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Rubric:
    """A loaded rubric: its ``name`` (built-in name or file path), ``text`` and the ``fields`` it reads."""

    name: str
    text: str
    fields: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, row: Mapping[str, Any], completion: str, verdict_format: str) -> str:
        """The prompt for the judge; raises :class:`RubricFieldMissing` naming a column the row lacks."""
        values: dict[str, str] = {_RESERVED: verdict_format}
        for f in self.fields:
            if f == _RESERVED:
                continue
            v = completion if f == "completion" else row.get(f)
            if v is None or (f != "completion" and v == ""):
                raise RubricFieldMissing(f"rubric {self.name!r} reads column {f!r}, which this row does not have")
            values[f] = _as_text(v)
        return self.text.format_map(values)


def _as_text(v: Any) -> str:
    if isinstance(v, list) and all(isinstance(m, Mapping) for m in v):  # chat messages
        v = "\n".join(str(m.get("content", "")) for m in v)
    s = v if isinstance(v, str) else str(v)
    if len(s) > MAX_FIELD_CHARS:
        s = s[:MAX_FIELD_CHARS] + f"\n[... cut: {len(s) - MAX_FIELD_CHARS} more characters]"
    return s


def _fields(text: str, origin: str) -> tuple[str, ...]:
    out: list[str] = []
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as e:
        raise ValueError(f"rubric {origin}: bad braces ({e}); write literal braces as {{{{ and }}}}") from None
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conv:
            raise ValueError(
                f"rubric {origin}: placeholder {{{name}{'!' + conv if conv else ''}"
                f"{':' + spec if spec else ''}}} is not a plain column name"
            )
        if name not in out:
            out.append(name)
    if "completion" not in out:
        raise ValueError(f"rubric {origin}: the template never shows the judge the {{completion}}")
    if _RESERVED not in out:
        raise ValueError(f"rubric {origin}: the template must say how to answer with {{{_RESERVED}}}")
    return tuple(out)


def load_rubric(rubric: str) -> Rubric:
    """A built-in rubric by name, or a template file by path; a bad template is a ValueError naming it."""
    if rubric in BUILTIN_RUBRICS:
        text = (resources.files("rewards.llm_judge") / "rubrics" / f"{rubric}.txt").read_text("utf-8")
        return Rubric(rubric, text, _fields(text, f"{rubric!r}"))
    path = Path(rubric).expanduser()
    if not path.is_file():
        raise ValueError(f"rubric {rubric!r} is neither a built-in ({', '.join(BUILTIN_RUBRICS)}) nor a file")
    text = path.read_text("utf-8")
    return Rubric(str(path), text, _fields(text, str(path)))
