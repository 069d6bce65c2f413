"""Inline rewards on their own threads: a hanging one times out alone, the limit starts when a call starts, and
closing a session never leaves a batch waiting."""

from __future__ import annotations

import threading
import time

import pytest

from harness import Score, reward
from harness.scoring import ScoringSession
from harness.scoring._inline import InlineRunner

_GATE = threading.Event()


@reward("test_inline_hang_on_x", isolation="inline", reads=(), cacheable=False)
def hang_on_x():
    def score(sample, completion):
        if completion == "x":
            _GATE.wait(120)  # hangs until the test ends
        return Score(value=1.0)

    return score


@reward("test_inline_one_second", isolation="inline", reads=(), cacheable=False)
def one_second():
    def score(sample, completion):
        time.sleep(1.0)
        return Score(value=1.0)

    score.max_concurrency = 1  # type: ignore[attr-defined]  # the attribute the scoring path reads
    return score


@pytest.mark.slow  # real time; the same logic under a hand-moved clock: test_clock.py
def test_a_hanging_inline_call_times_out_alone() -> None:
    try:
        with ScoringSession(["test_inline_hang_on_x", "boxed_present"], timeout=1.0, cache=False) as s:
            res = s.score([{"id": str(i)} for i in range(4)], ["a", "x", r"\boxed{1}", "b"])
    finally:
        _GATE.set()
    st = res.scores["test_inline_hang_on_x"]
    assert [x.status for x in st] == ["ok", "timeout", "ok", "ok"] and st[1].value is None
    assert "limit" in st[1].info["reason"]
    assert res.values("boxed_present") == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.slow  # real time; the same logic under a hand-moved clock: test_clock.py
def test_the_limit_starts_when_the_call_starts_not_while_it_queues() -> None:
    """One thread, four calls of 1 s each under a 2.5 s limit: the fourth waits 3 s for the thread and is
    still on time, because its clock starts when it runs."""
    with ScoringSession(["test_inline_one_second"], timeout=2.5, cache=False) as s:
        res = s.score([{"id": str(i)} for i in range(4)], ["a"] * 4)
    assert [x.status for x in res.scores["test_inline_one_second"]] == ["ok"] * 4


def test_closing_reports_calls_that_never_ran() -> None:
    runner = InlineRunner(timeout=60)
    started, gate, got = threading.Event(), threading.Event(), []

    def slow(sample, completion):
        started.set()
        gate.wait(60)
        return Score(value=1.0)

    for i in range(3):
        runner.submit("slow", slow, 1, {}, str(i), lambda score, sec, failure: got.append((score, failure)))
    assert started.wait(30)
    runner.close()
    gate.set()
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(got) == 3
    assert all(score is None and failure and "closed" in failure[1] for score, failure in got)


_BUILDS: list[int] = []


@reward("test_inline_builds", isolation="inline", reads=(), cacheable=False)
def counted_builds(*, bonus: float = 0.0):
    """Counts how often its factory runs (the session's one build is the only one in this process)."""
    _BUILDS.append(threading.get_ident())

    def score(sample, completion):
        return Score(value=len(completion) + bonus)

    return score


def test_an_inline_reward_runs_the_object_the_session_built_when_it_loaded() -> None:
    _BUILDS.clear()
    with ScoringSession([{"name": "test_inline_builds", "params": {"bonus": 0.5}}], cache=False) as s:
        assert len(_BUILDS) == 1  # built once at load: a bad parameter value would fail here
        first = s.score([{"id": "a"}, {"id": "b"}], ["xy", "xyz"])
        second = s.score([{"id": "c"}], ["x"])
    assert first.values("test_inline_builds") == [2.5, 3.5] and second.values("test_inline_builds") == [1.5]
    assert len(_BUILDS) == 1  # neither batch built it again
