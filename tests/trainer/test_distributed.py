"""Two data-parallel processes (torch.distributed, gloo, CPU) stay in lockstep: identical weights after steps.

Launched with ``torch.distributed.run`` (torchrun) exactly as a user would; each rank samples its own prompt
group, gradients are summed over ranks.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from trainer.toy import char_tokenizer, tiny_model

_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, {helpers!r})
    from _trainer_helpers import toy_config
    from trainer import train
    import torch.distributed as dist

    res = train(toy_config({tmp!r}, "ddp", max_steps=3, prompts_per_step=2, micro_batch_size=4), progress=False)
    rank = dist.get_rank()
    torch.save(res.model.state_dict(), os.path.join({tmp!r}, f"weights{{rank}}.pt"))
    torch.save([m["reward/total/mean"] for m in res.metrics], os.path.join({tmp!r}, f"metrics{{rank}}.pt"))
    """
)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_gloo_ranks_hold_identical_weights(tmp_path):
    script = tmp_path / "run_ddp.py"
    script.write_text(_SCRIPT.format(helpers=os.path.dirname(__file__), tmp=str(tmp_path)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=360,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ddp" / "checkpoints" / "step-000003").is_dir()
    w0 = torch.load(tmp_path / "weights0.pt")
    w1 = torch.load(tmp_path / "weights1.pt")
    init = tiny_model(len(char_tokenizer()), seed=0).state_dict()
    assert w0.keys() == w1.keys()
    for k in w0:
        assert torch.equal(w0[k], w1[k]), f"ranks differ on {k}"
    assert any(not torch.equal(w0[k], init[k]) for k in w0), "no weight changed"
    m0, m1 = torch.load(tmp_path / "metrics0.pt"), torch.load(tmp_path / "metrics1.pt")
    assert m0 == m1  # reward metrics are gathered over both ranks
    lines = (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3  # rank 0 alone writes the metrics file
