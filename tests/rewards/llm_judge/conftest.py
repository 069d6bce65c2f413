"""Fixtures of the judge tests: a scripted HTTP server on 127.0.0.1 (a thread), and a judge builder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_server import ScriptedServer  # on pytest's pythonpath (pyproject.toml)

from harness import get_reward
from harness.registry import RewardFn


@pytest.fixture()
def scripted() -> Iterator[ScriptedServer]:
    srv = ScriptedServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture()
def make_judge(tmp_path: Path):
    def build(url: str, **params: Any) -> RewardFn:
        params.setdefault("model", "scripted")
        params.setdefault("cache_dir", str(tmp_path / "judge-cache"))
        params.setdefault("timeout", 10)
        return get_reward("llm_judge", base_url=url, **params)

    return build
