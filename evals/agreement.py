"""How often a judge agrees with a reference reward: agreement, Cohen's kappa and a confusion table, as pure
functions.

Both rewards' values are turned into labels first: ``pass`` when the value is ``>= threshold``, else ``fail``.
Pairs where either side is unscored (``None``) are left out and counted apart; they are never a ``fail``.

* **agreement** (observed agreement, p_o): the share of pairs with the same label.
* **Cohen's kappa** (Cohen 1960, "A coefficient of agreement for nominal scales"):
  ``(p_o - p_e) / (1 - p_e)``, with ``p_e = sum over labels of p_judge(label) * p_reference(label)``, the
  agreement expected by chance from each side's label frequencies. 1 is perfect agreement, 0 is chance, below
  0 worse than chance. When ``p_e == 1`` (both sides give one and the same label to every pair) kappa is 0/0 and
  is reported as ``None``, not guessed.
* **confusion table**: counts of ``(judge label, reference label)``.

This module does no I/O and runs no rewards; ``harness judge-agreement`` (:mod:`evals.agreement_cli`) scores a
file and prints the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "AgreementReport",
    "agreement",
    "cohens_kappa",
    "confusion_table",
    "agreement_report",
    "to_labels",
    "format_agreement",
]

LABELS = ("pass", "fail")


def to_labels(values: Sequence[float | None], threshold: float = 0.5) -> list[str | None]:
    """``pass`` for values ``>= threshold``, ``fail`` below, ``None`` for unscored.

    >>> to_labels([1.0, 0.0, None, 0.5], 0.5)
    ['pass', 'fail', None, 'pass']
    """
    return [None if v is None else ("pass" if v >= threshold else "fail") for v in values]


def _check(a: Sequence[Hashable], b: Sequence[Hashable]) -> None:
    if len(a) != len(b):
        raise ValueError(f"need two label lists of the same length, got {len(a)} and {len(b)}")


def confusion_table(a: Sequence[Hashable], b: Sequence[Hashable]) -> Counter[tuple[Hashable, Hashable]]:
    """Counts of ``(a[i], b[i])`` pairs.

    >>> sorted(confusion_table(["pass", "fail", "pass"], ["pass", "pass", "pass"]).items())
    [(('fail', 'pass'), 1), (('pass', 'pass'), 2)]
    """
    _check(a, b)
    return Counter(zip(a, b, strict=True))


def agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """The share of positions where ``a`` and ``b`` agree (``None`` for empty lists).

    >>> agreement(["pass", "fail", "pass", "fail"], ["pass", "pass", "pass", "fail"])
    0.75
    """
    _check(a, b)
    if not a:
        return None
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels; ``None`` when undefined (no pairs, or chance agreement is 1).

    Hand value (20 both pass, 5 a-pass/b-fail, 10 a-fail/b-pass, 15 both fail): p_o = 0.7,
    p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.

    >>> a = ["p"] * 25 + ["f"] * 25
    >>> b = ["p"] * 20 + ["f"] * 5 + ["p"] * 10 + ["f"] * 15
    >>> round(cohens_kappa(a, b), 12)
    0.4
    """
    po = agreement(a, b)
    if po is None:
        return None
    n = len(a)
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1.0 - pe)


@dataclass(frozen=True)
class AgreementReport:
    """Agreement of a judge with a reference reward over the pairs both scored."""

    pairs: int
    agreement: float | None
    kappa: float | None
    table: dict[tuple[str, str], int]
    judge_unscored: int = 0
    reference_unscored: int = 0
    threshold: float = 0.5
    judge_statuses: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "pairs": self.pairs,
            "agreement": self.agreement,
            "kappa": self.kappa,
            "table": {f"{j}/{r}": n for (j, r), n in sorted(self.table.items())},
            "judge_unscored": self.judge_unscored,
            "reference_unscored": self.reference_unscored,
            "threshold": self.threshold,
            "judge_statuses": dict(self.judge_statuses),
        }


def agreement_report(
    judge: Sequence[float | None],
    reference: Sequence[float | None],
    threshold: float = 0.5,
    judge_statuses: dict[str, int] | None = None,
) -> AgreementReport:
    """Label both sides at ``threshold``, drop pairs either side left unscored, and measure agreement.

    >>> r = agreement_report([1.0, 0.0, None, 1.0], [1.0, 1.0, 0.0, None])
    >>> r.pairs, r.agreement, r.judge_unscored, r.reference_unscored
    (2, 0.5, 1, 1)
    """
    _check(judge, reference)
    lj, lr = to_labels(judge, threshold), to_labels(reference, threshold)
    both = [(x, y) for x, y in zip(lj, lr, strict=True) if x is not None and y is not None]
    a, b = [x for x, _ in both], [y for _, y in both]
    table = {(x, y): 0 for x in LABELS for y in LABELS}
    table.update(confusion_table(a, b))  # type: ignore[arg-type]  # labels are str here
    return AgreementReport(
        pairs=len(both),
        agreement=agreement(a, b),
        kappa=cohens_kappa(a, b),
        table=table,
        judge_unscored=sum(x is None for x in lj),
        reference_unscored=sum(y is None for y in lr),
        threshold=threshold,
        judge_statuses=dict(judge_statuses or {}),
    )


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def format_agreement(report: AgreementReport, judge: str, reference: str) -> str:
    """The report as a small text table: counts of judge label (rows) by reference label (columns)."""
    w = max(len(judge), 12)
    lines = [
        f"{judge} vs {reference}: {report.pairs} pairs scored by both (threshold {report.threshold:g})",
        f"{'':<{w}}  {reference + ' pass':>14}  {reference + ' fail':>14}",
    ]
    for jl in LABELS:
        lines.append(
            f"{judge + ' ' + jl:<{w}}  {report.table.get((jl, 'pass'), 0):>14}  {report.table.get((jl, 'fail'), 0):>14}"
        )
    lines.append(f"agreement {_fmt(report.agreement)}  Cohen's kappa {_fmt(report.kappa)}")
    unscored = ", ".join(f"{n} {s}" for s, n in sorted(report.judge_statuses.items()) if s not in ("ok",))
    lines.append(
        f"unscored: {report.judge_unscored} by {judge}"
        + (f" ({unscored})" if unscored else "")
        + f", {report.reference_unscored} by {reference}"
    )
    return "\n".join(lines)
