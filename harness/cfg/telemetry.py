"""The `telemetry` section of a run config (owned by harness.telemetry)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["TelemetrySection"]


class TelemetrySection(BaseModel):
    """Tracing settings; the standard OTEL_* environment variables override them."""

    model_config = ConfigDict(extra="forbid")
