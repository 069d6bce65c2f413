"""A process forked from one that already scored gets a working scoring pool of its own.

Regression: a forked child inherited the parent's default pool without its dispatcher thread (its calls hung), and
later the parent's fork-server state (its first worker start failed with ``ChildProcessError``). Data-parallel
reward managers (verl's ``prime``) fork such children.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from harness import RewardSpec, Sample, score_batch

    def main():
        sample = [Sample(id="1", prompt="p", answer="7")]
        parent = score_batch(sample, [r"\\boxed{7}"], [RewardSpec(name="math")], timeout=60)
        assert parent.scores["math"][0].value == 1.0, parent
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                child = score_batch(sample, [r"\\boxed{8}"], [RewardSpec(name="math")], timeout=60)
                s = child.scores["math"][0]
                os.write(w, f"{s.value}|{s.status}".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        print(os.read(r, 1000).decode())

    if __name__ == "__main__":
        main()
    """
)


def test_a_forked_child_scores_with_a_pool_of_its_own(tmp_path):
    script = tmp_path / "fork_then_score.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0.0|ok", out.stdout + out.stderr[-2000:]
