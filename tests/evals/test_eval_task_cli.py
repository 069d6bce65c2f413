"""``harness eval --task`` end to end, offline: HumanEval's canonical solutions through the reference backend (all
164 pass; their ``return None`` mutants all fail), the tiny random-init model (see conftest; a real transformers
model built from a config) on humaneval and on gsm8k from a local file in the hub's schema, the table across
checkpoints and tasks, the results JSON keys, and bad input."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from eval_runs import make_run, write_jsonl

from evals.backends import Generation, PromptRequest, SamplingParams
from evals.task_run import TaskOverrides, evaluate_task, get_tasks
from harness.cli import main

pytestmark = pytest.mark.slow

#: Rows in GSM8K's hub schema (question, answer ending "#### N"), written for these tests.
GSM8K_ROWS = [
    {
        "question": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
        "answer": f"{a} + {b} = {a + b}\n#### {a + b}",
    }
    for a, b in [(3, 4), (10, 5), (7, 8), (2, 9), (6, 6), (12, 1), (4, 4), (9, 3)]
]


def _harness(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["eval", *argv, "--no-progress", "--no-telemetry"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_humaneval_canonical_solutions_all_pass_through_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _harness(capsys, "--task", "humaneval", "--backend", "reference", "--output", str(tmp_path / "ref"))
    assert rc == 0, err
    assert "reference   1.0000 ± 0.0000" in out and "humaneval/pass@1 (n=164)" in out
    summary = json.loads((tmp_path / "ref" / "results.json").read_text())
    [entry] = [e for e in summary["results"] if e["metric"] == "pass@1"]
    assert entry["task"] == "humaneval" and entry["value"] == 1.0 and entry["n"] == 164
    recs = [json.loads(x) for x in (tmp_path / "ref" / "humaneval" / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 164 and all(r["scores"]["code"]["value"] == 1.0 for r in recs)
    assert {r["prompt_id"] for r in recs} == {f"HumanEval/{i}" for i in range(164)}


def test_gsm8k_reference_answers_pass_from_a_local_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The gold solutions ("... #### N") as completions: the task's answer extraction agrees with its own golds."""
    data = write_jsonl(tmp_path / "g.jsonl", GSM8K_ROWS)
    rc, out, err = _harness(
        capsys, "--task", "gsm8k", "--data", str(data), "--backend", "reference", "--output", str(tmp_path / "r")
    )
    assert rc == 0, err
    assert "reference   1.0000 ± 0.0000" in out and "gsm8k/pass@1 (n=8)" in out


class _ReturnNone:
    """Feeds the ``return None`` mutant of every canonical solution (a body, as the canonical solutions are)."""

    name = "mutant"

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        return [[Generation("    return None\n", "stop", 3)] * k for _ in requests]

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    def close(self) -> None:
        pass


def test_humaneval_return_none_mutants_all_fail(tmp_path: Path) -> None:
    (root := tmp_path / "m").mkdir()
    [task] = get_tasks("humaneval")
    ev = evaluate_task(task, root, output_dir=root / "out", backend=_ReturnNone(), telemetry=False)
    assert ev.result.pass_at_k[1] == 0.0 and ev.result.results["prompts"] == 164
    assert ev.result.results["rewards"]["code"]["scored"] == 164  # judged, not unscored


def test_humaneval_on_a_tiny_checkpoint_prints_the_table(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _harness(
        capsys,
        *("--task", "humaneval", "--checkpoint", str(tiny_model_dir), "--limit", "3"),
        *("--gen-kwargs", "max_new_tokens=8", "--output", str(tmp_path / "o"), "--log-samples"),
    )
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["checkpoint", "humaneval/pass@1"] and lines[2].startswith("model")
    assert "0.0000 ± 0.0000" in lines[2]  # a random model solves nothing
    res = json.loads((tmp_path / "o" / "humaneval" / "results.json").read_text())
    assert res["task"]["num_fewshot"] == 0 and res["task"]["chat_template"] is False
    assert res["sampling"]["max_new_tokens"] == 8 and res["sampling"]["stop"][0] == "\nclass"
    assert res["results"][0]["metric"] == "pass@1" and res["results"][0]["n"] == 3
    assert (tmp_path / "o" / "samples_humaneval.jsonl").read_text() == (
        tmp_path / "o" / "humaneval" / "samples.jsonl"
    ).read_text()
    assert f"per-sample records: {tmp_path / 'o' / 'samples_humaneval.jsonl'}" in err


def test_gsm8k_from_a_local_file_fewshot_chat_and_stop(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "gsm8k_test.jsonl", GSM8K_ROWS)
    rc, out, err = _harness(
        capsys,
        *("--task", "gsm8k", "--data", str(data), "--checkpoint", str(tiny_model_dir), "--num-fewshot", "2"),
        *("--gen-kwargs", 'max_new_tokens=6,stop=["\\n\\n", "Question:"]', "--no-chat-template"),
        *("--output", str(tmp_path / "g"), "--seed", "5"),
    )
    assert rc == 0, err
    assert "gsm8k/pass@1 (n=8)" in out
    res = json.loads((tmp_path / "g" / "gsm8k" / "results.json").read_text())
    assert res["task"]["num_fewshot"] == 2 and res["task"]["chat_template"] is False
    assert res["task"]["generation"]["stop"] == ["\n\n", "Question:"] and res["task"]["generation"]["seed"] == 5
    assert res["lm_eval"]["results"]["gsm8k"]["pass@1,none"] == res["results"][0]["value"]
    assert res["lm_eval"]["n-samples"]["gsm8k"]["effective"] == 8
    for m in res["results"]:
        assert set(m) == {"task", "metric", "value", "stderr", "n", "config"}
    recs = [json.loads(x) for x in (tmp_path / "g" / "gsm8k" / "samples.jsonl").read_text().splitlines()]
    first = recs[0]["prompt"]
    assert isinstance(first, str) and first.count("Question:") == 3  # two shots from the file, then the question
    assert all("\n\n" not in r["completion"] and "Question:" not in r["completion"] for r in recs)


def test_two_checkpoints_by_two_tasks_make_one_table(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, tiny_model_dir, step=4)
    shutil.copytree(run / "checkpoints" / "step-000004", run / "checkpoints" / "step-000008")
    data = write_jsonl(tmp_path / "gsm8k_test.jsonl", GSM8K_ROWS[:4])
    rc, out, err = _harness(
        capsys,
        *("--task", "gsm8k", "--data", str(data), "--checkpoints", str(run), "--num-fewshot", "0"),
        *("--gen-kwargs", "max_new_tokens=4"),
    )
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert [ln.split()[0] for ln in lines[2:]] == ["step-000004", "step-000008"]
    summary = json.loads((run / "eval" / "tasks" / "results.json").read_text())
    assert {(e["checkpoint"], e["metric"]) for e in summary["results"] if e["metric"] == "pass@1"} == {
        ("step-000004", "pass@1"),
        ("step-000008", "pass@1"),
    }
    assert set(summary["lm_eval"]) == {"step-000004", "step-000008"}
    assert (run / "eval" / "tasks" / "step-000008" / "gsm8k" / "results.json").is_file()
    # the run's eval section (k=4, temperature=1) is the user's choice for this run: it wins over the task's k=1
    res = json.loads((run / "eval" / "tasks" / "step-000004" / "gsm8k" / "results.json").read_text())
    assert res["k"] == 4 and res["sampling"]["temperature"] == 1.0 and res["sampling"]["max_new_tokens"] == 4


def test_watch_evaluates_each_new_checkpoint_on_the_task(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--watch --task``: a checkpoint saved while the watcher waits is evaluated on the task at its next look, and
    the table and summary cover every checkpoint so far."""
    import evals.checkpoint

    run = make_run(tmp_path, tiny_model_dir, step=4)
    ckpts, summary_path = run / "checkpoints", run / "eval" / "tasks" / "results.json"
    pauses: list[float] = []

    def training_saves_step_8(seconds: float) -> None:  # stands in for the wait: training saves a checkpoint
        pauses.append(seconds)
        if len(pauses) == 1:
            assert json.loads(summary_path.read_text())["lm_eval"].keys() == {"step-000004"}  # done before the wait
            shutil.copytree(ckpts / "step-000004", ckpts / "step-000008")

    monkeypatch.setattr(evals.checkpoint, "_pause", training_saves_step_8, raising=False)
    data = write_jsonl(tmp_path / "gsm8k_test.jsonl", GSM8K_ROWS[:2])
    rc, out, err = _harness(
        capsys,
        *("--task", "gsm8k", "--data", str(data), "--checkpoints", str(run), "--num-fewshot", "0"),
        *("--gen-kwargs", "max_new_tokens=4", "--watch", "--watch-timeout", "0", "--watch-interval", "7"),
    )
    assert rc == 0, err
    assert pauses == [7.0, 7.0]  # one wait after each checkpoint; the look after the second found nothing: stop
    assert "no new checkpoint for 0 s; stopping" in err
    assert [ln.split()[0] for ln in out.strip().splitlines()[-2:]] == ["step-000004", "step-000008"]
    summary = json.loads(summary_path.read_text())
    assert {e["checkpoint"] for e in summary["results"] if e["metric"] == "pass@1"} == {"step-000004", "step-000008"}
    res = json.loads((run / "eval" / "tasks" / "step-000008" / "gsm8k" / "results.json").read_text())
    assert res["results"][0]["task"] == "gsm8k" and res["results"][0]["n"] == 2


def test_watch_started_before_the_first_checkpoint_uses_the_run_config_task(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--watch`` beside a run that has saved nothing yet (no checkpoints/ directory): it waits, and the task comes
    from the run's config.yaml, not from a checkpoint (there is none to read it from)."""
    import evals.checkpoint

    run = make_run(
        tmp_path, tiny_model_dir, eval_section={"task": "humaneval", "limit": 2, "k": 1, "max_new_tokens": 4}
    )
    ckpts = run / "checkpoints"
    ckpts.rename(tmp_path / "later")  # training has started (config.yaml) and saved nothing yet

    def training_saves_step_4(seconds: float) -> None:
        if not ckpts.exists():
            (tmp_path / "later").rename(ckpts)

    monkeypatch.setattr(evals.checkpoint, "_pause", training_saves_step_4, raising=False)
    rc, out, err = _harness(capsys, "--checkpoints", str(run), "--watch", "--watch-timeout", "0")
    assert rc == 0, err
    assert "humaneval/pass@1 (n=2)" in out and out.strip().splitlines()[-1].startswith("step-000004")


def test_a_run_config_eval_task_is_used_without_flags(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(
        tmp_path, tiny_model_dir, eval_section={"task": "humaneval", "limit": 2, "k": 1, "max_new_tokens": 4}
    )
    rc, out, err = _harness(capsys, "--checkpoints", str(run))
    assert rc == 0, err
    assert "humaneval/pass@1 (n=2)" in out


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--task", "nosuch", "--backend", "reference"], "nosuch"),
        (["--task", "humaneval,gsm8k", "--backend", "reference", "--data", "x.jsonl"], "name the task each source"),
        (["--task", "humaneval,gsm8k", "--backend", "reference", "--data", "mbpp=x.jsonl"], "name the task each"),
        (["--task", "humaneval", "--backend", "reference", "--gen-kwargs", "max_tokens=3"], "unknown key 'max_tokens'"),
        (["--task", "humaneval", "--backend", "reference", "--gen-kwargs", "top_p=2"], "top_p: expected a number"),
        (["--task", "humaneval"], "--task needs --checkpoint DIR or --checkpoints RUN"),
        (["--task", "humaneval", "--backend", "reference", "--field", "prompt=q"], "--field does not apply"),
        (["--backend", "reference", "--data", "x.jsonl"], "one of --checkpoint DIR or --checkpoints RUN is required"),
        (["--task", "humaneval", "--backend", "reference", "--watch"], "--watch needs --checkpoints RUN"),
        (["--task", "humaneval", "--checkpoint", ".", "--watch"], "--watch needs --checkpoints RUN"),
    ],
)
def test_bad_task_input_is_a_clear_error(
    argv: list[str], match: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _harness(capsys, *argv, "--output", str(tmp_path / "x"))
    assert rc == 2 and match in err, err


def test_task_overrides_reach_the_loaded_prompts(tmp_path: Path) -> None:
    """The overrides object is what the CLI fills; loading with it gives the prompts the backend then receives."""
    [task] = get_tasks("gsm8k")
    data = write_jsonl(tmp_path / "g.jsonl", GSM8K_ROWS)
    over = TaskOverrides(num_fewshot=1, chat=True, data=str(data))
    held = task.load("test", data=over.data, num_fewshot=over.num_fewshot, chat=over.chat)
    msgs = held.samples[0].prompt
    assert isinstance(msgs, list) and [m["role"] for m in msgs] == ["user", "assistant", "user"]


def _task_run(tmp_path: Path, tiny_model_dir: Path, heldout: list[dict[str, str]]) -> Path:
    """A run trained with ``data.task: gsm8k`` on local files in GSM8K's schema (the trainer's layout)."""
    import yaml

    run = make_run(tmp_path, tiny_model_dir)
    train = write_jsonl(tmp_path / "gsm8k_train.jsonl", GSM8K_ROWS[:4])
    held = write_jsonl(tmp_path / "gsm8k_heldout.jsonl", heldout)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["data"] = {"task": "gsm8k", "train": str(train), "heldout": str(held)}
    cfg["rewards"] = [{"name": "math"}]
    cfg["eval"] = {"k": 1, "max_new_tokens": 4, "num_fewshot": 2}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


@pytest.mark.parametrize("leak", [False, True])
def test_a_run_trained_on_a_task_is_evaluated_on_it_and_checked_on_bare_questions(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], leak: bool
) -> None:
    heldout = GSM8K_ROWS[4:] + (GSM8K_ROWS[:1] if leak else [])  # a training question in the held-out set
    run = _task_run(tmp_path, tiny_model_dir, heldout)
    rc, out, err = _harness(capsys, "--checkpoints", str(run))
    assert rc == 0, err
    assert f"gsm8k/pass@1 (n={len(heldout)})" in out and "data.heldout" in err
    res = json.loads((run / "eval" / "tasks" / "step-000004" / "gsm8k" / "results.json").read_text())
    c = res["contamination"]
    assert c["checked"] and c["compared"] == "bare questions" and c["train_prompts"] == 4
    # 2-shot prompts carry other rows' text; the check compares bare questions, so only a real leak counts
    assert c["exact"] == (1 if leak else 0) and c["ngram"] == 0, c


def test_apply_chat_template_switches_a_plain_task_to_its_chat_prompt_and_stops(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [task] = get_tasks("humaneval")
    assert task.prompt.chat is False  # a plain task by default
    rc, _, err = _harness(
        capsys,
        *("--task", "humaneval", "--checkpoint", str(tiny_model_dir), "--limit", "2", "--apply-chat-template"),
        *("--gen-kwargs", "max_new_tokens=3", "--output", str(tmp_path / "c")),
    )
    assert rc == 0, err
    res = json.loads((tmp_path / "c" / "humaneval" / "results.json").read_text())
    assert res["task"]["chat_template"] is True and res["backend"]["chat_template"] is True
    assert res["sampling"]["stop"] == list(task.generation.stop_for(True)) != list(task.generation.stop_for(False))
    rec = json.loads((tmp_path / "c" / "humaneval" / "samples.jsonl").read_text().splitlines()[0])
    assert isinstance(rec["prompt"], list) and rec["prompt"][-1]["content"].startswith("Complete the following")


def test_the_same_command_again_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--task", "humaneval", "--backend", "reference", "--limit", "5", "--output", str(tmp_path / "r"))
    assert _harness(capsys, *argv)[0] == 0
    rc, out, err = _harness(capsys, *argv)
    assert rc == 0, err
    res = json.loads((tmp_path / "r" / "humaneval" / "results.json").read_text())
    assert res["timing"]["prompts_generated"] == 0 and res["timing"]["prompts_resumed"] == 5
    assert "reference   1.0000 ± 0.0000" in out


def test_two_tasks_one_from_a_local_file_make_one_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_jsonl(tmp_path / "g.jsonl", GSM8K_ROWS)
    rc, out, err = _harness(
        capsys,
        *("--task", "humaneval,gsm8k", "--data", f"gsm8k={data}", "--backend", "reference", "--limit", "4"),
        *("--output", str(tmp_path / "two")),
    )
    assert rc == 0, err
    header, _, row = out.strip().splitlines()
    assert "humaneval/pass@1 (n=4)" in header and "gsm8k/pass@1 (n=4)" in header
    assert row.split() == ["reference", "1.0000", "±", "0.0000", "1.0000", "±", "0.0000"]
    res = json.loads((tmp_path / "two" / "gsm8k" / "results.json").read_text())
    assert res["task"]["source"].endswith("g.jsonl")


def test_a_task_whose_held_out_questions_leak_is_refused_with_fail_on_overlap(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    run = _task_run(tmp_path, tiny_model_dir, GSM8K_ROWS[4:] + GSM8K_ROWS[:1])  # a training question held out
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["eval"]["fail_on_overlap"] = True
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    rc, _, err = _harness(capsys, "--checkpoints", str(run))
    assert rc != 0
    assert "task gsm8k: " in err and "examples: " in err and "(exact)" in err, err
