"""Kill a training process mid-run (SIGKILL, between checkpoints), resume it, and get the uninterrupted losses."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from trainer import train

from _trainer_helpers import toy_config

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
