"""A virtual environment reached through a symlink (``.venv -> /elsewhere/.venv``) runs code in the sandbox as the
real path does. The server pivots into a minimal root that holds the real paths only, so every path it keeps for its
children (install trees, ``sys.path``, ``sys.executable``) must be resolved before the pivot.

The test's venv is a symlink, in a temporary directory, to the one running the tests; a fresh interpreter started
through it starts its own sandbox server. The temporary directory is under ``/tmp``, which every child replaces with
a private tmpfs: the link's own path cannot be seen there at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json
from sandbox import get_sandbox

sb = get_sandbox()
run = lambda code: sb.run_program(code)
own = "import subprocess, sys\nr = subprocess.run([sys.executable, '-c', 'import pydantic; print(6 * 7)'], capture_output=True, text=True)\nprint(r.stdout.strip(), r.stderr[-200:])"
spawn = (
    "import multiprocessing as mp\ndef sq(x):\n    return x * x\nif __name__ == '__main__':\n"
    "    with mp.get_context('spawn').Pool(2) as p:\n        print(p.map(sq, [1, 2, 3]))"
)
out = {name: [r.status, r.stdout.decode().strip(), r.stderr.decode()[-300:]] for name, r in [
    ("plain", run("print(1 + 1)")),
    ("venv_package", run("import pydantic; print(pydantic.__name__)")),
    ("own_interpreter", run(own)),
    ("spawn", run(spawn)),
]}
t = sb.run_tests("def f(x):\n    return x + 1\n", "assert f(1) == 2", "f")
out["tests"] = [t.status, t.passed, t.reason]
out["level"] = sb.isolation().level
print("RESULT " + json.dumps(out))
"""


def test_a_symlinked_venv_runs_code_in_the_sandbox(tmp_path: Path, sandbox) -> None:  # type: ignore[no-untyped-def]
    link = tmp_path / ".venv"
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    python = link / "bin" / Path(sys.executable).name
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(
        [str(python), "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0 and "RESULT " in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(proc.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert r["plain"][:2] == ["ok", "2"], r
    assert r["venv_package"][:2] == ["ok", "pydantic"], r  # the venv's site-packages, by its real path
    assert r["own_interpreter"][0] == "ok" and r["own_interpreter"][1].startswith("42"), r  # sys.executable
    assert r["spawn"][:2] == ["ok", "[1, 4, 9]"], r
    assert r["tests"][:2] == ["pass", 1], r
    assert r["level"] == sandbox.isolation().level  # as strong as through the real path
