"""The time limits' logic under a clock the test moves by hand: exact latencies, no dependence on machine load.

The workers, kills and threads are real; only the reading of time is the test's (see ``fake_clock``). The same
limits under real time are in ``test_time_limit.py`` and ``test_inline.py`` (marked ``slow``).
"""

from __future__ import annotations

import threading
from typing import Any

from fake_clock import FakeClock, wait_until

from harness import Score
from harness.scoring import ScoringSession, WorkerPool
from harness.scoring._inline import InlineRunner


def _head(pool: WorkerPool, clock: FakeClock, building: bool) -> bool:
    """True when a ready worker's head call is building (or running) its plugin, its phase started at ``clock()``.

    The start time is part of the test: the dispatcher sets a phase's start just after it shows the call, and a
    clock moved in between would move the start too."""
    return any(w.ready and w.inflight and w.building == building and w.head_since == clock() for w in pool._workers)


def test_a_hanging_call_ends_when_its_limit_passes_on_the_pool_clock_and_reports_that_clock() -> None:
    clock = FakeClock()
    pool = WorkerPool(1, clock=clock)
    try:
        with ScoringSession(["test_hang"], pool=pool, cache=False, timeout=5.0) as s:
            pending = s.submit([{"id": str(i)} for i in range(3)], ["a", "b", "c"])
            for done in range(3):
                wait_until(lambda: _head(pool, clock, building=False), f"call {done} runs")
                clock.advance(5.25)
                wait_until(lambda n=done: pool.restarts == n + 1, f"call {done} is killed")
            res = pending.result(timeout=60)
    finally:
        pool.close()
    col = res.scores["test_hang"]
    assert [c.status for c in col] == ["timeout"] * 3
    assert all("5 s wall-clock limit" in c.info["reason"] for c in col)
    assert res.latency_s["test_hang"] == [5.25] * 3  # each call's own clock: no build grace, no queueing


def test_build_time_counts_against_the_build_grace_not_the_call_and_a_spent_grace_is_not_given_again() -> None:
    clock = FakeClock()
    pool = WorkerPool(1, build_grace_s=30.0, clock=clock)
    slow = {"name": "test_slow_build", "params": {"build_s": 3.0}}  # the worker's build really sleeps 3 s
    try:
        with ScoringSession([slow], pool=pool, cache=False, timeout=2.0) as s:
            first = s.submit([{"id": "0"}], ["a"])
            wait_until(lambda: _head(pool, clock, building=True), "the first build starts")
            key = pool._workers[0].inflight[0].key
            assert pool.build_limit(key, 2.0) == 30.0  # a first build gets the grace
            clock.advance(10.0)  # past the call's limit, within the grace: building is not the call
            wait_until(lambda: _head(pool, clock, building=False), "the build finishes and the call runs")
            assert pool.restarts == 0
            clock.advance(2.5)
            got = first.result(timeout=60).scores["test_slow_build"][0]
            assert got.status == "timeout" and "2 s wall-clock limit" in got.info["reason"]
            assert first.result(timeout=0).latency_s["test_slow_build"] == [2.5]  # from "built", not from 10 s before
            measured = pool._known[key].build_s
            assert 2.5 < measured < 30.0 and pool.build_limit(key, 2.0) == min(30.0, 3.0 * measured + 2.0)
    finally:
        pool.close()


def test_a_build_that_runs_out_its_grace_is_killed_and_later_builds_get_only_the_call_limit() -> None:
    clock = FakeClock()
    pool = WorkerPool(1, build_grace_s=30.0, clock=clock)
    hang = {"name": "test_slow_build", "params": {"build_s": 3600.0}}  # the build never finishes
    try:
        with ScoringSession([hang], pool=pool, cache=False, timeout=2.0) as s:
            pending = s.submit([{"id": "0"}, {"id": "1"}], ["a", "b"])
            wait_until(lambda: _head(pool, clock, building=True), "the first build starts")
            clock.advance(30.5)
            wait_until(lambda: pool.restarts == 1 and _head(pool, clock, building=True), "the second build starts")
            key = pool._workers[0].inflight[0].key
            assert pool.build_limit(key, 2.0) == 2.0  # the grace was spent: no second one
            clock.advance(2.5)
            res = pending.result(timeout=60)
    finally:
        pool.close()
    first, second = res.scores["test_slow_build"]
    assert first.status == second.status == "timeout"
    assert "more than 30 s to build" in first.info["reason"] and "more than 2 s to build" in second.info["reason"]
    assert res.latency_s["test_slow_build"] == [30.5, 2.5]


def _collect(runner: InlineRunner, fn: Any, completions: list[str], width: int) -> list[tuple[Any, float, Any]]:
    got: list[tuple[Any, float, Any]] = [None] * len(completions)  # type: ignore[list-item]

    def keep(i: int) -> Any:
        return lambda score, sec, failure: got.__setitem__(i, (score, sec, failure))

    for i, c in enumerate(completions):
        runner.submit("r", fn, width, {}, c, keep(i))
    return got


def test_an_inline_call_past_its_limit_on_the_runner_clock_times_out_alone() -> None:
    clock, gate, started = FakeClock(), threading.Event(), threading.Event()
    runner = InlineRunner(timeout=5.0, clock=clock)

    def fn(sample: Any, completion: str) -> Score:
        if completion == "x":
            started.set()
            gate.wait(120)
        return Score(value=1.0)

    try:
        got = _collect(runner, fn, ["a", "x", "b"], width=2)
        wait_until(lambda: started.is_set() and got[0] is not None and got[2] is not None, "the quick calls end")
        assert got[1] is None  # no time has passed on the runner's clock
        clock.advance(5.25)
        wait_until(lambda: got[1] is not None, "the watcher ends the hanging call")
    finally:
        gate.set()
        runner.close()
    assert [g[0]["value"] for g in (got[0], got[2])] == [1.0, 1.0] and got[0][1] == 0.0
    score, seconds, failure = got[1]
    assert score is None and seconds == 5.25 and failure[0] == "timeout" and "5 s limit" in failure[1]


def test_an_inline_call_limit_starts_when_it_runs_not_while_it_queues() -> None:
    """One thread, four calls that each take 1 s of the runner's clock under a 2.5 s limit: the fourth starts
    3 s after it was submitted and is still on time, and each reports its own 1 s."""
    clock = FakeClock()
    runner = InlineRunner(timeout=2.5, clock=clock)

    def one_second(sample: Any, completion: str) -> Score:
        clock.advance(1.0)
        return Score(value=1.0)

    try:
        got = _collect(runner, one_second, ["a", "b", "c", "d"], width=1)
        wait_until(lambda: all(g is not None for g in got), "the four calls end")
    finally:
        runner.close()
    assert [(g[0]["status"], g[1], g[2]) for g in got] == [("ok", 1.0, None)] * 4
