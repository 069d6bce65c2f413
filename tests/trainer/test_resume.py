"""Kill a training process mid-run (SIGKILL, between checkpoints), resume it, and get the uninterrupted losses."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from _trainer_helpers import toy_config

from trainer import train

_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, {helpers!r})
    from _trainer_helpers import toy_config
    from trainer import train

    def kill_after(step, metrics):
        if step == 5:  # checkpoint at 4, killed before the one at 8
            os.kill(os.getpid(), signal.SIGKILL)

    train(toy_config({tmp!r}, "killed", max_steps=8, save_steps=4, mu=2), progress=False, on_step=kill_after)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_resume_after_kill_reproduces_the_uninterrupted_losses(tmp_path):
    full = train(toy_config(tmp_path, "full", max_steps=8, save_steps=4, mu=2), progress=False)
    code = _CHILD.format(helpers=os.path.dirname(__file__), tmp=str(tmp_path))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run = tmp_path / "killed"
    assert (run / "checkpoints" / "step-000004").is_dir()
    assert not (run / "checkpoints" / "step-000008").exists()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 5  # steps 1-5 were written before the kill

    resumed = train(toy_config(tmp_path, "killed", max_steps=8, save_steps=4, mu=2), resume=True, progress=False)
    assert [m["step"] for m in resumed.metrics] == [5, 6, 7, 8]
    want = [m["loss"] for m in full.metrics[4:]]
    got = [m["loss"] for m in resumed.metrics]
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    assert [m["reward/total/mean"] for m in resumed.metrics] == [m["reward/total/mean"] for m in full.metrics[4:]]
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8]  # the killed run's step 5 was replaced, not duplicated


@pytest.mark.timeout(300)
def test_interrupt_and_resume_store_each_step_once_in_traces(tmp_path):
    """Regression: on the old main the steps between the last checkpoint and an interrupt (Ctrl-C) were in
    traces.jsonl twice after --resume (metrics.jsonl was already right)."""
    from collections import Counter

    from harness.telemetry import iter_spans

    def interrupt_after(step, metrics):
        if step == 6:  # checkpoint at 4; steps 5 and 6 are traced, then Ctrl-C
            raise KeyboardInterrupt

    cfg = toy_config(tmp_path, "ctrlc", max_steps=8, save_steps=4, mu=1)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, progress=False, on_step=interrupt_after)
    traces = tmp_path / "ctrlc" / "traces.jsonl"
    before = Counter(s["attributes"]["harness.train.step"] for s in iter_spans(traces) if s["name"] == "train.step")
    assert before == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}

    train(cfg, resume=True, progress=False)
    spans = list(iter_spans(traces))
    steps = Counter(s["attributes"]["harness.train.step"] for s in spans if s["name"] == "train.step")
    assert steps == {i: 1 for i in range(1, 9)}
    rewards = Counter(s["attributes"]["harness.train.step"] for s in spans if s["name"].startswith("reward/"))
    assert set(rewards.values()) == {1} and sorted(rewards) == list(range(1, 9))
