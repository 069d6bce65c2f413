"""Score while generating: the loop the trainer, the evaluator and ``harness score`` share to keep workers busy.

Parts (a slice of prompts, a batch of held-out prompts) are generated one after another, and each part's scoring is
*submitted* to a :class:`~harness.scoring.ScoringSession` as soon as that part is generated, so the workers score
part ``i`` while part ``i + 1`` is generated. Two ways to take the scores:

* no ``on_scored``: nothing is awaited here; the caller gets every part with its :class:`PendingBatch` and waits
  when it needs the scores (the trainer: after the update's first forward pass);
* ``on_scored``: part ``i``'s scores are awaited right after part ``i + 1`` is submitted and handed over in order
  (at most two parts in flight); when generating a part fails, the part already generated is still handed over
  before the error propagates, so the work done is kept (the evaluator appends it to its output and resumes there).
  ``harness score`` reads its file this way: the next chunk of rows is read while one scores.

This module does not generate (``generate`` is the caller's) and does not run rewards (the session does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from harness.scoring._result import BatchResult
from harness.scoring._session import PendingBatch, ScoringSession
from harness.types import Sample

__all__ = ["Submitted", "score_while_generating"]

P = TypeVar("P")
G = TypeVar("G")


@dataclass
class Submitted(Generic[P, G]):
    """One part: what went in, what ``generate`` made of it, and its scoring (submitted, maybe not finished)."""

    part: P
    generated: G
    pending: PendingBatch


def score_while_generating(
    session: ScoringSession,
    parts: Iterable[P],
    generate: Callable[[P], tuple[G, Sequence[Sample | Mapping[str, Any]], Sequence[str]]],
    *,
    on_scored: Callable[[Submitted[P, G], BatchResult], None] | None = None,
    timing: dict[str, float] | None = None,
) -> list[Submitted[P, G]]:
    """Generate each part and submit its scoring at once (see the module docstring).

    Args:
        session: where the scoring goes.
        parts: what to generate, in order.
        generate: ``part -> (what was generated, one sample per completion, the completions)``.
        on_scored: when given, each part's scores are awaited one part later and handed over in order.
        timing: seconds are added to its ``generate_s``, ``score_submit_s`` and ``score_wait_s``.

    Returns:
        Every part with its pending scores (all finished and handed over when ``on_scored`` is given).
    """
    clock = timing if timing is not None else {}
    for key in ("generate_s", "score_submit_s", "score_wait_s"):
        clock.setdefault(key, 0.0)
    out: list[Submitted[P, G]] = []

    def hand_over(sub: Submitted[P, G]) -> None:
        assert on_scored is not None
        t0 = time.perf_counter()
        result = sub.pending.result()
        clock["score_wait_s"] += time.perf_counter() - t0
        on_scored(sub, result)

    for part in parts:
        t0 = time.perf_counter()
        try:
            generated, samples, completions = generate(part)
        except BaseException:
            if on_scored is not None and out:  # keep the part already generated
                hand_over(out[-1])
            raise
        t1 = time.perf_counter()
        out.append(Submitted(part, generated, session.submit(samples, completions)))
        clock["generate_s"] += t1 - t0
        clock["score_submit_s"] += time.perf_counter() - t1
        if on_scored is not None and len(out) > 1:
            hand_over(out[-2])  # part i scored while part i + 1 was generated
    if on_scored is not None and out:
        hand_over(out[-1])
    return out
