"""Fixtures of the judge tests: a scripted HTTP server on 127.0.0.1 (a thread), and a judge builder."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.append(HERE)  # appended: scripted_server is a unique name, and this dir must not shadow other conftests

from scripted_server import ScriptedServer  # noqa: E402

from harness import get_reward  # noqa: E402
from harness.registry import RewardFn  # noqa: E402


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
