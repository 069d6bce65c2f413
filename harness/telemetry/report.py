"""``harness report``: training reward beside held-out score per checkpoint and reward, with a divergence alarm.

Input is a list of flat spans from any source (:mod:`harness.telemetry._sources`). Training rewards come from the
``reward/<name>`` spans (``harness.reward.mean`` per step), held-out scores from the ``eval.reward/<name>`` spans.
Per checkpoint, the training reward is the mean over the steps since the previous evaluated checkpoint (the same
window the trainer puts in the checkpoint context). The join is by run id, step and reward name, so it works for
backends that drop span links; where links survive, the report also says whether each evaluation's link resolves.

Held-out scores are kept apart by evaluation (:mod:`harness.telemetry._evals`: data set, k, sampling, rewards):
by default the report follows the run's own evaluation, and a checkpoint evaluated ad hoc on other data changes
nothing in it; other evaluations are shown only when asked for, each with its own rows, windows and alarms. Every
held-out number is shown with the data set and k it comes from.

The alarm (see :class:`harness.cfg.telemetry.AlarmSection`): over the last ``window`` checkpoints, training
reward rose by at least ``train_rise`` while the held-out score rose by less than ``heldout_min_rise``, unless
the held-out score is saturated and at or above the training reward. This module does not query backends and
does not print; the CLI does.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cfg.telemetry import AlarmSection
from harness.stats import window_mean
from harness.table import align_columns
from harness.telemetry._attrs import num
from harness.telemetry._evals import Evaluation, group_evaluations, select_evaluations

__all__ = [
    "CheckpointRow",
    "Report",
    "build_report",
    "divergence_alarms",
    "format_table",
    "to_markdown",
    "plot_report",
    "write_report",
]

logger = logging.getLogger(__name__)


@dataclass
class CheckpointRow:
    """One reward at one evaluated checkpoint."""

    step: int
    reward: str
    train_mean: float | None
    heldout: float | None
    gap: float | None  # train_mean - heldout
    train_steps: int  # training steps averaged into train_mean (0: taken from the eval span's attribute)
    link: str  # "resolved", "dangling" (target span not in this source), "none"
    alarm: str | None = None
    evaluation: str = ""  # the evaluation's id ("" when its spans carry none)
    data: str | None = None  # the held-out data set the score comes from
    k: int | None = None  # samples per prompt of that evaluation


@dataclass
class Report:
    """Everything ``harness report`` shows."""

    run_id: str | None
    rows: list[CheckpointRow]
    train_curve: dict[str, list[tuple[int, float]]]
    alarm_config: AlarmSection = field(default_factory=AlarmSection)
    source: str = ""
    evaluations: list[Evaluation] = field(default_factory=list)  # shown
    hidden: list[Evaluation] = field(default_factory=list)  # found in the spans, not shown (ask with --eval)

    @property
    def alarms(self) -> list[CheckpointRow]:
        return [r for r in self.rows if r.alarm]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "alarm_config": self.alarm_config.model_dump(),
            "evaluations": [e.to_dict() for e in self.evaluations],
            "rows": [asdict(r) for r in self.rows],
            "train_curve": {k: [list(p) for p in v] for k, v in self.train_curve.items()},
        }


def _pick_run(spans: list[dict[str, Any]], run_id: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    if run_id is not None:
        return run_id, [s for s in spans if s["attributes"].get("harness.run.id") == run_id]
    last: dict[str, int] = {}
    for s in spans:
        rid = s["attributes"].get("harness.run.id")
        if rid is not None:
            last[rid] = max(last.get(rid, 0), s["end_ns"])
    if len(last) > 1:
        chosen = max(last, key=lambda rid: last[rid])
        logger.warning(
            "spans of %d runs found (%s); reporting the latest, %s (choose with --run-id)",
            len(last),
            ", ".join(sorted(last)),
            chosen,
        )
        return chosen, [s for s in spans if s["attributes"].get("harness.run.id") == chosen]
    return (next(iter(last)) if last else None), spans


def _num(v: Any) -> float | None:
    f = num(v)
    return None if f is None or math.isnan(f) else f


def _latest(spans: list[dict[str, Any]], prefix: str) -> dict[str, dict[int, dict[str, Any]]]:
    """reward name -> step -> the last-ended span named ``prefix + name`` (re-runs and replays collapse)."""
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for s in spans:
        if not s["name"].startswith(prefix):
            continue
        a = s["attributes"]
        name = a.get("harness.reward.name") or s["name"][len(prefix) :]
        step = a.get("harness.train.step")
        if step is None:
            continue
        prev = out[name].get(int(step))
        if prev is None or s["end_ns"] >= prev["end_ns"]:
            out[name][int(step)] = s
    return out


def divergence_alarms(train: list[float | None], heldout: list[float | None], cfg: AlarmSection) -> list[str | None]:
    """Per checkpoint, the alarm text or None (pure; checkpoints in step order).

    Checkpoint ``i`` alarms when ``train[i] - train[i-w+1] >= train_rise`` and
    ``heldout[i] - heldout[i-w+1] < heldout_min_rise`` (``w`` = window); missing values never alarm, and neither
    does a saturated held-out score (``>= saturated_at``) at or above the training reward.

    >>> divergence_alarms([0.5, 0.7, 0.9], [1.0, 1.0, 1.0], AlarmSection())
    [None, None, None]
    """
    out: list[str | None] = [None] * len(train)
    w = cfg.window
    for i in range(w - 1, len(train)):
        j = i - w + 1
        t0, t1, h0, h1 = train[j], train[i], heldout[j], heldout[i]
        if t0 is None or t1 is None or h0 is None or h1 is None:
            continue
        dt, dh = t1 - t0, h1 - h0
        saturated = cfg.saturated_at is not None and h1 >= cfg.saturated_at - 1e-9 and h1 >= t1
        if dt >= cfg.train_rise and dh < cfg.heldout_min_rise and not saturated:
            trend = "fell" if dh < 0 else "stayed flat"
            out[i] = f"training reward rose {dt:+.3f} over the last {w} checkpoints while held-out {trend} ({dh:+.3f})"
    return out


def _eval_rows(
    ev: Evaluation,
    spans: list[dict[str, Any]],
    curve: dict[str, list[tuple[int, float]]],
    known: set[str],
    cfg: AlarmSection,
) -> list[CheckpointRow]:
    """Rows of one evaluation: per reward and checkpoint, the training window mean beside the held-out score."""
    evals = _latest(spans, "eval.reward/")
    rows: list[CheckpointRow] = []
    for name in sorted(evals):
        reward_rows = []
        prev = None
        for step in sorted(evals[name]):
            s = evals[name][step]
            a = s["attributes"]
            window, n = window_mean(curve.get(name, ()), prev, step)  # the trainer's own rule for the context
            train_mean = window if n else _num(a.get("harness.reward.train_mean"))
            heldout = _num(a.get("harness.reward.heldout"))
            gap = train_mean - heldout if train_mean is not None and heldout is not None else None
            if s["links"]:
                link = "resolved" if all(ln["span_id"] in known for ln in s["links"]) else "dangling"
            else:
                link = "none"
            reward_rows.append(CheckpointRow(step, name, train_mean, heldout, gap, n, link, None, ev.id, ev.data, ev.k))
            prev = step
        for row, msg in zip(
            reward_rows,
            divergence_alarms([r.train_mean for r in reward_rows], [r.heldout for r in reward_rows], cfg),
            strict=True,
        ):
            row.alarm = msg
        rows.extend(reward_rows)
    return rows


def build_report(
    spans: list[dict[str, Any]],
    alarm: AlarmSection | None = None,
    *,
    run_id: str | None = None,
    source: str = "",
    evaluation: str | None = None,
) -> Report:
    """Join training and held-out spans of one run into per-checkpoint rows with alarms.

    Args:
        evaluation: which held-out evaluations to show (:func:`harness.telemetry._evals.select_evaluations`):
            None the run's own, ``"all"``, or an evaluation id (prefix) or data set name. Scores of different
            evaluations are never mixed: each has its own rows, training windows and alarms.
    """
    cfg = alarm or AlarmSection()
    run_id, spans = _pick_run(spans, run_id)
    known = {s["span_id"] for s in spans}
    train = _latest(spans, "reward/")
    curve = {
        name: sorted(
            (st, m) for st, s in by_step.items() if (m := _num(s["attributes"].get("harness.reward.mean"))) is not None
        )
        for name, by_step in train.items()
    }
    found, by_id = group_evaluations(spans)
    shown = select_evaluations(found, evaluation)
    rows: list[CheckpointRow] = []
    for ev in shown:
        rows.extend(_eval_rows(ev, by_id[ev.id], curve, known, cfg))
    order = {ev.id: i for i, ev in enumerate(shown)}
    rows.sort(key=lambda r: (r.step, r.reward, order[r.evaluation]))
    hidden = [ev for ev in found if ev not in shown]
    return Report(run_id, rows, curve, cfg, source, shown, hidden)


def _f(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


_HEADER = (
    "step",
    "reward",
    "train (since prev ckpt)",
    "held-out",
    "held-out on",
    "gap (train - held-out)",
    "link",
    "alarm",
)


def _on(report: Report, r: CheckpointRow) -> str:
    """Which data set and k a held-out number comes from (and the evaluation id when several are shown)."""
    ev = next((e for e in report.evaluations if e.id == r.evaluation), None)
    label = ev.label if ev is not None else f"{r.data}, k={r.k}"
    return f"{label} [{r.evaluation}]" if len(report.evaluations) > 1 and r.evaluation else label


def _cells(report: Report, r: CheckpointRow) -> tuple[str, ...]:
    return (
        str(r.step),
        r.reward,
        _f(r.train_mean),
        _f(r.heldout),
        _on(report, r),
        _f(r.gap, True),
        r.link,
        "ALARM" if r.alarm else "",
    )


def _hidden_note(report: Report) -> list[str]:
    if not report.hidden:
        return []
    listed = "; ".join(f"{e.id or '(no id)'} on {e.label} (checkpoints {e.checkpoints})" for e in report.hidden)
    return [f"not shown: {len(report.hidden)} other evaluation(s) of this run's checkpoints: {listed} (--eval ID|all)"]


def format_table(report: Report) -> str:
    """A plain-text table for the terminal, followed by one line per alarm."""
    if not report.rows:
        return f"run {report.run_id}: no evaluated checkpoints found ({_train_summary(report)})"
    lines = [f"run {report.run_id}" + (f" ({report.source})" if report.source else "")]
    lines += [e.describe() for e in report.evaluations]
    lines += align_columns([_HEADER, *(_cells(report, r) for r in report.rows)], rule=True)
    lines.extend(f"ALARM {r.reward} @ step {r.step}: {r.alarm}" for r in report.alarms)
    if not report.alarms:
        lines.append("no divergence alarm")
    lines += _hidden_note(report)
    return "\n".join(lines)


def _train_summary(report: Report) -> str:
    n = {k: len(v) for k, v in report.train_curve.items()}
    return ", ".join(f"{k}: {v} training steps" for k, v in sorted(n.items())) or "no training spans either"


def to_markdown(report: Report, plot_name: str | None = "report.png") -> str:
    """The report as Markdown: a table, the alarms and the plot."""
    c = report.alarm_config
    out = [f"# Training reward vs held-out score: run `{report.run_id}`", ""]
    if report.source:
        out += [f"Source: {report.source}", ""]
    out += [f"- {e.describe()}" for e in report.evaluations] + ([""] if report.evaluations else [])
    if not report.rows:
        out += [f"No evaluated checkpoints found ({_train_summary(report)}).", ""]
    else:
        out += ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
        out += ["| " + " | ".join(_cells(report, r)) + " |" for r in report.rows]
        out.append("")
    out += [f"{line}" for line in _hidden_note(report)] + ([""] if report.hidden else [])
    out.append(
        f"Alarm rule: over the last {c.window} checkpoints, training reward rose by at least {c.train_rise} "
        f"while held-out rose by less than {c.heldout_min_rise}."
    )
    out.append("")
    if report.alarms:
        out += ["## Alarms", ""] + [f"- **{r.reward}** at step {r.step}: {r.alarm}" for r in report.alarms] + [""]
    else:
        out += ["No divergence alarm.", ""]
    if plot_name:
        out += [f"![training vs held-out]({plot_name})", ""]
    return "\n".join(out)


_COLORS = ("tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def plot_report(report: Report, path: str | Path) -> Path:
    """A PNG with one panel per reward: training mean per step, training window mean and held-out per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(set(report.train_curve) | {r.reward for r in report.rows}) or ["(none)"]
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.8 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        curve = report.train_curve.get(name, [])
        if curve:
            ax.plot(*zip(*curve, strict=True), color="tab:blue", alpha=0.35, lw=1, label="training (per step)")
        rows = [r for r in report.rows if r.reward == name]
        first = report.evaluations[0].id if report.evaluations else ""
        tr = [(r.step, r.train_mean) for r in rows if r.train_mean is not None and r.evaluation == first]
        if tr:
            ax.plot(*zip(*tr, strict=True), "o-", color="tab:blue", label="training (since previous checkpoint)")
        for ev, color in zip(report.evaluations, _COLORS * len(report.evaluations), strict=False):
            ho = [(r.step, r.heldout) for r in rows if r.heldout is not None and r.evaluation == ev.id]
            if ho:
                tag = f" [{ev.id}]" if len(report.evaluations) > 1 and ev.id else ""
                ax.plot(*zip(*ho, strict=True), "s-", color=color, label=f"held-out ({ev.label}){tag}")
        for r in rows:
            if r.alarm:
                ax.axvline(r.step, color="tab:red", ls="--", lw=1)
        if any(r.alarm for r in rows):
            ax.plot([], [], color="tab:red", ls="--", label="divergence alarm")
        ax.set_title(name)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_report(report: Report, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.png`` into ``out_dir``; returns their paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    png = plot_report(report, d / "report.png")
    md = d / "report.md"
    md.write_text(to_markdown(report, png.name), encoding="utf-8")
    return md, png
