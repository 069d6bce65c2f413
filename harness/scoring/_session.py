"""The one scoring path: :func:`score_batch` and its streaming form :class:`ScoringSession`.

Every reward the trainer and the evaluator compute passes through here, so both run the same plugin code with the
same limits. A session validates its specs when it is built (an unknown reward or parameter fails then, not
mid-run), answers repeated inputs from a result cache keyed by plugin, parameters and the inputs the plugin reads,
and sends the rest to the worker pool (:mod:`harness.scoring._pool`), where each call has a hard wall-clock limit.
``inline`` plugins run in this process on threads (:mod:`harness.scoring._inline`), under the same limit, without
blocking the caller or the batch's other rewards (a stuck thread is abandoned).

Failures are data: a plugin that raises, hangs or crashes yields ``Score(None, status)`` for that sample only,
and one warning per batch says which plugin failed how often.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import ValidationError

from harness.errors import ScoringError
from harness.registry import RewardEntry, RewardFn, build_reward, get_entry
from harness.scoring._inline import DEFAULT_THREADS, InlineRunner
from harness.scoring._pool import default_pool
from harness.scoring._result import BatchResult
from harness.scoring._task import Task, TaskPool
from harness.types import DATA_FAULT_STATUSES, UNCACHED_STATUSES, RewardSpec, Sample, Score

__all__ = ["ScoringSession", "PendingBatch", "score_batch", "DEFAULT_TIMEOUT_S"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0


def _params_key(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr)


class _Cache:
    """A bounded LRU of :class:`Score` objects keyed by reward, parameters and sample, thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict[str, Score] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Score | None:
        with self._lock:
            s = self._d.get(key)
            if s is not None:
                self._d.move_to_end(key)
            return s

    def put(self, key: str, score: Score) -> None:
        if self.size <= 0 or score.status in UNCACHED_STATUSES:
            return
        with self._lock:
            self._d[key] = score
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


_SHARED_CACHE = _Cache(100_000)


def _cache_key(entry: RewardEntry, pkey: str, sample: dict[str, Any], completion: str) -> str:
    fields = entry.reads if entry.reads is not None else sorted(k for k in sample if k != "id")
    payload = json.dumps([entry.name, pkey, completion, [sample.get(f) for f in fields]], default=repr, sort_keys=True)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _build_checked(entry: RewardEntry, spec: RewardSpec, timeout: float) -> RewardFn:
    """Build the plugin once here so a bad parameter value fails at load, not as an error on every sample.

    The session keeps what this builds: ``inline`` rewards run it; ``process`` ones are built again in each worker.

    A score function with its own ``time_limit_s`` (an LLM judge: requests, retries, waits) must end before the
    scoring path's ``timeout`` does, so one limit bounds a call and the plugin reports its own failure.
    """
    from harness.errors import RewardParameterError

    entry.check_params(spec.params)
    try:
        fn = build_reward(spec.name, spec.params)
    except RewardParameterError:
        raise
    except Exception as e:
        raise RewardParameterError(
            f"reward {spec.name!r} ({entry.origin}) rejected its parameters {spec.params!r}: {type(e).__name__}: {e}"
        ) from e
    own = getattr(fn._fn, "time_limit_s", None)
    if isinstance(own, (int, float)) and own >= timeout:
        raise RewardParameterError(
            f"reward {spec.name!r}: its own time limit per call ({spec.name}.timeout = {own:g} s, retries included) "
            f"must be below the scoring path's limit per call ({timeout:g} s); lower {spec.name}.timeout or raise "
            "the scoring limit (--timeout of harness score and judge-agreement, --score-timeout of harness eval, "
            "trainer.score_timeout or eval.score_timeout in a run config)"
        )
    return fn


def _to_sample(raw: Sample | Mapping[str, Any], index: int) -> Sample | str:
    if isinstance(raw, Sample):
        return raw
    if not isinstance(raw, Mapping):
        return f"sample {index}: expected a Sample or a mapping, got {type(raw).__name__}"
    try:
        return Sample.model_validate(dict(raw))
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        return f"sample {index}: {errs}"


class PendingBatch:
    """A submitted batch; :meth:`result` blocks until every score is in."""

    def __init__(self, session: ScoringSession, n: int) -> None:
        self.specs = session.specs
        self._n_left = n * len(self.specs)
        self._scores: dict[str, list[Score | None]] = {s.name: [None] * n for s in self.specs}
        self._lat = {s.name: [0.0] * n for s in self.specs}
        self._nodes: dict[str, list[str | None]] = {s.name: [None] * n for s in self.specs}
        self.cached = {s.name: 0 for s in self.specs}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._progress = None
        self.submitted_at = time.monotonic()
        if self._n_left == 0:
            self._done.set()

    def _set(self, name: str, i: int, score: Score, seconds: float, node: str | None = None) -> None:
        with self._lock:
            self._scores[name][i] = score
            self._lat[name][i] = seconds
            self._nodes[name][i] = node
            self._n_left -= 1
            if self._progress is not None:
                self._progress.update(1)
            if self._n_left == 0:
                self._done.set()

    def done(self) -> bool:
        """True when every score is in."""
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> BatchResult:
        """Wait for the batch and return its :class:`BatchResult`; warns once per failing plugin."""
        if not self._done.wait(timeout):
            raise TimeoutError("scoring batch not finished")
        if self._progress is not None:
            self._progress.close()
            self._progress = None
        scores = cast("dict[str, list[Score]]", self._scores)  # done: every slot holds a Score
        res = BatchResult(
            specs=list(self.specs), scores=scores, latency_s=self._lat, cached=self.cached, nodes=self._nodes
        )
        for name, counts in res.failures().items():
            if set(counts) - DATA_FAULT_STATUSES:
                detail = ", ".join(f"{n} {st}" for st, n in counts.most_common())
                log.warning("reward %r left %d/%d samples unscored (%s)", name, sum(counts.values()), len(res), detail)
        return res


class ScoringSession:
    """Score batches with fixed ``specs``; ``submit`` returns at once so scoring can overlap generation.

    Args:
        specs: the rewards to run, validated now (unknown names or parameters raise here).
        timeout: hard wall-clock seconds per reward call (default 30).
        workers: worker processes (default: one per core).
        cache: True shares the process-wide result cache; an int gives a private cache of that many entries;
            False or 0 turns caching off.
        memory_limit_mb: address-space limit of each worker.
        progress: show a progress bar per batch.
    """

    def __init__(
        self,
        specs: Sequence[RewardSpec | Mapping[str, Any] | str],
        *,
        timeout: float | None = None,
        workers: int | None = None,
        cache: bool | int = True,
        memory_limit_mb: int | None = 8192,
        progress: bool = False,
        pool: TaskPool | None = None,
    ) -> None:
        self.specs = [self._spec(s) for s in specs]
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ScoringError(f"reward names must be unique in one session, got {names}")
        self.entries = {s.name: get_entry(s.name) for s in self.specs}
        self.timeout = float(timeout or DEFAULT_TIMEOUT_S)
        self._fns = {s.name: _build_checked(self.entries[s.name], s, self.timeout) for s in self.specs}
        self._pkeys = {s.name: _params_key(s.params) for s in self.specs}
        self._workers, self._mem = workers, memory_limit_mb
        self._pool = pool
        # cache=True shares one process-wide cache (keys hold the plugin and its parameters); an int is a private one
        self._cache = _SHARED_CACHE if cache is True else _Cache(int(cache or 0))
        self.progress = progress
        self._inline: InlineRunner | None = None

    @staticmethod
    def _spec(s: RewardSpec | Mapping[str, Any] | str) -> RewardSpec:
        if isinstance(s, RewardSpec):
            return s
        if isinstance(s, str):
            return RewardSpec(name=s)
        return RewardSpec.model_validate(dict(s))

    @property
    def pool(self) -> TaskPool:
        if self._pool is None:
            self._pool = default_pool(self._workers, self._mem)
        return self._pool

    def submit(self, samples: Sequence[Sample | Mapping[str, Any]], completions: Sequence[str]) -> PendingBatch:
        """Start scoring; one sample per completion (repeat a sample for each of its G completions)."""
        if len(samples) != len(completions):
            raise ScoringError(
                f"got {len(samples)} samples but {len(completions)} completions; pass one sample per completion"
            )
        pending = PendingBatch(self, len(completions))
        if self.progress and len(completions):
            from tqdm.auto import tqdm

            pending._progress = tqdm(total=len(completions) * len(self.specs), desc="scoring", unit="call", leave=False)
        tasks: list[Task] = []
        for i, (raw, completion) in enumerate(zip(samples, completions, strict=True)):
            sample = _to_sample(raw, i)
            if isinstance(sample, str) or not isinstance(completion, str):
                bad = sample if isinstance(sample, str) else _not_a_string(i, completion)
                for spec in self.specs:
                    pending._set(spec.name, i, Score.unscored("bad_input", bad), 0.0)
                continue
            sdict = sample.model_dump()
            for spec in self.specs:
                tasks.extend(self._task(pending, spec, i, sdict, completion))
        if tasks:
            self.pool.submit(tasks)
        return pending

    def _task(self, pending: PendingBatch, spec: RewardSpec, i: int, sdict: dict, completion: str) -> list[Task]:
        entry, pkey = self.entries[spec.name], self._pkeys[spec.name]
        key = _cache_key(entry, pkey, sdict, completion) if entry.cacheable else None
        hit = self._cache.get(key) if key else None
        if hit is not None:
            pending.cached[spec.name] += 1
            pending._set(spec.name, i, hit, 0.0)
            return []

        def done(task: Task, score: dict | None, seconds: float, failure: tuple[str, str] | None) -> None:
            if score is None:
                kind, reason = failure or ("crash", "unknown failure")
                result = Score.unscored("timeout" if kind == "timeout" else "error", reason)
            else:
                result = Score.model_construct(**score)
                if key:
                    self._cache.put(key, result)
            pending._set(spec.name, i, result, seconds, task.node)

        if entry.isolation == "inline":
            self._run_inline(spec, entry, sdict, completion, done)
            return []
        return [Task(spec.name, entry.module, dict(spec.params), pkey, sdict, completion, self.timeout, done)]

    def _run_inline(self, spec: RewardSpec, entry: RewardEntry, sdict: dict, completion: str, done: Any) -> None:
        if self._inline is None:
            self._inline = InlineRunner(self.timeout)
        fn = self._fns[spec.name]  # built once, when the session loaded
        task = Task(spec.name, entry.module, {}, "", sdict, completion, self.timeout, done)
        width = getattr(fn._fn, "max_concurrency", DEFAULT_THREADS)  # a plugin waiting on I/O may ask for more
        self._inline.submit(spec.name, fn, width, sdict, completion, lambda s, sec, f: done(task, s, sec, f))

    def score(self, samples: Sequence[Sample | Mapping[str, Any]], completions: Sequence[str]) -> BatchResult:
        """Score a batch and wait for it."""
        return self.submit(samples, completions).result()

    def close(self) -> None:
        """Release this session's own resources (the shared default pool stays warm for the next session)."""
        if self._inline is not None:
            self._inline.close()
            self._inline = None

    def __enter__(self) -> ScoringSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def score_batch(
    samples: Sequence[Sample | Mapping[str, Any]],
    completions: Sequence[str],
    specs: Sequence[RewardSpec | Mapping[str, Any] | str],
    *,
    timeout: float | None = None,
    workers: int | None = None,
    cache: bool | int = True,
    progress: bool = False,
) -> BatchResult:
    """Score ``completions`` (one per sample) with every reward in ``specs``: the one place rewards run.

    Each call runs in a warm worker process with a hard wall-clock limit (``timeout`` seconds, default 30),
    enforced by killing and replacing the worker. A plugin that raises, hangs, exits or crashes yields
    ``Score(None, status)`` for that sample only; the rest of the batch is scored, in input order.

    >>> res = score_batch([{"id": "1"}], ["\\\\boxed{1}"], ["boxed_present"])
    >>> res.values("boxed_present")
    [1.0]
    """
    with ScoringSession(specs, timeout=timeout, workers=workers, cache=cache, progress=progress) as session:
        return session.score(samples, completions)


def _not_a_string(i: int, completion: object) -> str:
    return f"sample {i}: completion must be a string, got {type(completion).__name__}"
