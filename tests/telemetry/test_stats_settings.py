"""Pure parts of harness.telemetry: reward statistics on spans (the statistics themselves are tested in
tests/test_stats.py), OTEL_* resolution, config errors (the OTLP JSON round trip is in test_export.py)."""

from __future__ import annotations

import pytest

from harness.cfg.telemetry import TelemetrySection
from harness.telemetry import RewardStats, parse_headers, resolve_otlp
from harness.types import Score


class _Batch:  # the two attributes of harness.scoring.BatchResult that from_batch reads
    def __init__(self, scores, latency_s):
        self.scores, self.latency_s = scores, latency_s


def test_reward_stats_from_batch_counts_statuses():
    scores = [
        Score(value=1.0, status="pass"),
        Score(value=0.0, status="fail"),
        Score.unscored("timeout", "slow"),
        Score(value=1.0, status="pass"),
    ]
    st = RewardStats.from_batch(
        _Batch({"code": scores}, {"code": [0.1, 0.2, 5.0, 0.3]}), "code", group_size=2, weight=2.0
    )
    assert st.mean == pytest.approx(2 / 3) and st.count == 4 and st.scored == 3
    assert st.statuses == {"pass": 2, "fail": 1, "timeout": 1}
    assert st.zero_variance_group_frac == pytest.approx(0.5)
    assert st.latency_p50_s == pytest.approx(0.25) and st.latency_p99_s > 4.0 and st.weight == 2.0
    with pytest.raises(KeyError, match="has no reward 'math'"):
        RewardStats.from_batch(_Batch({"code": scores}, {}), "math")


def test_resolve_otlp_precedence():
    sec = TelemetrySection(otlp_endpoint="http://cfg:4318/v1/traces", otlp_headers={"A": "1"})
    assert resolve_otlp(TelemetrySection(), {}) is None
    s = resolve_otlp(sec, {})
    assert s.endpoint == "http://cfg:4318/v1/traces" and s.protocol == "http/protobuf" and s.headers == {"A": "1"}
    s = resolve_otlp(sec, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/", "OTEL_EXPORTER_OTLP_HEADERS": "b=x%20y"})
    assert s.endpoint == "http://env:4318/v1/traces" and s.headers == {"A": "1", "b": "x y"}
    s = resolve_otlp(
        sec, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}
    )
    assert s.endpoint == "http://t/x"
    s = resolve_otlp(sec, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://g:4317"})
    assert s.protocol == "grpc" and s.endpoint == "http://g:4317" and s.headers == {"a": "1"}
    assert resolve_otlp(sec, {"OTEL_TRACES_EXPORTER": "none"}) is None
    assert resolve_otlp(sec, {"OTEL_SDK_DISABLED": "true"}) is None
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        resolve_otlp(sec, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_HEADERS"):
        resolve_otlp(sec, {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"})
    assert parse_headers("x-mlflow-experiment-id=3, k = v") == {"x-mlflow-experiment-id": "3", "k": "v"}


def test_telemetry_config_errors_name_the_field(tmp_path):
    from harness.config import load_config
    from harness.errors import ConfigError

    path = tmp_path / "run.yaml"
    path.write_text("telemetry:\n  otlp_protocol: http/json\n")
    with pytest.raises(ConfigError, match=r"run.yaml: telemetry.otlp_protocol"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"telemetry.alarm.window"):
        load_config({"telemetry": {"alarm": {"window": 1}}})
    cfg = load_config({"telemetry": {"otlp_endpoint": "http://h:6006/v1/traces", "sample_records": 4}})
    assert cfg.telemetry.sample_records == 4 and cfg.telemetry.file_store


def test_reward_stats_from_a_real_batch_result_takes_the_spec_weight():
    from harness.scoring import BatchResult
    from harness.types import RewardSpec

    res = BatchResult(
        specs=[RewardSpec(name="fmt", weight=0.0), RewardSpec(name="math", weight=2.0)],
        scores={"fmt": [Score(value=1.0)] * 2, "math": [Score(value=0.0), Score(value=1.0)]},
        latency_s={"fmt": [0.0, 0.0], "math": [0.5, 1.5]},
    )
    st = RewardStats.from_batch(res, "math", group_size=2)
    assert st.weight == 2.0 and st.mean == 0.5 and st.latency_p50_s == 1.0 and st.zero_variance_group_frac == 0.0
    assert RewardStats.from_batch(res, "fmt").weight == 0.0
    summary = res.summary()["math"]  # the scoring path's own summary agrees
    assert summary["mean"] == st.mean and summary["scored"] == st.scored


def test_malformed_otel_variable_is_a_config_error(tmp_path):
    from harness.errors import ConfigError
    from harness.telemetry import RunTelemetry

    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        RunTelemetry.start(
            tmp_path,
            "r",
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
        )
