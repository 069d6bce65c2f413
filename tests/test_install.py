"""The README's plugin recipe, run line by line as written, in a fresh virtual environment.

Regression: on the old main ``pip install ./examples/reward-plugin`` outside the project's environment failed
(pip cannot resolve ``grpo-harness>=0.1`` from an index), the README had no install recipe for anyone not using
the Makefile, and there was no ``python -m harness``.

The test copies the checkout (without its virtual environments and run outputs) to a temporary directory and runs
the README's bash block there with ``bash -euo pipefail``: a new ``python -m venv`` made by the base interpreter
(not this one), ``pip install`` of the project and the example plugin from the copy (real builds; dependencies
come from pip's configured index and cache, as for a user), then ``harness rewards list`` and ``harness score``.
Afterwards it checks that the commands used the new environment and not this one, and that ``python -m harness``
from another directory finds the plugin. On the project's 2-core machine under heavy load (load average 60-160)
the install took 56 s of wall time with pip's cache warm.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MARKER = "./examples/reward-plugin"

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(1200)]

_SKIP = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".venv-*",
    "runs",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".cache",
    "in.jsonl",
    "out.jsonl",
)


def _bash_block(path: Path, marker: str) -> str:
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S) if marker in b]
    assert len(blocks) == 1, f"{path}: expected one bash block with {marker!r}, found {len(blocks)}"
    return blocks[0]


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """This process's environment without its virtual environment: a user's shell with a plain ``python``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD")
    }
    ours = str(Path(sys.executable).parent)
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != ours]
    env["PATH"] = os.pathsep.join([str(bin_dir), *rest])
    return env


def test_the_readme_plugin_recipe_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    block = _bash_block(REPO / "README.md", MARKER)
    assert block == _bash_block(REPO / "examples" / "reward-plugin" / "README.md", MARKER), (
        "the example's README and the project README give different commands"
    )
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=_SKIP)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    base = Path(getattr(sys, "_base_executable", sys.executable))
    (bin_dir / "python").symlink_to(base)  # `python` as a user has it: the base interpreter, not this venv's
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    after = (  # checks appended after the README's lines, in the same shell (so in the activated environment)
        '\necho "which-harness=$(command -v harness)"\n'
        f"cd {elsewhere} && python -m harness rewards list > pym-list.txt\n"
        "python -c \"import harness, grpo_harness_example_plugin as p; print('imported-from=' + harness.__file__)\"\n"
    )
    script = tmp_path / "recipe.sh"
    script.write_text(block + after)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", str(script)],
        cwd=checkout,
        env=_clean_env(bin_dir),
        capture_output=True,
        text=True,
        timeout=1100,
    )
    log = f"stdout:\n{proc.stdout[-6000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, log

    venv = checkout / ".venv-plugin"
    assert f"which-harness={venv / 'bin' / 'harness'}" in proc.stdout, log
    imported = re.search(r"imported-from=(.*)", proc.stdout)
    assert imported and imported.group(1).startswith(str(venv / "lib")), log  # the installed copy, not the checkout
    listing = proc.stdout[: proc.stdout.index("which-harness=")]
    assert re.search(r"^keyword_bonus\n\s+origin: grpo-harness-example-plugin 0\.1\.0", listing, re.M), log
    assert "boxed_present" in listing  # the built-ins came along
    rows = [json.loads(x) for x in (checkout / "out.jsonl").read_text().splitlines()]
    assert [r["rewards"]["keyword_bonus"] for r in rows] == [0.5], rows  # "therefore" found once, bonus 0.5
    assert "keyword_bonus" in (elsewhere / "pym-list.txt").read_text().splitlines()  # python -m harness
