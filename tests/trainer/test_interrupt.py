"""Ctrl-C during ``harness train``: a real SIGINT to a real ``harness train`` process on the toy task.

The first Ctrl-C finishes the step in flight, checkpoints it and prints the command that resumes; that command
continues from the next step. A second Ctrl-C stops at once, without a checkpoint of the step in flight.
The model is the trainer's random-init ``toy:char`` model (nothing downloaded). Deadlines are generous and nothing
asserts a duration: the process is waited for, not timed.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

DEADLINE_S = 300.0
ROOT = Path(__file__).resolve().parents[2]

# A reward module given with --plugin: it touches a marker file (so the test knows the loop is running) and can
# sleep, to keep a step in flight while the test presses Ctrl-C.
PLUGIN = """
import pathlib, time
from harness import Score, reward

@reward("interrupt_probe", reads=(), cacheable=False)
def interrupt_probe(*, marker: str = "", delay_s: float = 0.0):
    def score(sample, completion):
        pathlib.Path(marker).touch()
        time.sleep(delay_s)
        return Score(value=completion.count("a") / 8.0)
    return score
"""


class _Proc:
    """A ``harness train`` subprocess whose stderr is read line by line in a thread."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self.out: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out, False), daemon=True),
        ]
        for t in self.readers:
            t.start()

    def _read(self, stream, into: list[str], lines: bool) -> None:
        for line in stream:
            into.append(line)
            if lines:
                self.lines.put(line)

    def wait_for_line(self, text: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            try:
                if text in self.lines.get(timeout=1.0):
                    return
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
        raise AssertionError(f"no line with {text!r}; stderr:\n{''.join(self.err)}")

    def finish(self) -> tuple[int, str, str]:
        try:
            self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for t in self.readers:
            t.join(timeout=DEADLINE_S)
        return self.proc.returncode, "".join(self.out), "".join(self.err)


def _wait_for(path: Path, proc: _Proc) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert proc.proc.poll() is None, f"harness train exited early:\n{''.join(proc.err)}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def _config(tmp_path: Path, *, delay_s: float) -> tuple[Path, Path, Path]:
    plugin = tmp_path / "probe_reward.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    marker = tmp_path / "scored"
    cfg = {
        "run": {"id": "ctrl-c", "output_dir": str(tmp_path / "runs"), "seed": 0},
        "model": {"name_or_path": "toy:char"},
        "data": {"train": "toy:8", "chat_template": False},
        "rewards": {"interrupt_probe": {"weight": 1.0, "params": {"marker": str(marker), "delay_s": delay_s}}},
        "trainer": {
            "num_generations": 2,
            "prompts_per_step": 1,
            "max_prompt_length": 16,
            "max_completion_length": 8,
            "max_steps": 100000,
            "save_steps": 0,
            "lr": 1e-3,
            "score_timeout": 3600,
            "monitors": {"truncated_frac": 1.0},
        },
        "telemetry": {"enabled": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path, plugin, marker


def _steps(run: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def test_ctrl_c_checkpoints_the_step_reached_and_prints_the_resume_command(tmp_path: Path) -> None:
    path, plugin, marker = _config(tmp_path, delay_s=0.0)
    run = tmp_path / "runs" / "ctrl-c"
    proc = _Proc(["train", "--config", str(path), "--plugin", str(plugin), "--no-progress"], tmp_path)
    _wait_for(marker, proc)
    _wait_for(run / "metrics.jsonl", proc)  # at least one step done, another in flight
    proc.proc.send_signal(signal.SIGINT)
    rc, out, err = proc.finish()
    assert rc == 130, err
    assert "Ctrl-C: finishing the step in flight" in err
    steps = _steps(run)
    ckpts = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert ckpts == [f"step-{steps[-1]:06d}"], (ckpts, steps)  # the step reached, and it is complete
    assert (run / "checkpoints" / ckpts[0] / "trainer_state.pt").is_file()
    assert f"interrupted after step {steps[-1]}" in err and f"{steps[-1]} steps" in out
    command = err.split("resume with:\n", 1)[1].splitlines()[0].strip()
    assert command.startswith("harness train --config") and "--resume" in command

    # the printed command continues the run from the next step
    resume = shlex.split(command)[1:] + ["--set", f"trainer.max_steps={steps[-1] + 1}", "--no-progress"]
    again = _Proc(resume, tmp_path)
    rc, out, err = again.finish()
    assert rc == 0, err
    assert f"from step {steps[-1]}" in err
    assert _steps(run)[-1] == steps[-1] + 1 and f"{steps[-1] + 1} steps" in out


def test_a_second_ctrl_c_stops_at_once_without_a_checkpoint(tmp_path: Path) -> None:
    path, plugin, marker = _config(tmp_path, delay_s=3600.0)  # the first step's scoring never ends by itself
    proc = _Proc(["train", "--config", str(path), "--plugin", str(plugin), "--no-progress"], tmp_path)
    _wait_for(marker, proc)  # the loop runs: a reward is being computed
    proc.proc.send_signal(signal.SIGINT)
    proc.wait_for_line("Ctrl-C: finishing the step in flight")
    proc.proc.send_signal(signal.SIGINT)
    rc, _, err = proc.finish()
    assert rc == 130, err
    assert "second Ctrl-C: stopping now" in err
    ckpts = tmp_path / "runs" / "ctrl-c" / "checkpoints"
    assert not ckpts.exists() or not any(ckpts.iterdir())  # the hour-long step was not waited for
