"""Run config loading: YAML and TOML, the rewards shorthand, and errors that name the file and the field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import RunConfig, dump_config, load_config
from harness.errors import ConfigError
from harness.types import RewardSpec


def test_yaml_and_toml_give_the_same_config(tmp_path: Path) -> None:
    y = tmp_path / "run.yaml"
    y.write_text("run:\n  seed: 3\nrewards:\n  - name: math\n    weight: 1.0\n  - {name: boxed_present, weight: 0.1}\n")
    t = tmp_path / "run.toml"
    t.write_text(
        '[run]\nseed = 3\n[[rewards]]\nname = "math"\nweight = 1.0\n[[rewards]]\nname = "boxed_present"\nweight = 0.1\n'
    )
    assert load_config(y) == load_config(t)
    assert load_config(y).rewards[1] == RewardSpec(name="boxed_present", weight=0.1)


def test_rewards_mapping_shorthand() -> None:
    cfg = load_config(
        {"rewards": {"math": 1.0, "format_regex": {"weight": 0.5, "params": {"pattern": "x"}}, "length": None}}
    )
    assert [(s.name, s.weight) for s in cfg.rewards] == [("math", 1.0), ("format_regex", 0.5), ("length", 1.0)]
    assert cfg.rewards[1].params == {"pattern": "x"}


def test_error_names_file_field_path_and_expectation(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("run:\n  seed: many\nrewards:\n  - name: math\n    weight: heavy\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert f"{p}: run.seed: Input should be a valid integer" in msg
    assert f"{p}: rewards.0.weight: Input should be a valid number" in msg and '(got "heavy")' in msg


def test_unknown_section_and_unknown_field_are_errors(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("runn: {}\nmodel:\n  nmae: x\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "runn: Extra inputs are not permitted" in str(e.value)
    assert "model.nmae: Extra inputs are not permitted" in str(e.value)


def test_duplicate_reward_names_are_rejected() -> None:
    with pytest.raises(ConfigError, match="rewards: .*unique.*math"):
        load_config({"rewards": [{"name": "math"}, {"name": "math", "weight": 2}]})


def test_missing_file_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "broken.yaml"
    bad.write_text("run: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load_config(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="list.yaml: expected a mapping"):
        load_config(lst)


def test_overrides_and_round_trip(tmp_path: Path) -> None:
    cfg = load_config({"rewards": {"math": 1.0}}, overrides={"run.seed": 7, "run.output_dir": str(tmp_path)})
    assert cfg.run.seed == 7
    out = tmp_path / "config.yaml"
    dump_config(cfg, out)
    assert load_config(out) == cfg
    assert isinstance(cfg, RunConfig)
