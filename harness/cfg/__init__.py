"""Config sections of a run, one module per section so each part of the project owns its own fields.

`harness.config.RunConfig` assembles them. Each section validates its own fields; cross-section checks live in
`harness.config`.
"""

from harness.cfg.common import DataSection, ModelSection
from harness.cfg.eval import EvalSection
from harness.cfg.telemetry import TelemetrySection
from harness.cfg.trainer import TrainerSection

__all__ = ["DataSection", "EvalSection", "ModelSection", "TelemetrySection", "TrainerSection"]
