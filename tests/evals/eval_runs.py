"""Helpers of the evaluator tests: a run directory holding a checkpoint of a tiny random-init model.

The model is a random-init Qwen2-style causal LM (about 77k parameters) built from a config with the project's
character-level tokenizer (``trainer.toy``), saved with ``save_pretrained``: a real transformers model, nothing
downloaded. Its completions are gibberish; the test rewards look at characters.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

HERE = str(Path(__file__).resolve().parent)
OAI_SERVER = Path(__file__).with_name("oai_server.py")
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}a:{% endif %}"
)
HELDOUT = [{"id": f"h{i}", "prompt": f"{i} + {i + 1} = ?", "answer": str((2 * i + 1) % 10)} for i in range(6)]
TRAIN = [{"id": f"t{i}", "prompt": f"what is {i} times {i + 2}?", "answer": str(i * (i + 2))} for i in range(8)]
REWARDS = [
    {"name": "evals_contains_answer", "weight": 1.0},
    {"name": "evals_length", "weight": 0.0, "params": {"norm": 10.0}},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def save_tiny_model(directory: Path, *, chat_template: bool = True) -> Path:
    """Save the tiny random-init model and its char tokenizer to ``directory``."""
    from trainer.toy import char_tokenizer, tiny_model

    tok = char_tokenizer()
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    model = tiny_model(len(tok), seed=0)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def make_run(root: Path, model_dir: Path, *, step: int = 4, eval_section: dict | None = None) -> Path:
    """A run directory as `harness train` lays it out, with one checkpoint and a real span context."""
    import shutil

    from harness.telemetry import RewardStats, RunTelemetry

    run = root / "runs" / "r1"
    ckpt = run / "checkpoints" / f"step-{step:06d}"
    shutil.copytree(model_dir, ckpt)
    data = root / "data"
    data.mkdir(exist_ok=True)
    write_jsonl(data / "train.jsonl", TRAIN)
    write_jsonl(data / "heldout.jsonl", HELDOUT)
    cfg = {
        "run": {"id": "r1", "output_dir": str(root / "runs"), "seed": 0},
        "data": {"train": str(data / "train.jsonl"), "heldout": str(data / "heldout.jsonl")},
        "rewards": REWARDS,
        "eval": {"k": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12, "workers": 2, **(eval_section or {})},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    tel = RunTelemetry.start(run, "r1")
    with tel.train_step(step) as st:
        st.set_metrics({"loss": 0.5})
        st.record_reward("evals_contains_answer", RewardStats(mean=0.75, std=0.1, count=8, scored=8))
    (ckpt / "telemetry.json").write_text(json.dumps(tel.checkpoint_context(step)), encoding="utf-8")
    tel.shutdown()
    return run


@contextlib.contextmanager
def served(model_dir: Path) -> Iterator[str]:
    """Run ``oai_server.py`` (an OpenAI-compatible server process) on ``model_dir``; yields its ``/v1`` base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(OAI_SERVER), "--model", str(model_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""  # blocks until the server listens (or dies)
        if not line.startswith("LISTENING"):
            proc.kill()
            raise RuntimeError(f"test server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
