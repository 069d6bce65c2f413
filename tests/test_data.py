"""harness.data: JSONL / JSON / Parquet / datasets sources, field mapping, bad rows with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data import FieldMap, load_samples, parse_hf_source, render_prompt, to_messages
from harness.errors import DataError


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_good_rows_keep_extra_columns(tmp_path: Path) -> None:
    p = _write_jsonl(
        tmp_path / "d.jsonl",
        [
            json.dumps({"id": 1, "prompt": "2+2?", "answer": "4", "level": 3}),
            "",
            json.dumps({"id": "b", "prompt": "3+3?", "answer": 6}),
        ],
    )
    res = load_samples(p)
    assert res.errors == []
    assert [s.id for s in res.samples] == ["1", "b"]
    assert (res.samples[0].model_extra or {})["level"] == 3
    assert res.samples[1].answer == 6
    assert len(res.fingerprint) == 64


def test_bad_rows_reported_with_file_line_and_field_and_skipped(tmp_path: Path) -> None:
    p = _write_jsonl(
        tmp_path / "bad.jsonl",
        [
            json.dumps({"prompt": "ok 1", "answer": "1"}),  # line 1 good
            json.dumps({"answer": "2"}),  # line 2 missing prompt
            "{not json",  # line 3 invalid JSON
            json.dumps({"prompt": 42}),  # line 4 wrong type
            json.dumps({"prompt": "   "}),  # line 5 empty
            json.dumps(["a", "list"]),  # line 6 not an object
            json.dumps({"id": 1.5, "prompt": "x"}),  # line 7 id of wrong type
            json.dumps({"prompt": [{"role": "user", "content": 3}]}),  # line 8 bad message
            json.dumps({"id": "d", "prompt": "first"}),  # line 9 good
            json.dumps({"id": "d", "prompt": "again"}),  # line 10 duplicate id
        ],
    )
    res = load_samples(p)
    assert [s.prompt for s in res.samples] == ["ok 1", "first"]
    got = {e.line: str(e) for e in res.errors}
    assert sorted(got) == [2, 3, 4, 5, 6, 7, 8, 10]
    assert got[2].startswith(f"{p}:2: prompt: missing prompt column 'prompt'; the row has columns 'answer'")
    assert got[3].startswith(f"{p}:3: invalid JSON")
    assert "expected a string or" in got[4] and "got int" in got[4]
    assert "empty" in got[5]
    assert "JSON object" in got[6]
    assert got[7].startswith(f"{p}:7: id:")
    assert "message 0: content must be a string" in got[8]
    assert "duplicate id 'd' (first at line 9)" in got[10]


def test_strict_raises_on_first_bad_row(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "bad.jsonl", [json.dumps({"prompt": "a"}), json.dumps({"question": "b"})])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: prompt: missing prompt column"):
        load_samples(p, strict=True)


def test_field_mapping_and_chat_messages(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}]
    p = _write_jsonl(
        tmp_path / "chat.jsonl",
        [
            json.dumps({"uid": "q1", "conversation": msgs, "solution": "4", "prompt": "shadowed"}),
            json.dumps({"uid": "q2", "conversation": "not a list", "solution": "5"}),
        ],
    )
    res = load_samples(p, FieldMap(id="uid", messages="conversation", answer="solution"))
    assert len(res.samples) == 1
    s = res.samples[0]
    assert s.id == "q1" and s.answer == "4" and s.prompt == msgs
    assert "prompt" not in (s.model_extra or {})  # a column that would shadow a Sample field is not an extra
    assert res.errors[0].field == "conversation" and "chat messages" in res.errors[0].message
    # a mapping given as a dict works too
    res2 = load_samples(p, {"id": "uid", "prompt": "conversation", "answer": "solution"})
    assert [x.id for x in res2.samples] == ["q1", "q2"]  # as a prompt column, plain text is fine
    assert isinstance(res2.samples[0].prompt, list) and res2.samples[1].prompt == "not a list"


def test_default_ids_and_limit(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "set.jsonl", [json.dumps({"prompt": f"p{i}"}) for i in range(5)])
    res = load_samples(p, limit=3)
    assert [s.id for s in res.samples] == ["set-1", "set-2", "set-3"]


def test_json_array_and_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [{"id": "a", "prompt": "x?", "answer": "1"}, {"id": "b", "prompt": None, "answer": "2"}]
    (tmp_path / "arr.json").write_text(json.dumps(rows), encoding="utf-8")
    res = load_samples(tmp_path / "arr.json")
    assert [s.id for s in res.samples] == ["a"]
    assert str(res.errors[0]).startswith(f"{tmp_path / 'arr.json'}: row 2: prompt: missing prompt column")

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    resp = load_samples(tmp_path / "d.parquet")
    assert [s.id for s in resp.samples] == ["a"] and resp.errors[0].line == 2 and resp.errors[0].unit == "row"
    assert resp.fingerprint == res.fingerprint  # same samples, same fingerprint, whatever the container


def test_datasets_source_reads_local_directory(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    d = tmp_path / "myset"
    d.mkdir()
    _write_jsonl(d / "test.jsonl", [json.dumps({"prompt": "a", "answer": "1"}), json.dumps({"prompt": "b"})])
    res = load_samples(f"hf:{d}:test", hf_kwargs={"cache_dir": str(tmp_path / "cache")})
    assert [s.prompt for s in res.samples] == ["a", "b"]
    assert res.samples[0].id == "test-1"


def test_unreadable_sources_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data file not found"):
        load_samples(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="unknown data format '.csv'"):
        load_samples(tmp_path / "x.csv")
    with pytest.raises(DataError, match="expected hf:NAME"):
        parse_hf_source("hf:onlyname")
    assert parse_hf_source("hf:gsm8k:main:test") == ("gsm8k", "main", "test")


def test_messages_and_render_without_template() -> None:
    assert (
        to_messages([{"role": "system", "content": "S"}, {"role": "user", "content": "u"}], "other")[0]["content"]
        == "S"
    )
    assert render_prompt("q", None, system_prompt="sys") == "sys\n\nq"
    assert render_prompt([{"role": "user", "content": "q"}], None, chat_template=True) == "q"


def test_a_missing_prompt_column_names_the_columns_there_and_the_mapping(tmp_path: Path) -> None:
    """Regression: on the old main the message was only ``missing prompt column``, with no hint of the fix."""
    p = _write_jsonl(tmp_path / "q.jsonl", [json.dumps({"question": "2+2?", "solution": "4"})])
    res = load_samples(p)
    msg = str(res.errors[0])
    assert "'question', 'solution'" in msg and "data.fields.prompt=COLUMN" in msg and "--field prompt=COLUMN" in msg
    chat = load_samples(p, FieldMap(messages="conversation"))
    assert "missing prompt column 'conversation'" in str(chat.errors[0]) and "data.fields.messages=COLUMN" in str(
        chat.errors[0]
    )


def test_readme_documents_the_field_mapping() -> None:
    """Regression: on the old main README.md named a field mapping but never said how to write one."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "data.fields" in readme and "--field" in readme
    section = readme[readme.index("`data.fields`") :][:800]
    for key in ("`id`", "`prompt`", "`answer`", "`tests`", "`messages`"):  # every column the mapping names
        assert key in section, key
    assert "fields: {prompt: question, answer: final}" in section  # and how one is written
