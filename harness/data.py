"""Load prompt sets (training prompts, held-out sets) into :class:`~harness.types.Sample` lists.

Sources:

* ``path/to/file.jsonl`` (also ``.ndjson``; ``.json`` holding either JSON lines or one JSON array of objects),
* ``path/to/file.parquet`` (also ``.pq``), read with pyarrow,
* ``hf:NAME[:CONFIG]:SPLIT`` through :func:`datasets.load_dataset` (``NAME`` may be a local directory or a
  builder such as ``json`` with ``data_files`` given in ``hf_kwargs``).

A :class:`~harness.cfg.common.FieldMap` says which columns hold the id, the prompt (plain text or a chat message
list), the gold answer and the tests; every other column reaches reward plugins as an extra field. A bad row
(invalid JSON, a missing or empty prompt, a prompt of the wrong type, a duplicate id) is reported as a
:class:`RowError` naming the file, the line (or row number) and the field, and skipped; with ``strict=True`` the
first bad row raises :class:`~harness.errors.DataError` instead. A source that cannot be read at all always
raises.

Also here: :func:`to_messages` and :func:`render_prompt`, the one way a Sample's prompt becomes model input
(chat template on or off, optional system prompt), shared by the trainer and the evaluator.

This module does not download anything on its own accord (``datasets`` may, for hub names, when the machine is
online) and does not tokenize or truncate prompts.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cfg.common import FieldMap
from harness.errors import DataError
from harness.types import Sample

__all__ = [
    "FieldMap",
    "LoadResult",
    "RowError",
    "load_samples",
    "parse_hf_source",
    "row_to_sample",
    "to_messages",
    "render_prompt",
    "fingerprint_samples",
]

log = logging.getLogger(__name__)

_SAMPLE_FIELDS = frozenset(Sample.model_fields)
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class RowError:
    """One skipped row: where it is and what is wrong with it.

    ``line`` is the 1-based line of a JSON-lines file, or the 1-based row number of a Parquet file, a JSON array
    or a ``datasets`` split (then ``unit`` is ``"row"``).
    """

    source: str
    line: int
    field: str | None
    message: str
    unit: str = "line"

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.unit == "line" else f"{self.source}: row {self.line}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


@dataclass(frozen=True)
class LoadResult:
    """The samples read from a source, the rows skipped, and a fingerprint of what was read.

    ``fingerprint`` is a SHA-256 over the canonical JSON of the loaded samples (not the file bytes), so two
    sources that load to the same samples share it and a changed row changes it.
    """

    source: str
    samples: list[Sample]
    errors: list[RowError] = field(default_factory=list)
    fingerprint: str = ""

    def __len__(self) -> int:
        return len(self.samples)


def parse_hf_source(source: str) -> tuple[str, str | None, str]:
    """Split ``hf:NAME[:CONFIG]:SPLIT`` into ``(name, config, split)``.

    >>> parse_hf_source("hf:gsm8k:main:test")
    ('gsm8k', 'main', 'test')
    >>> parse_hf_source("hf:openai_humaneval:test")
    ('openai_humaneval', None, 'test')
    """
    if not source.startswith("hf:"):
        raise DataError(f"{source}: not a datasets source; expected hf:NAME[:CONFIG]:SPLIT")
    parts = source[3:].split(":")
    if len(parts) == 2 and all(parts):
        return parts[0], None, parts[1]
    if len(parts) == 3 and parts[0] and parts[2]:
        return parts[0], parts[1] or None, parts[2]
    raise DataError(f"{source}: expected hf:NAME[:CONFIG]:SPLIT (for example hf:gsm8k:main:test)")


def _check_messages(value: Any) -> str | None:
    """None when ``value`` is a valid chat message list, else what is wrong with it."""
    if not isinstance(value, list) or not value:
        return f"expected a non-empty list of chat messages, got {type(value).__name__}"
    for i, m in enumerate(value):
        if not isinstance(m, Mapping):
            return f"message {i}: expected an object with role and content, got {type(m).__name__}"
        if not isinstance(m.get("role"), str) or not m.get("role"):
            return f"message {i}: role must be a non-empty string"
        if not isinstance(m.get("content"), str):
            return f"message {i}: content must be a string, got {type(m.get('content')).__name__}"
    return None


def row_to_sample(row: Any, fields: FieldMap, default_id: str) -> Sample | tuple[str | None, str]:
    """Turn one row into a Sample, or return ``(field, problem)`` when the row is unusable.

    The prompt comes from ``fields.messages`` when set (a chat message list), else from ``fields.prompt`` (a
    non-empty string or a chat message list). Columns named by the map are consumed; other columns are kept as
    extra fields, except ones that would shadow a Sample field (``id``, ``prompt``, ``answer``, ``tests``).
    """
    if not isinstance(row, Mapping):
        return None, f"expected a JSON object per row, got {type(row).__name__}"
    prompt_col = fields.messages or fields.prompt
    if prompt_col not in row or row[prompt_col] is None:
        key = "messages" if fields.messages else "prompt"
        have = ", ".join(repr(k) for k in list(row)[:20]) or "none"
        return prompt_col, (
            f"missing prompt column {prompt_col!r}; the row has columns {have}; "
            f"map one with data.fields.{key}=COLUMN (harness eval: --field {key}=COLUMN)"
        )
    prompt = row[prompt_col]
    if isinstance(prompt, str):
        if fields.messages:
            return prompt_col, "expected a list of chat messages, got a string"
        if not prompt.strip():
            return prompt_col, "prompt is empty"
    else:
        if hasattr(prompt, "tolist"):  # numpy arrays from parquet
            prompt = prompt.tolist()
        problem = _check_messages(prompt)
        if problem:
            what = "" if fields.messages else "expected a string or "
            return prompt_col, f"{what}{problem}"
        prompt = [{"role": m["role"], "content": m["content"]} for m in prompt]
    sid: Any = default_id
    if fields.id and row.get(fields.id) is not None:
        sid = row[fields.id]
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            return fields.id, f"expected a string or integer id, got {type(sid).__name__}"
        sid = str(sid)
        if not sid:
            return fields.id, "id is empty"
    consumed = {c for c in (fields.id, prompt_col, fields.answer, fields.tests) if c}
    extra = {k: v for k, v in row.items() if k not in consumed and k not in _SAMPLE_FIELDS and isinstance(k, str)}
    return Sample(
        id=sid,
        prompt=prompt,
        answer=row.get(fields.answer) if fields.answer else None,
        tests=row.get(fields.tests) if fields.tests else None,
        **extra,
    )


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line, row, problem)`` for every non-blank line."""
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line), None
            except json.JSONDecodeError as e:
                yield lineno, None, f"invalid JSON: {e.msg} (column {e.colno})"


def _read_json_file(path: Path) -> tuple[Iterable[tuple[int, Any, str | None]], str]:
    with path.open("r", encoding="utf-8", errors="replace") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: invalid JSON array: {e.msg}") from None
        return ((i, r, None) for i, r in enumerate(rows, 1)), "row"
    return _iter_jsonl(path), "line"


def _read_parquet(path: Path) -> Iterable[tuple[int, Any, str | None]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow comes with datasets
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for a broken file
        raise DataError(f"{path}: not a readable Parquet file: {e}") from None
    return ((i, r, None) for i, r in enumerate(table.to_pylist(), 1))


def _read_hf(source: str, hf_kwargs: Mapping[str, Any] | None) -> Iterable[tuple[int, Any, str | None]]:
    name, config, split = parse_hf_source(source)
    try:
        import datasets
    except ImportError:
        raise DataError(f"{source}: needs the datasets package (pip install datasets)") from None
    try:
        ds = datasets.load_dataset(name, config, split=split, **dict(hf_kwargs or {}))
    except Exception as e:  # datasets raises many types (FileNotFoundError, ValueError, ConnectionError, ...)
        raise DataError(
            f"{source}: datasets.load_dataset({name!r}, {config!r}, split={split!r}) failed: {type(e).__name__}: {e}"
        ) from None
    return ((i, r, None) for i, r in enumerate(ds, 1))


def _open_source(source: str, hf_kwargs: Mapping[str, Any] | None) -> tuple[Iterable[tuple[int, Any, str | None]], str]:
    if source.startswith("hf:"):
        return _read_hf(source, hf_kwargs), "row"
    path = Path(source)
    if not path.is_file():
        raise DataError(
            f"{source}: data file not found (expected a .jsonl/.json/.parquet file or hf:NAME[:CONFIG]:SPLIT)"
        )
    suffix = path.suffix.lower()
    if suffix in _PARQUET_SUFFIXES:
        return _read_parquet(path), "row"
    if suffix == ".json":
        return _read_json_file(path)
    if suffix in _JSONL_SUFFIXES:
        return _iter_jsonl(path), "line"
    raise DataError(
        f"{source}: unknown data format {suffix or '(no suffix)'!r}; expected .jsonl, .json, .parquet "
        "or hf:NAME[:CONFIG]:SPLIT"
    )


def fingerprint_samples(samples: Iterable[Sample]) -> str:
    """SHA-256 (hex) of the samples' canonical JSON, in order."""
    h = hashlib.sha256()
    for s in samples:
        h.update(json.dumps(s.model_dump(mode="json"), sort_keys=True, default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def load_samples(
    source: str | Path,
    fields: FieldMap | Mapping[str, Any] | None = None,
    *,
    strict: bool = False,
    limit: int | None = None,
    hf_kwargs: Mapping[str, Any] | None = None,
) -> LoadResult:
    """Read a prompt set into Samples; bad rows are reported and skipped (or raise, with ``strict``).

    Args:
        source: a ``.jsonl``/``.json``/``.parquet`` path or ``hf:NAME[:CONFIG]:SPLIT``.
        fields: which columns hold id, prompt (or chat messages), answer and tests; default: those names.
        strict: raise :class:`DataError` at the first bad row instead of skipping it.
        limit: keep at most this many good samples (the first ones, in file order).
        hf_kwargs: extra keyword arguments for ``datasets.load_dataset`` (``data_files``, ``cache_dir``...).

    Returns:
        A :class:`LoadResult`; ``errors`` lists every skipped row as ``file:line: field: problem``.

    Raises:
        DataError: the source cannot be read at all (missing file, unknown format, unreadable Parquet, a failing
            ``load_dataset``), or, with ``strict``, the first bad row.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(p, "w").write('{"prompt": "1+1?", "answer": "2"}\\n{"answer": "3"}\\n')
    >>> res = load_samples(p)
    >>> [s.prompt for s in res.samples], str(res.errors[0]).split("d.jsonl:2: ")[1].split(";")[:2]
    (['1+1?'], ["prompt: missing prompt column 'prompt'", " the row has columns 'answer'"])
    """
    source = str(source)
    fmap = fields if isinstance(fields, FieldMap) else FieldMap.model_validate(dict(fields or {}))
    rows, unit = _open_source(source, hf_kwargs)
    stem = Path(source).stem if not source.startswith("hf:") else parse_hf_source(source)[2]
    samples: list[Sample] = []
    errors: list[RowError] = []
    seen: dict[str, int] = {}
    for lineno, row, problem in rows:
        if limit is not None and len(samples) >= limit:
            break
        err: RowError | None = None
        if problem is not None:
            err = RowError(source, lineno, None, problem, unit)
        else:
            out = row_to_sample(row, fmap, f"{stem}-{lineno}")
            if isinstance(out, tuple):
                err = RowError(source, lineno, out[0], out[1], unit)
            elif out.id in seen:
                err = RowError(
                    source, lineno, fmap.id, f"duplicate id {out.id!r} (first at {unit} {seen[out.id]})", unit
                )
            else:
                seen[out.id] = lineno
                samples.append(out)
        if err is not None:
            if strict:
                raise DataError(f"{err} (strict mode: bad rows are errors)")
            errors.append(err)
    if errors:
        log.warning("%s: skipped %d bad row(s); first: %s", source, len(errors), errors[0])
    return LoadResult(source=source, samples=samples, errors=errors, fingerprint=fingerprint_samples(samples))


def to_messages(prompt: str | list[dict[str, Any]], system_prompt: str | None = None) -> list[dict[str, str]]:
    """The prompt as chat messages, with ``system_prompt`` first unless the prompt already has a system message.

    >>> to_messages("2+2?", "Be brief.")
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': '2+2?'}]
    """
    msgs = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if system_prompt and not (msgs and msgs[0].get("role") == "system"):
        msgs.insert(0, {"role": "system", "content": system_prompt})
    return msgs


def render_prompt(
    prompt: str | list[dict[str, Any]],
    tokenizer: Any = None,
    *,
    chat_template: bool = True,
    system_prompt: str | None = None,
) -> str:
    """The text a model is given for ``prompt``.

    With ``chat_template`` and a tokenizer that has one, the messages go through
    ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``. Otherwise the message contents are joined
    with blank lines (system prompt first), which is what a base model without a template expects.

    >>> render_prompt("2+2?", None, system_prompt="Answer with a number.")
    'Answer with a number.\\n\\n2+2?'
    """
    msgs = to_messages(prompt, system_prompt)
    if chat_template and tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in msgs)
