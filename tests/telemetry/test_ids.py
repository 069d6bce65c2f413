"""Trace ids do not follow the training seed: two runs seeded alike must not collide in a backend."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.telemetry import RunTelemetry


def _trace_ids(run_dir: Path) -> set[str]:
    ids: set[str] = set()
    for line in (run_dir / "traces.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ids.update(sp["traceId"] for sp in ss["spans"])
    return ids


def test_runs_with_the_same_global_seed_get_different_trace_ids(tmp_path: Path) -> None:
    found = []
    for i in range(2):
        random.seed(0)  # what a training run does for reproducibility
        tel = RunTelemetry.start(tmp_path / f"run{i}", f"run{i}")
        with tel.train_step(1) as st:
            st.set_metrics({"loss": 1.0})
        tel.shutdown()
        found.append(_trace_ids(tmp_path / f"run{i}"))
    assert found[0] and found[1] and not found[0] & found[1]
