"""Config sections of a run, each owned by the package whose settings it holds.

harness/ owns ``model``, ``data`` (:mod:`harness.cfg.common`), ``scoring`` (:mod:`harness.cfg.scoring`) and
``telemetry`` (:mod:`harness.cfg.telemetry`);
other packages plug theirs in through the ``grpo_harness.config_sections`` hook (:mod:`harness.cfg._sections`):
the trainer's ``trainer`` section lives in ``trainer.config``, the evaluator's ``eval`` section in ``evals.config``.
`harness.config.RunConfig` assembles them. Each section validates its own fields; cross-section checks live in
`harness.config`. ``TrainerSection`` and ``EvalSection`` stay importable from here (resolved through the hook).
"""

from typing import Any

from harness.cfg._sections import section_models
from harness.cfg.common import DataSection, ModelSection
from harness.cfg.scoring import ScoringSection
from harness.cfg.telemetry import TelemetrySection

__all__ = ["DataSection", "EvalSection", "ModelSection", "ScoringSection", "TelemetrySection", "TrainerSection"]

#: Section models re-exported here under their old names, by the section that defines them.
_PLUGGED = {"TrainerSection": "trainer", "EvalSection": "eval"}


def __getattr__(name: str) -> Any:
    if name in _PLUGGED:
        return section_models()[_PLUGGED[name]]
    raise AttributeError(f"module 'harness.cfg' has no attribute {name!r}")
