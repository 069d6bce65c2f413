"""Rollout collection: prompts -> G completions each -> the one scoring path, with DAPO dynamic sampling.

Without dynamic sampling the batch is generated in ``chunks`` parts; each part's scoring is *submitted* (not
awaited) as soon as it is generated, so the reward workers run while the next part is generated and while the update
does its first forward pass (the evaluator's loop too: :func:`harness.scoring.score_while_generating`). All parts
are sampled by the same weights, so the step stays on-policy. With dynamic sampling (DAPO 2503.14476, section 3.2)
groups whose scored rewards are all equal are dropped and more prompts are sampled, at most ``max_resample_rounds``
times; when the batch still is not full a warning says so and the step trains on the groups it has. Reward
statistics are taken over the first round, an unbiased sample of the current policy.

This module does not compute advantages or losses.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from harness.scoring import BatchResult, PendingBatch, ScoringSession, score_while_generating
from harness.types import Sample
from trainer import metrics as M
from trainer.advantages import zero_variance_groups
from trainer.rollout.base import Rollout, RolloutBatch, SamplingConfig

__all__ = ["Collected", "collect", "totals_tensor", "select_result"]

log = logging.getLogger(__name__)


def totals_tensor(result: BatchResult) -> torch.Tensor:
    """(N,) weighted total reward per completion, NaN where unscored."""
    return torch.tensor([math.nan if v is None else float(v) for v in result.totals], dtype=torch.float32)


def select_result(results: list[BatchResult], rows: list[tuple[int, int]]) -> BatchResult:
    """A BatchResult of the given (result index, row) pairs, in that order."""
    first = results[0]
    names = list(first.scores)
    return BatchResult(
        specs=list(first.specs),
        scores={n: [results[r].scores[n][i] for r, i in rows] for n in names},
        latency_s={n: [results[r].latency_s.get(n, [0.0] * len(results[r]))[i] for r, i in rows] for n in names},
        cached={n: sum(res.cached.get(n, 0) for res in results) for n in names},
    )


@dataclass
class Collected:
    """One step's rollouts; :meth:`result` waits for scoring when it is still running."""

    batch: RolloutBatch
    samples: list[Sample]  # one per completion
    first_round: BatchResult | None = None
    pending: list[PendingBatch] = field(default_factory=list)
    final: BatchResult | None = None
    stats: dict[str, float] = field(default_factory=dict)

    def result(self) -> BatchResult:
        """The scores of ``batch`` rows (blocks on the scoring workers the first time, when needed)."""
        if self.final is None:
            results = [p.result() for p in self.pending]
            self.final = (
                results[0]
                if len(results) == 1
                else select_result(results, [(r, i) for r, res in enumerate(results) for i in range(len(res))])
            )
        return self.final

    def reward_result(self) -> BatchResult:
        """The scores reward statistics are computed on (the first round's)."""
        return self.first_round if self.first_round is not None else self.result()


def _generate(
    rollout: Rollout, prompts: list[Sample], render: Callable[[Sample], str], g: int, sampling: SamplingConfig
) -> tuple[RolloutBatch, list[Sample]]:
    batch = rollout.generate([render(s) for s in prompts], g, sampling)
    return batch, [s for s in prompts for _ in range(g)]


def _collect_streaming(
    prompts: list[Sample],
    rollout: Rollout,
    session: ScoringSession,
    render: Callable[[Sample], str],
    group_size: int,
    sampling: SamplingConfig,
    pad_id: int,
    chunks: int,
) -> Collected:
    size = max(1, math.ceil(len(prompts) / max(1, chunks)))

    def generate(part: list[Sample]) -> tuple[RolloutBatch, list[Sample], list[str]]:
        batch, samples = _generate(rollout, part, render, group_size, sampling)
        return batch, samples, batch.texts

    timing: dict[str, float] = {}
    parts = [prompts[i : i + size] for i in range(0, len(prompts), size)]
    done = score_while_generating(session, parts, generate, timing=timing)  # nothing awaited yet
    return Collected(
        RolloutBatch.concat([d.generated for d in done], pad_id),
        [s for d in done for s in d.part for _ in range(group_size)],
        pending=[d.pending for d in done],
        stats={M.GENERATE_S: timing["generate_s"], M.SCORE_SUBMIT_S: timing["score_submit_s"]},
    )


def collect(
    take: Callable[[int], list[Sample]],
    rollout: Rollout,
    session: ScoringSession,
    render: Callable[[Sample], str],
    *,
    num_prompts: int,
    group_size: int,
    sampling: SamplingConfig,
    pad_id: int,
    dynamic_sampling: bool = False,
    max_rounds: int = 3,
    chunks: int = 1,
) -> Collected:
    """Generate and score one step's groups (see the module docstring)."""
    if not dynamic_sampling:
        return _collect_streaming(take(num_prompts), rollout, session, render, group_size, sampling, pad_id, chunks)
    t0 = time.perf_counter()
    batch, samples = _generate(rollout, take(num_prompts), render, group_size, sampling)
    gen_s = time.perf_counter() - t0
    batches, sample_lists, results, kept = [batch], [samples], [], []
    score_s, rounds, generated = 0.0, 0, num_prompts
    while True:
        t1 = time.perf_counter()
        results.append(session.score(sample_lists[-1], batches[-1].texts))
        score_s += time.perf_counter() - t1
        zero = zero_variance_groups(totals_tensor(results[-1]), group_size)
        kept += [(len(results) - 1, int(gi)) for gi in (~zero).nonzero().flatten()]
        missing = num_prompts - len(kept)
        if missing <= 0 or rounds >= max_rounds:
            break
        rounds += 1
        keep_rate = max(len(kept) / generated, 0.25)
        n_more = min(4 * missing, math.ceil(missing / keep_rate))
        t2 = time.perf_counter()
        b, s = _generate(rollout, take(n_more), render, group_size, sampling)
        gen_s += time.perf_counter() - t2
        batches.append(b)
        sample_lists.append(s)
        generated += n_more
    if len(kept) < num_prompts:
        log.warning(
            "dynamic sampling filled %d of %d groups after %d extra rounds (%d groups generated); "
            "training on the groups it has",
            len(kept),
            num_prompts,
            rounds,
            generated,
        )
    n_kept = min(len(kept), num_prompts)  # groups with reward variance that the step uses
    kept = kept[:num_prompts] if kept else [(0, gi) for gi in range(num_prompts)]
    rows = [(r, gi * group_size + j) for r, gi in kept for j in range(group_size)]
    per_round: list[list[int]] = [[] for _ in batches]
    for r, i in rows:
        per_round[r].append(i)
    parts = [batches[r].select(torch.tensor(ix, dtype=torch.long)) for r, ix in enumerate(per_round) if ix]
    out = Collected(
        RolloutBatch.concat(parts, pad_id),
        [sample_lists[r][i] for r, ix in enumerate(per_round) for i in ix],
        first_round=results[0],
        stats={
            M.GENERATE_S: gen_s,
            M.SCORE_WAIT_SAMPLING_S: score_s,
            M.DYNAMIC_ROUNDS: float(rounds),
            M.DYNAMIC_GENERATED: float(generated),
            M.DYNAMIC_KEPT: float(n_kept),
        },
    )
    out.final = select_result(results, sorted(rows, key=lambda x: (x[0], x[1])))
    return out
