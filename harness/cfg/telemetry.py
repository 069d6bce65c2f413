"""The `telemetry` section of a run config (owned by harness.telemetry).

The standard ``OTEL_*`` environment variables override the OTLP fields here (see ``docs/TRACING.md``); the file
store (``runs/<run_id>/traces.jsonl``) is written whatever the OTLP settings are, unless ``enabled`` is false.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TelemetrySection", "AlarmSection"]


class AlarmSection(BaseModel):
    """When ``harness report`` raises the divergence alarm for a reward.

    Over the last ``window`` checkpoints (at least two), the alarm fires when the training reward rose by at least
    ``train_rise`` while the held-out score rose by less than ``heldout_min_rise`` (flat or falling), unless the
    held-out score is saturated (at or above ``saturated_at``) and at or above the training reward: then it has
    nowhere to rise to, and training is catching up with it, not leaving it behind.
    """

    model_config = ConfigDict(extra="forbid")

    window: int = Field(3, ge=2, description="checkpoints compared (first vs last of the window)")
    train_rise: float = Field(0.05, ge=0.0, description="training reward rise that counts as rising")
    heldout_min_rise: float = Field(0.01, description="held-out rise below which it counts as flat or falling")
    saturated_at: float | None = Field(
        1.0,
        description="a held-out score at or above this cannot rise (the top of a 0-1 reward); None: never saturated",
    )


class TelemetrySection(BaseModel):
    """Tracing settings; the standard OTEL_* environment variables override the OTLP ones."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="false: no spans at all (nothing written, nothing exported)")
    file_store: bool = Field(True, description="write runs/<run_id>/traces.jsonl (OTLP JSON)")
    service_name: str = Field("grpo-harness", description="resource service.name (OTEL_SERVICE_NAME wins)")
    project_name: str | None = Field(
        None, description="openinference.project.name (Phoenix project); default: service_name"
    )
    otlp_endpoint: str | None = Field(None, description="OTLP traces endpoint; none: file store only")
    otlp_protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    otlp_headers: dict[str, str] = Field(
        default_factory=dict, description="extra request headers, e.g. x-mlflow-experiment-id"
    )
    export_timeout_s: float = Field(5.0, gt=0, description="per export request to the OTLP backend")
    max_queue_size: int = Field(2048, ge=1, description="spans waiting for the OTLP exporter; more are dropped")
    max_export_batch_size: int = Field(512, ge=1)
    schedule_delay_s: float = Field(1.0, gt=0, description="how often queued spans are sent")
    retry_after_s: float = Field(30.0, ge=0, description="after a failed export, spans are not sent for this long")
    sample_records: int = Field(0, ge=0, description="per-sample records per reward per step (0 = off)")
    alarm: AlarmSection = Field(default_factory=AlarmSection)
