"""The hard limit is the limit: a reward that hangs on every call costs its timeout per call, not a build grace.

Regression test for a pool that gave every replacement worker the first-call build grace again (a plugin that
never returns was never marked built), so each hanging call took about 60 s whatever the timeout said. On the
old main, 10 hanging calls at ``timeout=1`` do not finish within the 45 s this test waits (they take ~10 min).
"""

from __future__ import annotations

import time

from harness import ScoringSession
from harness.scoring import WorkerPool
from harness.scoring._pool import BUILD_GRACE_S

# The bound is 15 s for 10 calls at 1 s (measured here: about 11-12 s with one worker on one loaded core).
# The assert allows twice that for a loaded 2-core machine; the old behaviour (~60 s per call) is far beyond it.
TOTAL_BOUND_S = 30.0
PER_CALL_SLACK_S = 2.5


def test_ten_hanging_calls_at_timeout_1_take_about_ten_seconds_not_ten_minutes() -> None:
    pool = WorkerPool(1, build_grace_s=BUILD_GRACE_S)  # the default grace: it must not be given per call
    try:
        with ScoringSession(["test_hang"], pool=pool, cache=False, timeout=1.0) as s:
            t0 = time.monotonic()
            pending = s.submit([{"id": str(i)} for i in range(10)], [f"c{i}" for i in range(10)])
            res = pending.result(timeout=45)
            elapsed = time.monotonic() - t0
    finally:
        pool.close()
    col = res.scores["test_hang"]
    assert [c.status for c in col] == ["timeout"] * 10
    assert all("1 s wall-clock limit" in c.info["reason"] for c in col)
    assert elapsed < TOTAL_BOUND_S, f"10 hanging calls at timeout=1 took {elapsed:.1f} s"
    assert max(res.latency_s["test_hang"]) < 1.0 + PER_CALL_SLACK_S, res.latency_s["test_hang"]
    assert pool.restarts == 10
