"""The hook through which packages plug into the core (harness.hooks): commands and config sections.

The trainer's and the evaluator's sections and commands are found through the entry points grpo-harness declares,
so these tests check what a user sees: the sections validate with errors that name the field, the old import paths
answer from the new owners, and every command is on the parser.
"""

from __future__ import annotations

import pytest

from harness.cli import build_parser
from harness.config import RunConfig, dump_config, load_config
from harness.errors import ConfigError
from harness.hooks import COMMANDS, CONFIG_SECTIONS, own_entry_points


def test_the_plugged_sections_are_the_owners_models_under_every_old_name():
    import harness.cfg
    from evals.config import EvalSection
    from harness.cfg.eval import EvalSection as OldEvalSection
    from harness.cfg.trainer import LOSS_DEFAULTS as OLD_LOSS_DEFAULTS
    from harness.cfg.trainer import TrainerSection as OldTrainerSection
    from trainer.config import LOSS_DEFAULTS, TrainerSection

    assert OldTrainerSection is TrainerSection and harness.cfg.TrainerSection is TrainerSection
    assert OldEvalSection is EvalSection and harness.cfg.EvalSection is EvalSection
    assert OLD_LOSS_DEFAULTS is LOSS_DEFAULTS
    cfg = RunConfig()
    assert isinstance(cfg.trainer, TrainerSection) and isinstance(cfg.eval, EvalSection)
    assert {ep.name for ep in own_entry_points(CONFIG_SECTIONS)} == {"trainer", "eval"}


def test_a_plugged_section_is_validated_with_errors_that_name_the_field(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("trainer:\n  num_generations: 1\neval:\n  k: 0\ntrainr: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert f"{path}: trainer.num_generations: Input should be greater than or equal to 2" in msg
    assert f"{path}: eval.k: Input should be greater than or equal to 1" in msg
    assert f"{path}: trainr: Extra inputs are not permitted" in msg
    with pytest.raises(ConfigError, match="micro_batch_size=3 does not divide"):
        load_config({"trainer": {"micro_batch_size": 3}})


def test_plugged_sections_survive_dump_load_and_copy(tmp_path):
    cfg = load_config({"trainer": {"loss": "dapo", "num_generations": 4}, "eval": {"k": 2}})
    assert cfg.trainer.resolved().epsilon_high == 0.28  # the loss's paper default, from the owner's model
    dump_config(cfg, tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert again.trainer.num_generations == 4 and again.eval.k == 2 and again == cfg
    copy = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"k": 5})})
    assert copy.eval.k == 5 and cfg.eval.k == 2


def test_every_command_is_on_the_parser():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    plugged = {ep.name for ep in own_entry_points(COMMANDS)}
    assert plugged == {"train", "eval", "judge-agreement", "sandbox", "demo", "tasks"}
    assert set(sub.choices) == plugged | {"score", "rewards", "report", "traces"}
