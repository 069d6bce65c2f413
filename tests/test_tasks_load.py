"""Loading a task's rows: hub-schema local files, ids, chat and plain prompts, few-shot draws.

The hub cannot be reached here, so the hub tasks read small local files written in the hub's own schema (GSM8K:
``question``/``answer`` with ``#### N``; MBPP's full config; MATH-500 with ``unique_id``), passed as ``data=``
exactly as a user passes ``--data``. Scores come from the real math and code rewards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import get_reward
from harness.tasks import Task, TaskError, get_task

GSM8K = [
    (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
        "clips did Natalia sell altogether in April and May?",
        "Natalia sold 48/2 = 24 clips in May.\n48+24 = 72\n#### 72",
    ),
    (
        "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she "
        "earn?",
        "Weng earns 12/60 = $0.2 per minute.\n0.2 x 50 = $10.\n#### 10",
    ),
    (
        "Betty has half of the $100 she needs for a wallet. Her parents give $15 and her grandparents twice as much. "
        "How much more does she need?",
        "She has 50. Parents 15, grandparents 30.\n100-50-15-30 = 5\n#### 5",
    ),
    (
        "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
        "3*2*2 = 12 pages a week.\n12*52 = 624\n#### 624",
    ),
    (
        "Mark has a garden with 10 yellow flowers and 80% more purple ones. How many purple flowers are there?",
        "10 * 1.8 = 18\n#### 18",
    ),
    (
        "Albert buys 2 large pizzas with 16 slices and 2 small ones with 8 slices. How many slices in all?",
        "2*16 + 2*8 = 48\n#### 48",
    ),
]


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def gsm8k_file(tmp_path: Path) -> str:
    return _write(tmp_path / "gsm8k_test.jsonl", [{"question": q, "answer": a} for q, a in GSM8K])


def test_gsm8k_from_a_local_file_in_the_hub_schema(gsm8k_file: str) -> None:
    res = get_task("gsm8k").load(data=gsm8k_file, num_fewshot=0, chat=False)
    assert [s.id for s in res.samples] == [str(i) for i in range(len(GSM8K))]  # dataset order, from 0
    first = res.samples[0]
    assert first.prompt == f"Question: {GSM8K[0][0]}\nAnswer:"
    math = get_reward("math")
    assert math(first, "Natalia sold 24 in May, so 72 in all.\n#### 72").value == 1.0
    assert math(first, "She sold 48 + 24.\n#### 70").value == 0.0
    assert math(res.samples[3], "The answer is 624.").value == 1.0


def test_plain_few_shot_prompt_is_question_target_pairs_then_the_question(gsm8k_file: str) -> None:
    res = get_task("gsm8k").load(data=gsm8k_file, num_fewshot=2, chat=False)
    prompt = res.samples[0].prompt
    assert isinstance(prompt, str)
    blocks = prompt.split("\n\nQuestion: ")
    assert len(blocks) == 3 and blocks[-1] == f"{GSM8K[0][0]}\nAnswer:"
    assert prompt.startswith("Question: ")
    for block in blocks[:2]:  # each example: question, " ", its worked answer ending in #### N
        assert "\nAnswer: " in block and "\n#### " in block


def test_chat_few_shot_prompt_is_alternating_turns(gsm8k_file: str) -> None:
    res = get_task("gsm8k").load(data=gsm8k_file, num_fewshot=3, chat=True)
    msgs = res.samples[2].prompt
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 3 + ["user"]
    assert GSM8K[2][0] in msgs[-1]["content"] and msgs[-1]["content"].startswith("Question: ")
    answers = {a for _, a in GSM8K}
    assert all(m["content"] in answers for m in msgs[1:-1:2])


def test_few_shot_is_deterministic_and_never_the_row_itself(gsm8k_file: str) -> None:
    task = get_task("gsm8k")
    a = task.load(data=gsm8k_file, num_fewshot=5, chat=True)
    b = task.load(data=gsm8k_file, num_fewshot=5, chat=True)
    assert [s.prompt for s in a.samples] == [s.prompt for s in b.samples]
    for s, (question, _) in zip(a.samples, GSM8K, strict=True):
        shots = [m["content"] for m in s.prompt[:-1] if m["role"] == "user"]
        assert len(shots) == 5  # the other five rows, all of them
        assert not any(question in q for q in shots), f"row {s.id} drew itself"
    other_seed = task.load(data=gsm8k_file, num_fewshot=2, chat=True, seed=7)
    same_seed = task.load(data=gsm8k_file, num_fewshot=2, chat=True)
    assert [s.prompt for s in other_seed.samples] != [s.prompt for s in same_seed.samples]
    limited = task.load(data=gsm8k_file, num_fewshot=2, chat=True, limit=2)  # a row's draw does not depend on limit
    assert [s.prompt for s in limited.samples] == [s.prompt for s in same_seed.samples[:2]]


def test_a_duplicate_question_under_another_id_is_not_drawn(tmp_path: Path) -> None:
    rows = [{"question": q, "answer": a} for q, a in GSM8K[:3]] + [{"question": GSM8K[0][0], "answer": "#### 72"}]
    path = _write(tmp_path / "dup.jsonl", rows)
    res = get_task("gsm8k").load(data=path, num_fewshot=3, chat=True)
    for idx in (0, 3):
        shots = [m["content"] for m in res.samples[idx].prompt[:-1] if m["role"] == "user"]
        assert all(GSM8K[0][0] not in q for q in shots)
        assert len(shots) == 2  # only two rows differ from it


def test_few_shot_from_a_separate_file(gsm8k_file: str, tmp_path: Path) -> None:
    pool = _write(tmp_path / "train.jsonl", [{"question": "What is 1+1?", "answer": "1+1=2\n#### 2"}])
    res = get_task("gsm8k").load(data=gsm8k_file, num_fewshot=1, chat=False, fewshot_data=pool)
    assert all(s.prompt.startswith("Question: What is 1+1?\nAnswer: 1+1=2\n#### 2\n\nQuestion: ") for s in res.samples)


def test_math500_ids_are_unique_ids(tmp_path: Path) -> None:
    rows = [
        {
            "problem": "Compute $1+2$.",
            "solution": "...",
            "answer": "3",
            "subject": "Algebra",
            "level": 1,
            "unique_id": "test/algebra/1.json",
        },
        {
            "problem": "What is $\\frac{1}{2}+\\frac{1}{2}$?",
            "solution": "...",
            "answer": "1",
            "subject": "Algebra",
            "level": 1,
            "unique_id": "test/algebra/2.json",
        },
    ]
    res = get_task("math500").load(data=_write(tmp_path / "m.jsonl", rows))
    assert [s.id for s in res.samples] == ["test/algebra/1.json", "test/algebra/2.json"]
    msgs = res.samples[0].prompt
    assert msgs[-1]["content"].startswith("Compute $1+2$.") and "\\boxed{}" in msgs[-1]["content"]
    assert get_reward("math")(res.samples[1], "So \\boxed{1}.").value == 1.0


def test_mbpp_tests_come_from_test_list(tmp_path: Path) -> None:
    row = {
        "task_id": 11,
        "text": "Write a python function to remove first and last occurrence of a given character from the string.",
        "code": "def remove_Occ(s,ch):\n    s = s.replace(ch, '', 1)\n    i = s.rfind(ch)\n"
        "    return s if i < 0 else s[:i] + s[i+1:]",
        "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"'],
        "test_setup_code": "",
        "challenge_test_list": [],
    }
    shots = [dict(row, task_id=i, text=f"Example task {i}.") for i in (2, 3, 4)]
    path = _write(tmp_path / "mbpp.jsonl", [row, *shots])
    res = get_task("mbpp").load(data=path)
    s = res.samples[0]
    assert s.id == "11" and s.prompt.count("[BEGIN]") == 4 and s.prompt.count("[DONE]") == 3
    assert s.prompt.endswith('assert remove_Occ("abcda","a") == "bcd"\n[BEGIN]\n')
    code = get_reward("code")
    assert code(s, row["code"] + "\n").status == "pass"  # the backend stops at [DONE]
    assert code(s, "def remove_Occ(s, ch):\n    return s\n").status == "fail"


def test_a_bad_row_is_reported_and_skipped_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"question": "Q1?", "answer": "#### 1"}) + "\n{oops\n" + json.dumps({"answer": "2"}) + "\n"
    )
    res = get_task("gsm8k").load(data=str(path), num_fewshot=0)
    assert [s.id for s in res.samples] == ["0"]
    assert [e.line for e in res.errors] == [2, 3]
    assert "question" in str(res.errors[1])
    with pytest.raises(TaskError, match="bad.jsonl:2"):
        get_task("gsm8k").load(data=str(path), num_fewshot=0, strict=True)


def test_errors_name_the_task_and_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="unknown task 'gsm9k'; registered tasks: .*gsm8k"):
        get_task("gsm9k")
    with pytest.raises(TaskError, match=r"task 'gsm8k': .*nope\.jsonl: data file not found"):
        get_task("gsm8k").load(data=str(tmp_path / "nope.jsonl"))
    with pytest.raises(TaskError, match="task 'humaneval' has no 'train' split"):
        get_task("humaneval").load("train")
    t = Task(name="t", source=str(tmp_path / "x.jsonl"))
    _write(tmp_path / "x.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    with pytest.raises(TaskError, match="few-shot examples need prompt.target"):
        t.load(num_fewshot=1)
    broken = Task(name="t2", source=str(tmp_path / "x.jsonl"), prompt=get_task("gsm8k").prompt)
    res = broken.load(num_fewshot=0)
    assert not res.samples and "names column 'question'" in str(res.errors[0])


def test_questions_are_bare_for_the_contamination_check(gsm8k_file: str) -> None:
    res = get_task("gsm8k").questions("test", data=gsm8k_file)
    assert [s.prompt for s in res.samples] == [q for q, _ in GSM8K]
