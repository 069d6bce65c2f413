"""What a judge needs before it sends anything: a key from a variable that is really set, and one time limit
that the scoring path's own limit covers. Both fail at load with exit 2 (nothing reaches the server), instead
of a run of HTTP 401s or of calls the scoring path abandons. The server is the scripted one (a thread)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scripted_server import Action, ScriptedServer

from harness.cli import main
from harness.errors import RewardParameterError
from harness.scoring import DEFAULT_TIMEOUT_S, ScoringSession

ROW = {"id": "1", "prompt": "What is 2+3?", "answer": "5"}


def _score(tmp_path: Path, url: str, *params: str, timeout: str | None = None) -> int:
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({**ROW, "completion": "5"}) + "\n")
    args = [
        "score",
        "--reward",
        "llm_judge",
        "--input",
        str(inp),
        "--output",
        str(tmp_path / "out.jsonl"),
        "--param",
        f"llm_judge.base_url={url}",
        "--param",
        "llm_judge.model=scripted",
        "--param",
        f"llm_judge.cache_dir={tmp_path / 'cache'}",
        "--workers",
        "1",
    ]
    for p in params:
        args += ["--param", f"llm_judge.{p}"]
    return main([*args, *(["--timeout", timeout] if timeout else [])])


@pytest.mark.parametrize("value", [None, "", "  "])
def test_a_named_key_variable_unset_or_empty_fails_the_command_naming_it(
    scripted: ScriptedServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str | None,
) -> None:
    """Regression: on the old main an unset variable sent requests without a key; the user saw only HTTP 401s."""
    if value is None:
        monkeypatch.delenv("JUDGE_KEY_FOR_TEST", raising=False)
    else:
        monkeypatch.setenv("JUDGE_KEY_FOR_TEST", value)
    assert _score(tmp_path, scripted.url, "api_key_env=JUDGE_KEY_FOR_TEST") == 2
    err = capsys.readouterr().err
    assert "JUDGE_KEY_FOR_TEST" in err and ("not set" if value is None else "empty") in err, err
    assert scripted.count == 0  # refused at load: no request went out
    assert not (tmp_path / "out.jsonl").exists() or not (tmp_path / "out.jsonl").read_text().strip()

    monkeypatch.setenv("JUDGE_KEY_FOR_TEST", "sk-test-456")  # set, the same command scores and sends it
    assert _score(tmp_path, scripted.url, "api_key_env=JUDGE_KEY_FOR_TEST") == 0
    assert scripted.requests[0]["headers"]["Authorization"] == "Bearer sk-test-456"


def test_without_api_key_env_openai_api_key_is_used_when_set_else_no_key(
    scripted: ScriptedServer, make_judge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert make_judge(scripted.url)(ROW, "5").status == "ok"  # a local server that takes no key
    assert "Authorization" not in scripted.requests[0]["headers"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-789")
    assert make_judge(scripted.url, cache=False)(ROW, "5").status == "ok"
    assert scripted.requests[1]["headers"]["Authorization"] == "Bearer sk-default-789"


def test_retries_stop_when_the_limit_is_spent(scripted: ScriptedServer, make_judge) -> None:
    """Slow 500s: retried while time is left, then unscored with the status, never past ``timeout``. With the
    old per-request timeout all 11 attempts were made."""
    scripted.default = Action("status", status=500, sleep=0.4)
    s = make_judge(scripted.url, timeout=1.5, retries=10)(ROW, "5")
    assert s.value is None and s.status in ("error", "timeout"), s
    assert 1 <= scripted.count <= 4, scripted.count  # 0.4 s each plus backoff waits of 0.25 s and up


def test_defaults_agree_and_a_judge_limit_not_below_the_scoring_limit_fails_at_load(
    scripted: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec: dict[str, Any] = {
        "name": "llm_judge",
        "params": {"base_url": scripted.url, "model": "m", "cache_dir": str(tmp_path)},
    }
    with ScoringSession([spec], cache=False) as session:  # both defaults: the judge's limit is inside the path's
        assert session.timeout == DEFAULT_TIMEOUT_S
    with pytest.raises(RewardParameterError, match=r"llm_judge\.timeout = 60 s.*below.*30 s"):
        ScoringSession([{**spec, "params": {**spec["params"], "timeout": 60}}], timeout=30)
    with ScoringSession([{**spec, "params": {**spec["params"], "timeout": 60}}], timeout=90):
        pass  # raising the scoring limit is the other way out

    assert _score(tmp_path, scripted.url, "timeout=30") == 2  # equal to the default --timeout: not below it
    err = capsys.readouterr().err
    assert "llm_judge.timeout = 30 s" in err and "--timeout" in err, err
    assert scripted.count == 0
    assert _score(tmp_path, scripted.url, "timeout=30", timeout="45") == 0
    assert scripted.count == 1


def test_extra_body_reaches_the_server_and_the_cache_key(scripted: ScriptedServer, make_judge) -> None:
    """A server's own options (vLLM's structured outputs, which make a small model answer with a verdict) go into
    every request; a different one is a different cached reply; the judge's own fields cannot be replaced."""
    choice = {"structured_outputs": {"choice": ["VERDICT: yes", "VERDICT: no"]}}
    assert make_judge(scripted.url, extra_body=choice)(ROW, "5").status == "ok"
    assert scripted.requests[0]["body"]["structured_outputs"] == choice["structured_outputs"]
    assert scripted.requests[0]["body"]["model"] == "scripted"
    assert make_judge(scripted.url, extra_body=choice)(ROW, "5").info["cached_votes"] == 1 and scripted.count == 1
    make_judge(scripted.url)(ROW, "5")  # without it: not the same request, so not the cached reply
    assert scripted.count == 2 and "structured_outputs" not in scripted.requests[1]["body"]
    with pytest.raises(RewardParameterError, match="extra_body cannot set max_tokens, model"):
        make_judge(scripted.url, extra_body={"model": "other", "max_tokens": 1})
