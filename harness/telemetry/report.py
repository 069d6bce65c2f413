"""The report's former import path: ``harness.telemetry.report`` names the same objects as :mod:`harness.report`."""

from harness.report import *  # noqa: F403
from harness.report import __all__  # noqa: F401
