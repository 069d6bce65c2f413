"""Tracing of training rewards and held-out scores with OpenTelemetry (see ``docs/TRACING.md``).

``RunTelemetry.start(run_dir, run_id, config)`` writes ``run_dir/traces.jsonl`` (OTLP JSON) and also exports over
OTLP when the ``OTEL_*`` variables or the config name an endpoint; ``harness traces push`` replays the file store.
Reading spans back into the training-vs-held-out report is :mod:`harness.report`'s job, not this package's.
"""

from harness.telemetry._attrs import RewardStats
from harness.telemetry._export import OtlpSettings, parse_headers, resolve_otlp
from harness.telemetry._run import TRACES_FILE, EvalSpan, RunTelemetry, StepSpan
from harness.telemetry._store import drop_steps_after, flat_span, hex_span_ids, iter_spans, span_from_json, store_path

__all__ = ["RunTelemetry", "RewardStats", "StepSpan", "EvalSpan", "TRACES_FILE", "OtlpSettings", "resolve_otlp"]
__all__ += ["parse_headers", "iter_spans", "drop_steps_after", "flat_span", "span_from_json", "store_path"]
__all__ += ["hex_span_ids"]
