"""`harness score` end to end through the real console script: output format, bad rows, resume, strict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = [sys.executable, "-m", "harness.cli"]


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*HARNESS, *args], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def infile(tmp_path: Path) -> Path:
    rows = [
        json.dumps({"id": "a", "prompt": "2+2?", "completion": "so \\boxed{4}"}),
        json.dumps({"completion": "<think>hm</think><answer>4</answer>"}),
        "{not json",
        json.dumps({"id": "d", "prompt": "no completion"}),
        json.dumps({"id": "e", "completion": 12}),
        json.dumps({"id": "f", "completion": [{"role": "assistant", "content": "\\boxed{x}"}]}),
    ]
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_output_rows_in_order_with_bad_rows_reported(infile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = _run(
        "score",
        "--reward",
        "boxed_present",
        "--reward",
        "think_answer_format=0.5",
        "--input",
        str(infile),
        "--output",
        str(out),
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "2", "3", "d", "e", "f"]  # id defaults to the line number
    assert rows[0]["rewards"] == {"boxed_present": 1.0, "think_answer_format": 0.0}
    assert rows[1]["rewards"] == {"boxed_present": 0.0, "think_answer_format": 1.0}
    assert rows[1]["total"] == 0.5
    assert set(rows[0]["scores"]["boxed_present"]) == {"value", "status", "answer", "info"}
    for r, why in zip(
        rows[2:5], ["invalid JSON", "missing field 'completion'", "field 'completion' must be"], strict=True
    ):
        assert r["total"] is None and r["rewards"]["boxed_present"] is None
        assert r["scores"]["boxed_present"]["status"] == "bad_input"
        assert why in r["scores"]["boxed_present"]["info"]["reason"]
    assert rows[5]["rewards"]["boxed_present"] == 1.0  # chat-message completion: the last message is scored
    assert "line 3: invalid JSON" in proc.stderr and "boxed_present" in proc.stderr and "p99" in proc.stderr
    # the 3 bad rows are not counted as scored (on the old main: "6 rows scored, 3 bad rows")
    assert "3 rows scored, 3 bad rows not scored" in proc.stderr


def test_strict_turns_bad_rows_into_a_nonzero_exit(infile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = _run(
        "score", "--reward", "boxed_present", "--input", str(infile), "--output", str(out), "--strict", check=False
    )
    assert proc.returncode == 1 and "3 bad rows" in proc.stderr
    assert len(out.read_text().splitlines()) == 6  # the good rows are still scored


def test_resume_skips_scored_ids_and_repairs_a_torn_last_line(infile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    _run("score", "--reward", "boxed_present", "--input", str(infile), "--output", str(out))
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:15])  # a run killed while writing row 3
    proc = _run("score", "--reward", "boxed_present", "--input", str(infile), "--output", str(out), "--resume")
    again = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in again] == ["a", "2", "3", "d", "e", "f"]
    assert "2 skipped" in proc.stderr


def test_params_reach_the_plugin_and_unknown_params_fail_clearly(infile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    _run(
        "score",
        "--reward",
        "format_regex",
        "--param",
        "format_regex.pattern=boxed",
        "--input",
        str(infile),
        "--output",
        str(out),
    )
    assert json.loads(out.read_text().splitlines()[0])["rewards"]["format_regex"] == 1.0
    proc = _run(
        "score",
        "--reward",
        "boxed_present",
        "--param",
        "boxed_present.colour=red",
        "--input",
        str(infile),
        "--output",
        str(out),
        check=False,
    )
    assert proc.returncode == 2 and "'colour'" in proc.stderr and "accepted parameters" in proc.stderr


def test_missing_input_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = _run(
        "score",
        "--reward",
        "boxed_present",
        "--input",
        str(tmp_path / "nope.jsonl"),
        "--output",
        str(tmp_path / "o.jsonl"),
        check=False,
    )
    assert proc.returncode == 2 and "nope.jsonl: input file not found" in proc.stderr


def test_rewards_from_a_config_file(infile: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("rewards:\n  boxed_present: 1.0\n  tag_count: {weight: 0.0}\n")
    out = tmp_path / "out.jsonl"
    _run("score", "--config", str(cfg), "--input", str(infile), "--output", str(out))
    row = json.loads(out.read_text().splitlines()[0])
    assert set(row["rewards"]) == {"boxed_present", "tag_count"} and row["total"] == 1.0


def test_rewards_list_shows_origin_and_parameters() -> None:
    out = _run("rewards", "list").stdout
    assert "boxed_present" in out and "origin: built-in (rewards.format)" in out
    assert "pattern: str (required)" in out


def test_code_reward_summary_reports_the_sandbox_isolation_level(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "tests": "assert add(1, 2) == 3", "completion": "def add(a, b):\n    return a + b"},
        {"id": 2, "tests": "assert add(1, 2) == 3", "completion": "def add(a, b):\n    return a - b"},
    ]
    src = tmp_path / "code.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    proc = _run("score", "--reward", "code", "--input", str(src), "--output", str(out))
    assert [json.loads(x)["rewards"]["code"] for x in out.read_text().splitlines()] == [1.0, 0.0]
    assert "code: sandbox isolation level" in proc.stderr


def test_a_parameter_value_of_the_wrong_type_exits_2_naming_it(tmp_path: Path) -> None:
    """Regression: on the old main ``ngram_size=abc`` ran, erred on every row, and exited 0."""
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"completion": "a b c a b c"}) + "\n")
    proc = _run(
        "score",
        "--reward",
        "repetition",
        "--param",
        "repetition.ngram_size=abc",
        "--input",
        str(inp),
        "--output",
        str(tmp_path / "out.jsonl"),
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "'ngram_size'" in proc.stderr and "'abc'" in proc.stderr and "expected int" in proc.stderr


def test_a_row_without_a_gold_answer_is_bad_input_with_the_mapping_hint(tmp_path: Path) -> None:
    """Regression: on the old main a missing gold was ``gold_unparseable``, as if the gold were broken."""
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text(json.dumps({"id": "q", "solution": "4", "completion": "\\boxed{4}"}) + "\n")
    _run("score", "--reward", "math", "--input", str(inp), "--output", str(out))
    score = json.loads(out.read_text())["scores"]["math"]
    assert score["status"] == "bad_input" and score["value"] is None
    assert "no `answer` field; map one with data.fields.answer=COLUMN" in score["info"]["reason"]


def test_a_file_of_many_chunks_keeps_row_order_and_scores_with_bad_rows_anywhere(tmp_path: Path) -> None:
    """Over two chunks of 64 rows, read while the previous chunk scores: rows stay in input order with their
    own scores, and a chunk of bad rows only is written too (Python API)."""
    from harness.score_file import score_file
    from harness.types import RewardSpec

    lines = []
    for i in range(150):
        if i % 7 == 3 or 64 <= i < 128:  # the whole second chunk is bad rows
            lines.append(json.dumps({"id": f"r{i}", "prompt": "p"}))  # no completion
        else:
            lines.append(json.dumps({"id": f"r{i}", "completion": "\\boxed{1}" if i % 2 else "none"}))
    src, out = tmp_path / "many.jsonl", tmp_path / "many.out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    report = score_file(src, out, [RewardSpec(name="boxed_present")], workers=1, progress=False)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(150)]
    bad = {i for i in range(150) if i % 7 == 3 or 64 <= i < 128}
    for i, r in enumerate(rows):
        want = None if i in bad else (1.0 if i % 2 else 0.0)
        assert r["rewards"]["boxed_present"] == want, r
    assert report.rows == 150 and len(report.bad_rows) == len(bad)
