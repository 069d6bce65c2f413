"""The scoring backend's settings and flags (no Ray started here): the ``scoring`` section, the CLI flags, and
that the local path never imports Ray."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import add_scoring_arguments, scoring_overrides
from harness.config import load_config
from harness.errors import ConfigError, HarnessError

ROOT = Path(__file__).resolve().parents[2]


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_scoring_arguments(p)
    return p.parse_args(list(argv))


def test_scoring_section_defaults_to_local_and_names_a_bad_backend():
    assert load_config({}).scoring.backend == "local"
    cfg = load_config({"scoring": {"backend": "ray", "ray_address": "auto", "actors_per_node": 3}})
    assert (cfg.scoring.backend, cfg.scoring.ray_address, cfg.scoring.actors_per_node) == ("ray", "auto", 3)
    with pytest.raises(ConfigError, match=r"scoring\.backend: Input should be 'local' or 'ray'"):
        load_config({"scoring": {"backend": "slurm"}})
    with pytest.raises(ConfigError, match=r"scoring\.actors_per_node"):
        load_config({"scoring": {"actors_per_node": 0}})


def test_flags_override_the_section():
    assert scoring_overrides(_args()) == {}
    assert scoring_overrides(_args("--scoring-backend", "ray")) == {"scoring.backend": "ray"}
    assert scoring_overrides(_args("--ray-address", "auto")) == {
        "scoring.backend": "ray",
        "scoring.ray_address": "auto",
    }
    with pytest.raises(HarnessError, match="--ray-address goes with --scoring-backend ray"):
        scoring_overrides(_args("--scoring-backend", "local", "--ray-address", "auto"))
    cfg = load_config({"scoring": {"backend": "ray"}}, overrides=scoring_overrides(_args("--scoring-backend", "local")))
    assert cfg.scoring.backend == "local"


def test_train_score_and_eval_take_the_flags():
    from harness.cli import build_parser

    parser = build_parser()
    for argv in (
        ["score", "--input", "a", "--output", "b"],
        ["train", "--config", "x.yaml"],
        ["eval", "--checkpoint", "ckpt"],
    ):
        args = parser.parse_args([*argv, "--scoring-backend", "ray", "--ray-address", "10.0.0.1:6379"])
        assert (args.scoring_backend, args.ray_address) == ("ray", "10.0.0.1:6379")


def test_the_local_path_never_imports_ray():
    code = (
        "import sys\nfrom harness import score_batch\nimport harness.cli, harness.scoring\n"
        "res = score_batch([{'id': '1'}], ['Answer: 1'], [{'name': 'format_regex', 'params': {'pattern': '1'}}])\n"
        "assert res.values('format_regex') == [1.0], res\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\nprint('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_plugin_file_travels_to_a_node_without_it(tmp_path):
    from harness.scoring._ray_actor import _local_spec

    driver = tmp_path / "driver" / "my_reward.py"
    driver.parent.mkdir()
    source = "VALUE = 42\n"
    driver.write_text(source)
    assert _local_spec(str(driver), source, tmp_path) == str(driver)  # the node holds the same file: used as is
    elsewhere = tmp_path / "node"
    elsewhere.mkdir()
    driver.write_text("VALUE = 0\n")  # the node's file differs from what the driver sent: a copy is written
    copy = Path(_local_spec(str(driver), source, elsewhere))
    assert copy.parent == elsewhere and copy.name == "my_reward.py" and copy.read_text() == source
    assert _local_spec("my_pkg.rewards", None, elsewhere) == "my_pkg.rewards"  # a module: imported by name


def test_ray_backend_without_ray_installed_is_a_clear_error(monkeypatch):
    from harness.cfg import ScoringSection
    from harness.errors import ScoringError
    from harness.scoring import scoring_pool

    monkeypatch.setitem(sys.modules, "ray", None)  # as if the package were missing: `import ray` raises ImportError
    with pytest.raises(ScoringError, match="scoring.backend ray needs the ray package .* pip install ray"):
        scoring_pool(ScoringSection(backend="ray"))
    assert scoring_pool(ScoringSection()) is None  # local: the session's own pool, nothing imported


def test_an_address_nothing_answers_at_fails_at_once():
    pytest.importorskip("ray")
    from harness.cfg import ScoringSection
    from harness.errors import ScoringError
    from harness.scoring import scoring_pool

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ScoringError, match=f"nothing answers at the Ray address '127.0.0.1:{port}'"):
        scoring_pool(ScoringSection(backend="ray", ray_address=f"127.0.0.1:{port}"))
