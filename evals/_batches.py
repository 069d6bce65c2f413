"""Sample and score the held-out prompts batch by batch (:func:`generate_and_score`): batch ``i`` is scored while
batch ``i + 1`` is generated, and each scored batch is appended to the evaluation's ``samples.jsonl`` as records.

This module does not choose the prompts or the rewards (:mod:`evals._plan`) and computes no metrics
(:mod:`evals.results`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from evals.backends import Backend, Generation, PromptRequest, SamplingParams, prompt_seed
from evals.config import EvalSection
from evals.outputs import EvalOutput
from evals.result_types import SampleRecord
from harness.scoring import BatchResult, ScoringSession, Submitted, TaskPool, score_while_generating, weighted_total
from harness.types import RewardSpec, Sample, Score

__all__ = ["generate_and_score"]

log = logging.getLogger(__name__)


def _records(
    chunk: Sequence[Sample],
    generated: _Generated,
    result: BatchResult,
    specs: Sequence[RewardSpec],
    k: int,
) -> list[SampleRecord]:
    seeds, gens, scored = generated
    at = {pos: n for n, pos in enumerate(scored)}  # (prompt, sample) -> its row in ``result``
    out = []
    for i, sample in enumerate(chunk):
        for j in range(k):
            g = gens[i][j]
            n = at.get((i, j))
            if n is None:  # nothing generated for this prompt (g.error says why): unscored, not 0
                why = g.error or "no completion was generated"
                row = {spec.name: Score.unscored("bad_input", why) for spec in specs}
            else:
                row = result.row(n)
            rec = SampleRecord(
                prompt_id=sample.id,
                sample_index=j,
                seed=seeds[i],
                prompt=sample.prompt,
                answer=sample.answer,
                completion=g.text,
                finish_reason=g.finish_reason,
                tokens=g.tokens,
                scores={name: s.model_dump(mode="json") for name, s in row.items()},
                total=weighted_total(row, specs),
            )
            nodes = _nodes(result, n) if n is not None else {}
            if nodes:
                rec["nodes"] = nodes
            out.append(rec)
    return out


def _nodes(result: BatchResult, index: int) -> dict[str, str]:
    """The node each reward's call ran on, for a completion scored on a cluster (the Ray backend); else empty."""
    return {n: node for n, col in result.nodes.items() if index < len(col) and (node := col[index])}


def _chunk_size(settings: EvalSection) -> int:
    """Prompts per backend call: ``batch_size`` for hf; enough to keep the server's request slots busy for openai;
    large for vllm, which schedules its own batches (both seed per prompt, so outputs do not depend on this)."""
    if settings.backend == "openai":
        return max(settings.batch_size, -(-2 * settings.concurrency // settings.k))
    if settings.backend == "vllm":
        return max(settings.batch_size, 256)
    return settings.batch_size


#: What a batch of prompts generated: the seed of each prompt, its ``k`` generations, and the (prompt, sample)
#: positions sent to scoring, in order (every one but those the backend could not generate, ``Generation.error``).
_Generated = tuple[list[int], list[list[Generation]], list[tuple[int, int]]]


def generate_and_score(
    backend: Backend,
    todo: Sequence[Sample],
    specs: Sequence[RewardSpec],
    settings: EvalSection,
    params: SamplingParams,
    output: EvalOutput,
    progress: bool,
    pool: TaskPool | None = None,
) -> dict[str, float]:
    """Sample and score every prompt in ``todo``, appending records batch by batch; returns timings.

    Batch ``i`` is scored while batch ``i + 1`` is generated (:func:`harness.scoring.score_while_generating`); a
    batch already generated is written even when generating the next one fails, so a resume starts after it.
    """
    k, step = settings.k, _chunk_size(settings)
    timing = {"generate_s": 0.0, "score_wait_s": 0.0, "score_call_s": 0.0}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="prompts", unit="prompt")

    def generate(chunk: list[Sample]) -> tuple[_Generated, list[Sample], list[str]]:
        seeds = [prompt_seed(params.seed, s.id) for s in chunk]
        requests = [PromptRequest(s.id, s.prompt, sd) for s, sd in zip(chunk, seeds, strict=True)]
        gens = backend.generate(requests, k, params)
        scored = [(i, j) for i, row in enumerate(gens) for j, g in enumerate(row) if g.error is None]
        refused = [(s.id, row[0].error) for s, row in zip(chunk, gens, strict=True) if row and row[0].error]
        if refused:
            log.warning("%d prompt(s) left unscored: %s: %s", len(refused), *refused[0])
        return (seeds, gens, scored), [chunk[i] for i, _ in scored], [gens[i][j].text for i, j in scored]

    def write(done: Submitted[list[Sample], _Generated], result: BatchResult) -> None:
        timing["score_call_s"] += sum(sum(v) for v in result.latency_s.values())
        output.append(_records(done.part, done.generated, result, specs, k))
        if bar is not None:
            bar.update(len(done.part))

    session = ScoringSession(specs, timeout=settings.score_timeout, workers=settings.workers, pool=pool)
    try:
        chunks = [list(todo[start : start + step]) for start in range(0, len(todo), step)]
        score_while_generating(session, chunks, generate, on_scored=write, timing=timing)
    finally:
        session.close()
        if bar is not None:
            bar.close()
    return timing
