"""Held-out evaluations in a run's spans: group ``eval.reward/<name>`` spans by evaluation and pick which to report.

An evaluation is what its spans' ``harness.eval.*`` attributes describe (data set, k, sampling, rewards; see
``docs/TRACING.md``); scores of different evaluations are never mixed. Spans written before evaluations carried
an id form one evaluation with id ``""``. Pure: reads span dicts, starts nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import HarnessError

__all__ = ["Evaluation", "group_evaluations", "select_evaluations"]


@dataclass
class Evaluation:
    """One held-out evaluation of a run's checkpoints (as its spans describe it)."""

    id: str
    own: bool
    data: str | None
    fingerprint: str | None
    prompts: int | None
    k: int | None
    sampling: dict[str, Any]
    rewards: list[str]
    checkpoints: list[int] = field(default_factory=list)
    first_ns: int = 0  # start of its first span: the order evaluations were made in

    @property
    def label(self) -> str:
        """``<data set>, k=<k>``: what every held-out number of this evaluation is shown with."""
        if not self.id:
            return "data and k not recorded"
        return f"{self.data or '?'}, k={self.k if self.k is not None else '?'}"

    def describe(self) -> str:
        """One line: id, whose evaluation, data, prompts, k, sampling, rewards."""
        if not self.id:
            return "held-out evaluation (recorded without its data set and k)"
        who = " (the run's own)" if self.own else ""
        prompts = f", {self.prompts} prompts" if self.prompts is not None else ""
        fp = f", fingerprint {self.fingerprint[:12]}" if self.fingerprint else ""
        settings = " ".join(
            [f"k={self.k}"] + [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.sampling.items()]
        )
        rewards = ", ".join(self.rewards) or "-"
        return f"held-out evaluation {self.id}{who}: {self.data}{prompts}{fp}; {settings}; rewards {rewards}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (without ``first_ns``, which says only when it was made)."""
        return {k: v for k, v in asdict(self).items() if k != "first_ns"}


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def group_evaluations(spans: list[dict[str, Any]]) -> tuple[list[Evaluation], dict[str, list[dict[str, Any]]]]:
    """The evaluations found in ``eval.reward/<name>`` spans (in the order they were made) and each one's spans."""
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        if s["name"].startswith("eval.reward/"):
            by_id[str(s["attributes"].get("harness.eval.id") or "")].append(s)
    out = []
    for eid, group in by_id.items():
        newest = max(group, key=lambda s: s["end_ns"])["attributes"]  # the newest span describes it
        a = {k.removeprefix("harness.eval."): v for k, v in newest.items() if k.startswith("harness.eval.")}
        steps = {st for s in group if (st := _int(s["attributes"].get("harness.train.step"))) is not None}
        out.append(
            Evaluation(
                id=eid,
                own=any(str(s["attributes"].get("harness.eval.own")).lower() == "true" for s in group),
                data=a.get("data"),
                fingerprint=a.get("fingerprint"),
                prompts=_int(a.get("prompts")),
                k=_int(a.get("k")),
                sampling={key: a[key] for key in ("temperature", "top_p", "max_new_tokens", "seed") if key in a},
                rewards=[r for r in str(a.get("rewards") or "").split(",") if r],
                checkpoints=sorted(steps),
                first_ns=min(s["start_ns"] for s in group),
            )
        )
    out.sort(key=lambda e: e.first_ns)
    return out, dict(by_id)


def select_evaluations(evaluations: list[Evaluation], which: str | None = None) -> list[Evaluation]:
    """The evaluations to report: None the run's own (its newest, if the run's config changed between
    evaluations; when no span says which is its own, the first made), ``"all"``, or an id (prefix) or data set.

    Raises:
        HarnessError: ``which`` matches no evaluation, or more than one.
    """
    if not evaluations:
        return []
    if which is None:
        own = [e for e in evaluations if e.own]
        return [max(own, key=lambda e: e.first_ns)] if own else [evaluations[0]]
    if which == "all":
        return sorted(evaluations, key=lambda e: (not e.own, e.first_ns))
    hits = [e for e in evaluations if e.id and e.id.startswith(which)] or [e for e in evaluations if e.data == which]
    if len(hits) == 1 or (hits and all(e.data == which for e in hits)):
        return hits
    known = "; ".join(f"{e.id or '(no id)'}: {e.label}" for e in evaluations)
    what = "matches several evaluations" if hits else "matches no evaluation"
    raise HarnessError(f"--eval {which!r} {what}; this run has: {known} (or --eval all)")
