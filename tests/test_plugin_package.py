"""The third-party plugin package in examples/reward-plugin, installed with pip and found through the CLI.

pip builds and installs the real package (``--no-deps --no-build-isolation``: no index needed) into a target
directory of this test, and the ``harness`` console script runs with that directory on ``PYTHONPATH``. That is a
real installed distribution, discovered through its ``grpo_harness.rewards`` entry point, while the shared
environment stays untouched, so other tests never see a reward they did not ask for, and a test killed halfway
leaves nothing behind. The directory is removed afterwards by pytest's tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN_SRC = REPO / "examples" / "reward-plugin"
HARNESS = Path(sys.executable).with_name("harness")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the example plugin into a fresh target directory; yield that directory."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = work / "site"
    _pip_target(src, site)
    assert list(site.glob("grpo_harness_example_plugin-0.1.0.dist-info")), sorted(p.name for p in site.iterdir())
    return site


def _make_dist(root: Path, dist: str, module: str, entry: str, source: str) -> Path:
    """Write a one-module distribution registering ``entry`` in ``grpo_harness.rewards``; return its directory."""
    src = root / dist
    (src / module).mkdir(parents=True)
    (src / module / "__init__.py").write_text(source)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{dist}"\nversion = "0.0.1"\n'
        f'[project.entry-points."grpo_harness.rewards"]\n{entry} = "{module}"\n'
    )
    return src


def _pip_target(src: Path, site: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet"]
    proc = subprocess.run([*cmd, "--target", str(site), str(src)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"


def _harness(args: list[str], site: Path | None, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD"}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    env.update(env_extra)
    assert HARNESS.exists(), f"the console script {HARNESS} is missing; install the project"
    return subprocess.run([str(HARNESS), *args], capture_output=True, text=True, timeout=120, env=env)


def _block(listing: str, name: str) -> str:
    """The lines of ``harness rewards list`` that describe reward ``name``."""
    lines = listing.splitlines()
    start = lines.index(name)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def test_rewards_list_shows_the_plugin_with_its_distribution(plugin_site: Path) -> None:
    proc = _harness(["rewards", "list"], plugin_site)
    assert proc.returncode == 0, proc.stderr
    block = _block(proc.stdout, "keyword_bonus")
    assert "grpo-harness-example-plugin 0.1.0" in block
    assert "bonus: float = 0.1" in block
    assert "boxed_present" in proc.stdout  # the built-ins are still there


def test_rewards_list_without_the_plugin_or_with_autoload_off(plugin_site: Path) -> None:
    assert "keyword_bonus" not in _harness(["rewards", "list"], None).stdout.splitlines()
    off = _harness(["rewards", "list"], plugin_site, GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD="1")
    assert off.returncode == 0, off.stderr
    assert "keyword_bonus" not in off.stdout.splitlines()


def test_harness_score_runs_the_plugin(plugin_site: Path, tmp_path: Path) -> None:
    rows = [
        {"id": "a", "completion": "Because 3 > 2, therefore 3."},
        {"id": "b", "completion": "no keywords at all"},
        {"completion": "THEREFORE yes"},
    ]
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["score", "--reward", "keyword_bonus", "--param", "keyword_bonus.bonus=0.5"]
    proc = _harness([*args, "--input", str(inp), "--output", str(out)], plugin_site)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["rewards"]["keyword_bonus"] for r in got] == [1.0, 0.0, 0.5]
    assert [r["total"] for r in got] == [1.0, 0.0, 0.5]
    assert [r["id"] for r in got[:2]] == ["a", "b"]
    assert got[0]["scores"]["keyword_bonus"]["info"]["found"] == ["therefore", "because"]
    assert "keyword_bonus" in proc.stderr  # the per-reward summary


def test_plugin_docstring_example_runs(plugin_site: Path) -> None:
    code = (
        "import doctest, sys, grpo_harness_example_plugin.rewards as m; r = doctest.testmod(m); "
        "print(r); sys.exit(1 if r.failed or not r.attempted else 0)"
    )
    env = {**os.environ, "PYTHONPATH": str(plugin_site)}
    env.pop("GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_unknown_plugin_parameter_fails_with_the_accepted_ones(plugin_site: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"completion": "x"}\n')
    args = ["score", "--reward", "keyword_bonus", "--param", "keyword_bonus.bonsu=1"]
    proc = _harness([*args, "--input", str(inp), "--output", str(tmp_path / "out.jsonl")], plugin_site)
    assert proc.returncode != 0
    assert "bonsu" in proc.stderr and "bonus: float = 0.1" in proc.stderr


def test_a_broken_plugin_is_a_warning_and_a_duplicate_names_both_origins(plugin_site: Path, tmp_path: Path) -> None:
    broken = _make_dist(tmp_path, "broken-plugin", "broken_plugin", "broken_reward", "raise ImportError('no numpyy')\n")
    dup_source = (
        "from harness import Score, reward\n\n"
        "@reward('keyword_bonus')\n"
        "def keyword_bonus():\n"
        "    return lambda sample, completion: Score(value=0.0)\n"
    )
    dup = _make_dist(tmp_path, "copycat-plugin", "copycat_plugin", "keyword_bonus", dup_source)
    site_broken, site_dup = tmp_path / "site-broken", tmp_path / "site-dup"
    _pip_target(broken, site_broken)
    _pip_target(dup, site_dup)

    listing = _harness(["rewards", "list"], plugin_site, PYTHONPATH=f"{plugin_site}{os.pathsep}{site_broken}")
    assert listing.returncode == 0, listing.stderr
    assert "keyword_bonus" in listing.stdout.splitlines()  # the healthy plugin still loads
    assert "broken-plugin 0.0.1" in listing.stderr and "no numpyy" in listing.stderr

    clash = _harness(["rewards", "list"], plugin_site, PYTHONPATH=f"{plugin_site}{os.pathsep}{site_dup}")
    assert clash.returncode != 0  # a name clash fails loudly instead of one plugin silently shadowing the other
    assert "registered twice" in clash.stderr
    assert "grpo-harness-example-plugin 0.1.0" in clash.stderr and "copycat-plugin 0.0.1" in clash.stderr
