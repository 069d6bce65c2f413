"""``harness train`` argument handling: --set overrides and errors that come before any model is loaded."""

import argparse

import pytest

from harness.errors import ConfigError
from trainer.cli import add_parser, main, parse_sets


def test_parse_sets_reads_values_as_yaml():
    assert parse_sets(["trainer.lr=1e-5", "trainer.loss=dapo", "trainer.bf16=true"]) == {
        "trainer.lr": 1e-5,
        "trainer.loss": "dapo",
        "trainer.bf16": True,
    }
    with pytest.raises(ConfigError, match="SECTION.FIELD=VALUE"):
        parse_sets(["trainer.lr"])


def test_add_parser_registers_train():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--config", "x.yaml", "--resume", "--set", "trainer.lr=1"])
    assert args.resume and args.sets == ["trainer.lr=1"] and callable(args.func)


def test_bad_batch_shape_fails_before_loading_a_model(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "model: {name_or_path: /nonexistent/model}\ndata: {train: toy:8}\nrewards: {char_count: 1.0}\n"
        "trainer: {num_generations: 4, prompts_per_step: 3, micro_batch_size: 5}\n"
    )
    assert main(["--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "trainer: micro_batch_size=5 does not divide" in err or "micro_batch_size=5" in err
    assert "pick a divisor of 12" in err


def test_resume_without_run_id_is_a_clear_error(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("model: {name_or_path: toy:char}\ndata: {train: toy:8}\nrewards: {char_count: 1.0}\n")
    assert main(["--config", str(cfg), "--resume", "--no-progress"]) == 2
    assert "run.id" in capsys.readouterr().err
