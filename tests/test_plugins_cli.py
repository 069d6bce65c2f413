"""``--plugin module_or_file.py`` and the run config's ``plugins:``: a custom reward with no package, from the CLI.

Regression tests: on the old main ``harness score`` had no ``--plugin`` option (argparse exit 2) and a run config
with ``plugins:`` failed to validate (extra field). The plugin here is a real file imported by the real console
module, in the parent and in the scoring worker processes (its reward runs with process isolation, so a worker
that had not imported it would answer ``error: unknown reward``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

import harness

ROOT = Path(harness.__file__).resolve().parents[1]  # the tree whose harness the console module runs

PLUGIN = '''
import os
from harness import Score, reward

@reward("shout")
def shout(*, bangs: int = 1):
    """1 when the completion has at least `bangs` exclamation marks."""
    def score(sample, completion):
        return Score(value=float(completion.count("!") >= bangs), info={"pid": os.getpid()})
    return score
'''


def _harness(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def _inputs(tmp_path: Path) -> Path:
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        "".join(json.dumps({"id": str(i), "completion": c}) + "\n" for i, c in enumerate(["hi!!", "hi", "!"]))
    )
    return inp


def test_score_with_a_plugin_file_runs_the_reward_in_the_workers(tmp_path: Path) -> None:
    (tmp_path / "plugdir").mkdir()
    (tmp_path / "plugdir" / "my_reward.py").write_text(PLUGIN)
    inp, out = _inputs(tmp_path), tmp_path / "out.jsonl"
    proc = _harness(
        [
            "score",
            "--plugin",
            "plugdir/my_reward.py",
            "--reward",
            "shout",
            "--param",
            "shout.bangs=2",
            "--input",
            str(inp),
            "--output",
            str(out),
            "--workers",
            "1",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["rewards"]["shout"] for r in rows] == [1.0, 0.0, 0.0]
    assert all(r["scores"]["shout"]["status"] == "ok" for r in rows)

    listing = _harness(["rewards", "list", "--plugin", "plugdir/my_reward.py"], cwd=tmp_path)
    assert listing.returncode == 0 and "shout" in listing.stdout.splitlines()


def test_plugins_in_the_run_config_are_relative_to_the_config_file(tmp_path: Path) -> None:
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "my_reward.py").write_text(PLUGIN)
    (cfg_dir / "run.yaml").write_text(yaml.safe_dump({"plugins": ["my_reward.py"], "rewards": {"shout": 1.0}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inp, out = _inputs(tmp_path), tmp_path / "out.jsonl"
    proc = _harness(
        ["score", "--config", str(cfg_dir / "run.yaml"), "--input", str(inp), "--output", str(out)], cwd=elsewhere
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["rewards"]["shout"] for x in out.read_text().splitlines()] == [1.0, 0.0, 1.0]

    from harness.config import load_config

    assert load_config(cfg_dir / "run.yaml").plugins == [str((cfg_dir / "my_reward.py").resolve())]


def test_a_missing_or_broken_plugin_is_a_clear_error(tmp_path: Path) -> None:
    inp = _inputs(tmp_path)

    def score_with(plugin: str):
        cmd = [
            "score",
            "--plugin",
            plugin,
            "--reward",
            "shout",
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "o.jsonl"),
        ]
        return _harness(cmd, cwd=tmp_path)

    missing = score_with("nope.py")
    assert missing.returncode == 2 and "plugin nope.py: file not found" in missing.stderr
    (tmp_path / "broken.py").write_text("import not_a_module_xyz\n")
    broken = score_with("broken.py")
    assert (
        broken.returncode == 2 and "broken.py failed to import" in broken.stderr and "not_a_module_xyz" in broken.stderr
    )


def test_train_and_eval_accept_plugin() -> None:
    from harness.cli import build_parser

    parser = build_parser()
    train = parser.parse_args(["train", "--config", "x.yaml", "--plugin", "a.py", "--plugin", "pkg.mod"])
    assert train.plugin == ["a.py", "pkg.mod"]
    ev = parser.parse_args(["eval", "--checkpoint", "c", "--plugin", "b.py"])
    assert ev.plugin == ["b.py"]


def test_a_users_rewards_py_in_the_working_directory_fails_the_command_naming_it(tmp_path: Path) -> None:
    """Regression: on the old main the console script loaded fine (its ``sys.path`` has no working directory) but
    every scoring worker imported the user's ``rewards.py``; the console said "left 3/3 samples unscored (3 error)"
    and the command exited 0. Now it fails at load (exit 2) and names the file, as ``harness`` and as
    ``python -m harness``; renamed and passed with ``--plugin``, the same files score."""
    (tmp_path / "rewards.py").write_text(PLUGIN)
    inp = _inputs(tmp_path)
    args = ["score", "--reward", "boxed_present", "--reward", "shout", "--input", str(inp)]
    script = Path(sys.executable).with_name("harness")
    assert script.exists(), f"the console script {script} is missing; install the project"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    runs = {
        "harness": [str(script)],
        "python -m harness": [sys.executable, "-m", "harness"],
    }
    for label, cmd in runs.items():
        out = tmp_path / f"out-{label.replace(' ', '_')}.jsonl"
        proc = subprocess.run(
            [*cmd, *args, "--plugin", "rewards.py", "--output", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        assert proc.returncode == 2, (label, proc.returncode, proc.stderr)
        assert str(tmp_path / "rewards.py") in proc.stderr and "shadows" in proc.stderr, (label, proc.stderr)
        assert "rename" in proc.stderr and "unscored" not in proc.stderr, (label, proc.stderr)
        assert not out.exists() or not out.read_text().strip(), label  # nothing scored, nothing half-written

    (tmp_path / "rewards.py").rename(tmp_path / "my_rewards.py")
    out = tmp_path / "out-renamed.jsonl"
    ok = subprocess.run(
        [str(script), *args, "--plugin", "my_rewards.py", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert [json.loads(r)["rewards"]["shout"] for r in out.read_text().splitlines()] == [1.0, 0.0, 1.0]
