"""Fault injection: a plugin that raises, loops, sleeps, exits, segfaults or eats memory costs only its own sample.

Each test puts the fault in the middle of a batch of healthy samples and asserts the healthy scores, their order,
and the faulty sample's status and reason. The plugins are real code running in real worker processes.
"""

from __future__ import annotations

import pytest

from harness import RewardSpec, ScoringSession, score_batch
from harness.scoring import WorkerPool

HEALTHY = ["a", "bb", "ccc", "dddd"]
SPEC = [RewardSpec(name="test_faulty", params={"scale": 2.0})]


@pytest.fixture(scope="module")
def pool():
    # a private pool with a 1 GiB address-space limit per worker, so the memory bomb stays small
    p = WorkerPool(2, memory_limit_mb=1024, build_grace_s=2.0)
    yield p
    p.close()


def _run(pool: WorkerPool, fault: str, timeout: float = 20.0):
    completions = HEALTHY[:2] + [fault] + HEALTHY[2:]
    samples = [{"id": str(i), "prompt": "p"} for i in range(len(completions))]
    with ScoringSession(SPEC, timeout=timeout, pool=pool, cache=False) as s:
        res = s.score(samples, completions)
    scores = res.scores["test_faulty"]
    healthy = [scores[i] for i in (0, 1, 3, 4)]
    assert [h.value for h in healthy] == [2.0, 4.0, 6.0, 8.0]  # scored, and in input order
    assert [h.answer for h in healthy] == HEALTHY
    assert all(h.status == "ok" for h in healthy)
    return scores[2], res


def test_raise_is_unscored_error_with_the_exception(pool) -> None:
    bad, res = _run(pool, "raise")
    assert bad.value is None and bad.status == "error"
    assert "ZeroDivisionError" in bad.info["reason"]
    assert res.totals[2] is None and res.totals[0] == 2.0


def test_infinite_loop_is_killed_at_the_deadline(pool) -> None:
    restarts = pool.restarts
    bad, _ = _run(pool, "loop", timeout=3.0)
    assert bad.value is None and bad.status == "timeout"
    assert "wall-clock limit" in bad.info["reason"]
    assert pool.restarts == restarts + 1


def test_sleeping_plugin_is_killed_at_the_deadline(pool) -> None:
    bad, _ = _run(pool, "sleep", timeout=3.0)
    assert bad.status == "timeout" and bad.value is None


def test_os_exit_is_reported_with_its_exit_code(pool) -> None:
    bad, _ = _run(pool, "exit")
    assert bad.status == "error" and bad.value is None
    assert "code 7" in bad.info["reason"]


def test_segfault_is_reported_with_the_signal(pool) -> None:
    bad, _ = _run(pool, "segfault")
    assert bad.status == "error" and bad.value is None
    assert "SIGSEGV" in bad.info["reason"]


def test_memory_bomb_is_contained(pool) -> None:
    bad, _ = _run(pool, "membomb", timeout=60.0)
    assert bad.value is None and bad.status == "error"
    assert "memory" in bad.info["reason"].lower() or "killed" in bad.info["reason"]


def test_sys_exit_in_a_plugin_does_not_stop_the_worker(pool) -> None:
    bad, _ = _run(pool, "sysexit")
    assert bad.status == "error" and "SystemExit" in bad.info["reason"]


def test_plain_float_return_becomes_a_score(pool) -> None:
    ok, _ = _run(pool, "float")
    assert ok.value == 0.25 and ok.status == "ok"


def test_many_faults_in_one_batch_keep_every_healthy_score(pool) -> None:
    completions = ["x", "raise", "yy", "exit", "zzz", "segfault", "w", "loop", "vv"]
    samples = [{"id": str(i)} for i in range(len(completions))]
    with ScoringSession(SPEC, timeout=4.0, pool=pool, cache=False) as s:
        res = s.score(samples, completions)
    got = [(sc.status, sc.value) for sc in res.scores["test_faulty"]]
    assert got == [
        ("ok", 2.0),
        ("error", None),
        ("ok", 4.0),
        ("error", None),
        ("ok", 6.0),
        ("error", None),
        ("ok", 2.0),
        ("timeout", None),
        ("ok", 4.0),
    ]
    summary = res.summary()["test_faulty"]
    assert summary["scored"] == 5 and summary["statuses"] == {"ok": 5, "error": 3, "timeout": 1}
    assert summary["mean"] == pytest.approx(18.0 / 5)


def test_failures_are_logged_once_per_plugin(pool, caplog) -> None:
    with caplog.at_level("WARNING", logger="harness.scoring._session"):
        _run(pool, "raise")
    msgs = [r.getMessage() for r in caplog.records if "test_faulty" in r.getMessage()]
    assert len(msgs) == 1 and "1/5" in msgs[0] and "error" in msgs[0]


def test_score_batch_default_pool_runs_plugins_out_of_process() -> None:
    import os

    res = score_batch([{"id": "1"}, {"id": "2"}], ["ab", "abc"], ["test_counter"], cache=False)
    assert res.values("test_counter") == [2.0, 3.0]
    assert all(s.info["pid"] != os.getpid() for s in res.scores["test_counter"])
