"""Held-out evaluations in a run's spans: group ``eval.reward/<name>`` spans by evaluation and pick which to report.

The evaluator writes ``harness.eval.*`` attributes on each evaluation's spans (id, whether it is the run's own, the
data set's short name and fingerprint, k, sampling, rewards; see ``docs/TRACING.md``). Scores of different
evaluations are never mixed: a checkpoint evaluated on another data set, with another k, sampling or reward, is
another evaluation. Spans written before evaluations carried an id form one evaluation with id ``""``.

Which evaluations ``harness report`` shows (:func:`select_evaluations`): by default the run's own (the newest, if
the run's config changed between evaluations); when no span says which is the run's own, the first evaluation
recorded; ``all`` shows every evaluation; otherwise an id (or a unique prefix of one) or a data set name. Pure:
reads span dicts, starts nothing.
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
        settings = [f"k={self.k}"]
        settings += [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.sampling.items()]
        return (
            f"held-out evaluation {self.id}{who}: {self.data}{prompts}{fp}; {' '.join(settings)}; "
            f"rewards {', '.join(self.rewards) or '-'}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (without ``first_ns``, which says only when it was made)."""
        return {k: v for k, v in asdict(self).items() if k != "first_ns"}


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() == "true")


def group_evaluations(spans: list[dict[str, Any]]) -> tuple[list[Evaluation], dict[str, list[dict[str, Any]]]]:
    """The evaluations found in ``eval.reward/<name>`` spans (in the order they were made) and each one's spans."""
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        if s["name"].startswith("eval.reward/"):
            by_id[str(s["attributes"].get("harness.eval.id") or "")].append(s)
    out = []
    for eid, group in by_id.items():
        a = max(group, key=lambda s: s["end_ns"])["attributes"]  # the newest span describes it
        sampling = {
            key: a[f"harness.eval.{key}"]
            for key in ("temperature", "top_p", "max_new_tokens", "seed")
            if f"harness.eval.{key}" in a
        }
        rewards = str(a.get("harness.eval.rewards") or "")
        out.append(
            Evaluation(
                id=eid,
                own=any(_truthy(s["attributes"].get("harness.eval.own")) for s in group),
                data=a.get("harness.eval.data"),
                fingerprint=a.get("harness.eval.fingerprint"),
                prompts=_int(a.get("harness.eval.prompts")),
                k=_int(a.get("harness.eval.k")),
                sampling=sampling,
                rewards=[r for r in rewards.split(",") if r],
                checkpoints=sorted(
                    {st for s in group if (st := _int(s["attributes"].get("harness.train.step"))) is not None}
                ),
                first_ns=min(s["start_ns"] for s in group),
            )
        )
    out.sort(key=lambda e: e.first_ns)
    return out, dict(by_id)


def select_evaluations(evaluations: list[Evaluation], which: str | None = None) -> list[Evaluation]:
    """The evaluations to report: ``None`` the run's own (else the first made), ``"all"``, or an id/prefix/data name.

    Raises:
        HarnessError: ``which`` matches no evaluation, or more than one.
    """
    if not evaluations:
        return []
    if which is None:
        own = [e for e in evaluations if e.own]
        if own:  # the run's config may have changed between evaluations: its newest own evaluation
            return [max(own, key=lambda e: e.first_ns)]
        return [evaluations[0]]
    if which == "all":
        return sorted(evaluations, key=lambda e: (not e.own, e.first_ns))
    hits = [e for e in evaluations if e.id and e.id.startswith(which)] or [e for e in evaluations if e.data == which]
    if len(hits) == 1 or (hits and all(e.data == which for e in hits)):
        return hits
    known = "; ".join(f"{e.id or '(no id)'}: {e.label}" for e in evaluations)
    what = "matches several evaluations" if hits else "matches no evaluation"
    raise HarnessError(f"--eval {which!r} {what}; this run has: {known} (or --eval all)")
