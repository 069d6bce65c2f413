"""The openai backend against a real OpenAI-compatible HTTP server started as its own process (oai_server.py,
serving the tiny random-init model over /v1/completions and /v1/chat/completions), plus server-down and
slow-server cases."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from eval_runs import served

from evals import evaluate
from evals.backends import PromptRequest, SamplingParams
from evals.backends.openai import OpenAIBackend
from evals.errors import BackendError
from harness.cfg.eval import EvalSection

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[str]:
    with served(tiny_model_dir) as base:
        yield base


def _control(base: str, **kw: float) -> dict:
    req = urllib.request.Request(base.replace("/v1", "/_control"), data=json.dumps(kw).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture()
def calm(server: str) -> Iterator[str]:
    _control(server, delay=0, slow_next=0, fail_next=0)
    yield server
    _control(server, delay=0, slow_next=0, fail_next=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_evaluate_through_the_server_chat_and_plain(run_dir: Path, calm: str, tmp_path: Path) -> None:
    ckpt = run_dir / "checkpoints" / "step-000004"
    settings = EvalSection(
        backend="openai", base_url=calm, k=3, temperature=1.0, top_p=1.0, max_new_tokens=8, concurrency=3, workers=2
    )
    res = evaluate(ckpt, settings=settings, output_dir=tmp_path / "chat", telemetry=False)
    assert res.results["backend"]["model"] == "tiny-test-model"
    assert res.results["backend"]["endpoint"] == "chat/completions"
    recs = [json.loads(x) for x in (res.output_dir / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 6 * 3 and all(r["tokens"] is not None for r in recs)
    assert set(res.results["rewards"]) == {"evals_contains_answer", "evals_length"}
    # the server honours seeds: a second evaluation reproduces the completions
    again = evaluate(ckpt, settings=settings, output_dir=tmp_path / "chat2", telemetry=False)
    recs2 = [json.loads(x) for x in (again.output_dir / "samples.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in recs] == [r["completion"] for r in recs2]
    plain = evaluate(ckpt, settings=settings, chat_template=False, output_dir=tmp_path / "plain", telemetry=False)
    assert plain.results["backend"]["endpoint"] == "completions"
    assert plain.results["completions"]["count"] == 18


def test_server_down_is_a_clear_error(run_dir: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(BackendError, match=r"no answer from the server .* after 3 attempt\(s\).*Is the server running"):
        OpenAIBackend(url, max_retries=2, backoff_s=0.01, timeout=5)
    settings = EvalSection(backend="openai", base_url=url, k=2, max_new_tokens=4, max_retries=0)
    with pytest.raises(BackendError, match=url):
        evaluate(run_dir / "checkpoints" / "step-000004", settings=settings, output_dir=tmp_path / "o", telemetry=False)
    assert not (tmp_path / "o" / "results.json").exists()


def test_wrong_route_is_not_retried(calm: str) -> None:
    be_url = calm.replace("/v1", "/v2")
    with pytest.raises(BackendError, match="HTTP 404"):
        OpenAIBackend(be_url, max_retries=3, backoff_s=5.0)  # a retry would take 5 s; 404 fails at once


def test_slow_server_times_out_then_retry_succeeds(calm: str) -> None:
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=4, seed=0)
    req = [PromptRequest("p", "1 + 2 = ?", 7)]
    be = OpenAIBackend(calm, timeout=1.0, max_retries=1, backoff_s=0.01, concurrency=1)
    _control(calm, delay=4.0, slow_next=-1)  # every request is slower than the timeout
    with pytest.raises(BackendError, match="timed out"):
        be.generate(req, 1, params)
    assert be.retries == 1
    _control(calm, delay=4.0, slow_next=1)  # only the first request is slow: the retry answers
    be2 = OpenAIBackend(calm, timeout=1.0, max_retries=2, backoff_s=0.01, concurrency=1)
    out = be2.generate(req, 1, params)
    assert be2.retries == 1 and len(out[0]) == 1 and isinstance(out[0][0].text, str)


def test_overloaded_server_is_retried_with_backoff(calm: str) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    be = OpenAIBackend(calm, max_retries=3, backoff_s=0.01, concurrency=1, chat_template=False)
    _control(calm, fail_next=2)
    out = be.generate([PromptRequest("p", "hello", 1)], 2, params)
    assert be.retries == 2
    assert out[0][0].text == out[0][1].text  # greedy: both samples agree
    _control(calm, fail_next=10)
    with pytest.raises(BackendError, match="HTTP 503"):
        be.generate([PromptRequest("p", "hello", 1)], 1, params)
