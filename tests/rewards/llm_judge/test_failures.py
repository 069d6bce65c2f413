"""The judge against a scripted HTTP server on 127.0.0.1: each failure ends unscored with the right status,
never 0.0; retries, 429 Retry-After, the disk cache, Score.info and span attributes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scripted_server import Action, ScriptedServer

from harness.errors import RewardParameterError
from harness.scoring import ScoringSession
from rewards.llm_judge import ChatClient, DiskCache, Judge, load_rubric, parse_scale

ROW = {"id": "1", "prompt": "What is 2+3?", "answer": "5"}


def test_ok_verdict_carries_rationale_latency_and_usage(scripted: ScriptedServer, make_judge) -> None:
    s = make_judge(scripted.url)(ROW, "2+3 = 5")
    assert (s.value, s.status, s.answer) == (1.0, "ok", "yes")
    assert s.info["rationale"] == "Looks right." and s.info["usage"] == {"input_tokens": 11, "output_tokens": 7}
    assert s.info["latency_s"] > 0 and s.info["cached_votes"] == 0
    sent = scripted.requests[0]["body"]
    assert sent["model"] == "scripted" and sent["temperature"] == 0.0 and "2+3 = 5" in sent["messages"][0]["content"]


def test_slow_server_is_a_timeout(scripted: ScriptedServer, make_judge) -> None:
    """``timeout`` bounds the whole score: an attempt that used it up leaves no time for a retry or another vote
    (on the old main it bounded each socket read, so 3 votes x 4 attempts took twelve times as long)."""
    scripted.default = Action(sleep=3.0)
    s = make_judge(scripted.url, timeout=0.5, retries=3, votes=3)(ROW, "5")
    assert s.value is None and s.status == "timeout", s
    assert scripted.count == 1  # one attempt; no retry or later vote started past the limit


def test_500_then_200_is_retried(scripted: ScriptedServer, make_judge) -> None:
    scripted.script = [Action("status", status=500), Action("status", status=503)]
    s = make_judge(scripted.url, retries=2)(ROW, "5")
    assert (s.value, s.status) == (1.0, "ok") and scripted.count == 3


def test_500_every_time_is_an_error_with_the_status_code(scripted: ScriptedServer, make_judge) -> None:
    scripted.default = Action("status", status=500)
    s = make_judge(scripted.url, retries=1)(ROW, "5")
    assert s.value is None and s.status == "error" and s.info["http_status"] == 500 and scripted.count == 2


def test_429_waits_for_retry_after(scripted: ScriptedServer, make_judge) -> None:
    scripted.script = [Action("status", status=429, headers={"Retry-After": "2"})]
    s = make_judge(scripted.url, retries=1)(ROW, "5")
    assert (s.value, s.status) == (1.0, "ok")
    gap = scripted.times[1] - scripted.times[0]
    assert gap >= 1.9, f"retried {gap:.2f} s after a 429 with Retry-After: 2"  # a lower bound: load only adds


def test_429_with_a_retry_after_too_long_is_an_error(scripted: ScriptedServer) -> None:
    scripted.default = Action("status", status=429, headers={"Retry-After": "3600"})
    judge = Judge(
        ChatClient(scripted.url, timeout=5, max_retry_after_s=60),
        model="m",
        rubric=load_rubric("correctness"),
        scale=parse_scale("binary"),
    )
    s = judge(ROW, "5")
    assert s.status == "error" and s.info["http_status"] == 429 and "Retry-After 3600" in s.info["reason"]
    assert scripted.count == 1


def test_other_4xx_is_not_retried(scripted: ScriptedServer, make_judge) -> None:
    scripted.default = Action("status", status=401)
    s = make_judge(scripted.url, retries=3)(ROW, "5")
    assert s.status == "error" and s.info["http_status"] == 401 and scripted.count == 1


@pytest.mark.parametrize("body", [b"{not json", b'{"choices": []}', b'{"choices": [{"message": {}}]}'])
def test_malformed_json_is_an_error(scripted: ScriptedServer, make_judge, body: bytes) -> None:
    scripted.default = Action("raw", body=body)
    s = make_judge(scripted.url)(ROW, "5")
    assert s.value is None and s.status == "error" and "malformed reply" in s.info["reason"]


def test_missing_verdict_is_an_unscored_error_with_the_judge_text(scripted: ScriptedServer, make_judge) -> None:
    scripted.default = Action(text="I would say it is probably fine.")
    s = make_judge(scripted.url)(ROW, "5")
    assert s.value is None and s.status == "error"  # the judge, not the completion, failed: unscored
    assert s.info["judge_text"] == ["I would say it is probably fine."]


def test_closed_connection_is_retried_then_an_error(scripted: ScriptedServer, make_judge) -> None:
    scripted.script = [Action("close")]
    assert make_judge(scripted.url, retries=1)(ROW, "5").status == "ok"
    scripted.default = Action("close")
    s = make_judge(scripted.url, retries=1, cache=False)(ROW, "5")
    assert s.value is None and s.status == "error" and "attempts" in s.info["reason"]


def test_a_row_without_the_rubric_column_is_bad_input(scripted: ScriptedServer, make_judge) -> None:
    s = make_judge(scripted.url, rubric="hallucination")(ROW, "5")
    assert s.status == "bad_input" and "context" in s.info["reason"] and scripted.count == 0


def test_votes_are_aggregated_and_each_is_cached(scripted: ScriptedServer, make_judge) -> None:
    scripted.script = [Action(text="VERDICT: 4"), Action(text="VERDICT: 2"), Action(text="VERDICT: 4")]
    judge = make_judge(scripted.url, scale="1-5", votes=3)
    s = judge(ROW, "5")
    assert (s.value, s.info["verdict"]) == (0.75, [4, 2, 4])
    assert [r["body"]["seed"] for r in scripted.requests] == [0, 1, 2]
    again = make_judge(scripted.url, scale="1-5", votes=3)(ROW, "5")  # a new judge: only the disk cache is shared
    assert again.value == 0.75 and again.info["cached_votes"] == 3 and scripted.count == 3


def test_the_cache_key_covers_rubric_fields_and_sampling(scripted: ScriptedServer, make_judge) -> None:
    make_judge(scripted.url)(ROW, "5")
    make_judge(scripted.url)(ROW, "5")
    assert scripted.count == 1
    make_judge(scripted.url)(dict(ROW, answer="6"), "5")  # a field the rubric reads
    make_judge(scripted.url, temperature=0.5)(ROW, "5")
    make_judge(scripted.url, rubric="reasoning_soundness")(ROW, "5")
    assert scripted.count == 4
    make_judge(scripted.url)(dict(ROW, id="other", source="x"), "5")  # a column the rubric does not read
    assert scripted.count == 4


def test_failures_are_not_cached(scripted: ScriptedServer, make_judge) -> None:
    scripted.script = [Action("status", status=500)]
    assert make_judge(scripted.url, retries=0)(ROW, "5").status == "error"
    assert make_judge(scripted.url, retries=0)(ROW, "5").status == "ok" and scripted.count == 2


def test_the_key_is_sent_as_a_bearer_token_from_the_named_variable(
    scripted: ScriptedServer, make_judge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-test-123")
    make_judge(scripted.url, api_key_env="JUDGE_TEST_KEY")(ROW, "5")
    assert scripted.requests[0]["headers"]["Authorization"] == "Bearer sk-test-123"


@pytest.mark.parametrize(
    "params, field",
    [
        ({"api_key_env": "sk-live-abc123"}, "api_key_env"),
        ({"scale": "1-1"}, "scale"),
        ({"rubric": "no_such_rubric"}, "rubric"),
        ({"votes": 0}, "votes"),
        ({"aggregate": "median"}, "aggregate"),
        ({"base_url": "127.0.0.1:8000"}, "base_url"),
    ],
)
def test_bad_parameters_fail_at_load(make_judge, params: dict, field: str) -> None:
    url = params.pop("base_url", "http://127.0.0.1:9/v1")
    with pytest.raises(RewardParameterError, match=field) as e:
        make_judge(url, **params)
    assert "sk-live-abc123" not in str(e.value)


def test_span_attributes_use_genai_names(scripted: ScriptedServer, tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    judge = Judge(
        ChatClient(scripted.url, timeout=5),
        model="scripted",
        rubric=load_rubric("correctness"),
        scale=parse_scale("binary"),
        cache=DiskCache(tmp_path),
        tracer=provider.get_tracer("t"),
    )
    judge(ROW, "5")
    scripted.default = Action("status", status=500)
    judge({"prompt": "x", "answer": "y"}, "z")
    ok, failed = [dict(s.attributes or {}) for s in exporter.get_finished_spans()]
    assert ok["gen_ai.request.model"] == "scripted" and ok["gen_ai.usage.input_tokens"] == 11
    assert ok["gen_ai.usage.output_tokens"] == 7 and ok["gen_ai.evaluation.name"] == "correctness"
    assert ok["gen_ai.evaluation.score.value"] == 1.0 and float(ok["harness.judge.latency_s"]) > 0  # type: ignore[arg-type]  # an OTel attribute value
    assert failed["harness.judge.status"] == "error" and failed["error.type"] == "500"


def test_a_batch_submit_does_not_wait_for_the_judge(scripted: ScriptedServer, tmp_path: Path) -> None:
    """The server holds every judge request; submit() must still return, and the boxed_present scores of the
    same batch are there once the requests are let go. At most max_concurrency requests are in flight.
    With the scoring path that ran inline rewards synchronously inside submit(), this test fails: submit blocks."""
    scripted.default = Action("hold")
    spec = {
        "name": "llm_judge",
        "params": {"base_url": scripted.url, "model": "m", "max_concurrency": 3, "cache_dir": str(tmp_path)},
    }
    rows = [dict(ROW, id=str(i), answer=str(i)) for i in range(8)]
    with ScoringSession([spec, "boxed_present"], timeout=120, cache=False) as session:
        submitted = threading.Event()

        def submit_in_background() -> None:
            session.submit(rows, [r"\boxed{5}"] * 8)
            submitted.set()

        threading.Thread(target=submit_in_background, daemon=True).start()
        assert submitted.wait(60), "submit() blocked on the held judge requests"
        pending = session.submit(rows, [r"\boxed{5}"] * 8)
        for _ in range(600):  # wait (up to 60 s) until the pool is full, so the maximum is observed
            if scripted.max_in_flight >= 3:
                break
            threading.Event().wait(0.1)
        scripted.release.set()
        res = pending.result(timeout=120)
    assert res.values("boxed_present") == [1.0] * 8
    assert [s.status for s in res.scores["llm_judge"]] == ["ok"] * 8, res.scores["llm_judge"][0]
    assert scripted.max_in_flight == 3
