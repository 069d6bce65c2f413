"""``harness report``: training reward beside held-out score per checkpoint and reward, with a divergence alarm.

Input is flat spans from any source (:mod:`harness.report.sources`), joined by run id, step and reward name:
per evaluated checkpoint, the mean ``harness.reward.mean`` of the ``reward/<name>`` spans since the previous one
(the trainer's window) beside the ``harness.reward.heldout`` of its ``eval.reward/<name>`` span, per evaluation
(:mod:`harness.report.evaluations`; by default the run's own), and whether its links resolve. Columns and the alarm
rule: ``docs/TRACING.md`` and :func:`divergence_alarms`. This module neither queries backends nor prints.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cfg.telemetry import AlarmSection
from harness.report.evaluations import Evaluation, group_evaluations, select_evaluations
from harness.stats import window_mean
from harness.table import align_columns

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
Span = dict[str, Any]


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
    """Everything ``harness report`` shows; ``hidden``: evaluations found but not shown (ask with --eval)."""

    run_id: str | None
    rows: list[CheckpointRow]
    train_curve: dict[str, list[tuple[int, float]]]
    alarm_config: AlarmSection = field(default_factory=AlarmSection)
    source: str = ""
    evaluations: list[Evaluation] = field(default_factory=list)
    hidden: list[Evaluation] = field(default_factory=list)

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


def _pick_run(spans: list[Span], run_id: str | None) -> tuple[str | None, list[Span]]:
    """The run to report (given, the only one, or the latest to end) and its spans."""
    last: dict[str, int] = {}
    for s in spans:
        if (rid := s["attributes"].get("harness.run.id")) is not None:
            last[rid] = max(last.get(rid, 0), s["end_ns"])
    if run_id is None and len(last) > 1:
        run_id = max(last, key=last.__getitem__)
        msg = "spans of %d runs found (%s); reporting the latest, %s (choose with --run-id)"
        logger.warning(msg, len(last), ", ".join(sorted(last)), run_id)
    if run_id is None:
        return next(iter(last), None), spans
    return run_id, [s for s in spans if s["attributes"].get("harness.run.id") == run_id]


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _latest(spans: list[Span], prefix: str) -> dict[str, dict[int, Span]]:
    """reward name -> step -> the last-ended span named ``prefix + name`` (re-runs and replays collapse). A span
    whose step is not a whole number (written by something else) is left out with a warning."""
    out: dict[str, dict[int, Span]] = defaultdict(dict)
    for s in spans:
        if not s["name"].startswith(prefix) or (raw := s["attributes"].get("harness.train.step")) is None:
            continue
        step = _num(raw)
        if step is None or step != int(step):
            logger.warning(
                "span %s %s: harness.train.step %r is not a step number; left out", s["name"], s.get("span_id"), raw
            )
            continue
        by_step = out[s["attributes"].get("harness.reward.name") or s["name"][len(prefix) :]]
        if int(step) not in by_step or s["end_ns"] >= by_step[int(step)]["end_ns"]:
            by_step[int(step)] = s
    return out


def divergence_alarms(train: list[float | None], heldout: list[float | None], cfg: AlarmSection) -> list[str | None]:
    """Per checkpoint (in step order), the alarm text or None.

    Checkpoint ``i`` alarms when ``train[i] - train[i-w+1] >= train_rise`` and
    ``heldout[i] - heldout[i-w+1] < heldout_min_rise`` (``w`` = window); missing values never alarm, and neither
    does a saturated held-out score (``>= saturated_at``) at or above the training reward.

    >>> divergence_alarms([0.5, 0.7, 0.9], [1.0, 1.0, 1.0], AlarmSection())
    [None, None, None]
    """
    out: list[str | None] = [None] * len(train)
    w = cfg.window
    for i in range(w - 1, len(train)):
        t0, t1, h0, h1 = train[i - w + 1], train[i], heldout[i - w + 1], heldout[i]
        if t0 is None or t1 is None or h0 is None or h1 is None:
            continue
        dt, dh = t1 - t0, h1 - h0
        saturated = cfg.saturated_at is not None and h1 >= cfg.saturated_at - 1e-9 and h1 >= t1
        if dt >= cfg.train_rise and dh < cfg.heldout_min_rise and not saturated:
            trend = "fell" if dh < 0 else "stayed flat"
            out[i] = f"training reward rose {dt:+.3f} over the last {w} checkpoints while held-out {trend} ({dh:+.3f})"
    return out


def _eval_rows(
    ev: Evaluation, spans: list[Span], curve: dict[str, list[tuple[int, float]]], known: set[str], cfg: AlarmSection
) -> list[CheckpointRow]:
    """Rows of one evaluation: per reward and checkpoint, the training window mean beside the held-out score."""
    rows: list[CheckpointRow] = []
    for name, by_step in sorted(_latest(spans, "eval.reward/").items()):
        reward_rows, prev = [], None
        for step, s in sorted(by_step.items()):
            a, links = s["attributes"], s["links"]
            train_mean, n = window_mean(curve.get(name, ()), prev, step)  # the trainer's own rule for the context
            train_mean = train_mean if n else _num(a.get("harness.reward.train_mean"))
            heldout = _num(a.get("harness.reward.heldout"))
            gap = train_mean - heldout if train_mean is not None and heldout is not None else None
            link = "none" if not links else "resolved" if all(ln["span_id"] in known for ln in links) else "dangling"
            reward_rows.append(CheckpointRow(step, name, train_mean, heldout, gap, n, link, None, ev.id, ev.data, ev.k))
            prev = step
        alarms = divergence_alarms([r.train_mean for r in reward_rows], [r.heldout for r in reward_rows], cfg)
        for row, msg in zip(reward_rows, alarms, strict=True):
            row.alarm = msg
        rows += reward_rows
    return rows


def build_report(
    spans: list[Span],
    alarm: AlarmSection | None = None,
    *,
    run_id: str | None = None,
    source: str = "",
    evaluation: str | None = None,
) -> Report:
    """Join training and held-out spans of one run into per-checkpoint rows with alarms.

    ``evaluation`` says which held-out evaluations to show (:func:`harness.report.evaluations.select_evaluations`):
    None the run's own, ``"all"``, or an id (prefix) or data set; each has its own rows, windows and alarms.
    """
    cfg = alarm or AlarmSection()
    run_id, spans = _pick_run(spans, run_id)
    known = {s["span_id"] for s in spans}
    curve = {
        name: sorted(
            (st, m) for st, s in by_step.items() if (m := _num(s["attributes"].get("harness.reward.mean"))) is not None
        )
        for name, by_step in _latest(spans, "reward/").items()
    }
    found, by_id = group_evaluations(spans)
    shown = select_evaluations(found, evaluation)
    rows = [row for ev in shown for row in _eval_rows(ev, by_id[ev.id], curve, known, cfg)]
    order = {ev.id: i for i, ev in enumerate(shown)}
    rows.sort(key=lambda r: (r.step, r.reward, order[r.evaluation]))
    return Report(run_id, rows, curve, cfg, source, shown, [ev for ev in found if ev not in shown])


_HEADER = "step|reward|train (since prev ckpt)|held-out|held-out on|gap (train - held-out)|link|alarm".split("|")


def _grid(report: Report) -> list[list[str]]:
    """The table, header first: one row of cells per checkpoint row (the same for the terminal and Markdown)."""
    labels = {e.id: e.label for e in report.evaluations}
    grid = [_HEADER]
    for r in report.rows:
        on = labels.get(r.evaluation, f"{r.data}, k={r.k}")  # the data set and k the held-out number comes from
        on += f" [{r.evaluation}]" if len(report.evaluations) > 1 and r.evaluation else ""
        train, heldout = [("-" if v is None else f"{v:.3f}") for v in (r.train_mean, r.heldout)]
        gap = "-" if r.gap is None else f"{r.gap:+.3f}"
        grid.append([str(r.step), r.reward, train, heldout, on, gap, r.link, "ALARM" if r.alarm else ""])
    return grid


def _notes(report: Report) -> tuple[str, list[str]]:
    """The line for a report without rows, and the line naming the evaluations not shown (if any)."""
    steps = ", ".join(f"{k}: {len(v)} training steps" for k, v in sorted(report.train_curve.items()))
    listed = "; ".join(f"{e.id or '(no id)'} on {e.label} (checkpoints {e.checkpoints})" for e in report.hidden)
    hidden = f"not shown: {len(report.hidden)} other evaluation(s) of this run's checkpoints: {listed} (--eval ID|all)"
    return f"no evaluated checkpoints found ({steps or 'no training spans either'})", [hidden] if report.hidden else []


def format_table(report: Report) -> str:
    """A plain-text table for the terminal, followed by one line per alarm."""
    empty, hidden = _notes(report)
    if not report.rows:
        return f"run {report.run_id}: {empty}"
    lines = [f"run {report.run_id}" + (f" ({report.source})" if report.source else "")]
    lines += [e.describe() for e in report.evaluations] + align_columns(_grid(report), rule=True)
    lines += [f"ALARM {r.reward} @ step {r.step}: {r.alarm}" for r in report.alarms] or ["no divergence alarm"]
    return "\n".join(lines + hidden)


def to_markdown(report: Report, plot_name: str | None = "report.png") -> str:
    """The report as Markdown: a table, the alarms and the plot."""
    c, (empty, hidden) = report.alarm_config, _notes(report)
    out = [f"# Training reward vs held-out score: run `{report.run_id}`", ""]
    out += [f"Source: {report.source}", ""] if report.source else []
    out += [f"- {e.describe()}" for e in report.evaluations] + ([""] if report.evaluations else [])
    if report.rows:
        header, *body = ["| " + " | ".join(cells) + " |" for cells in _grid(report)]
        out += [header, "|" + "---|" * len(_HEADER), *body, ""]
    else:
        out += [empty[0].upper() + empty[1:] + ".", ""]
    out += hidden + ([""] if hidden else [])
    out += [
        f"Alarm rule: over the last {c.window} checkpoints, training reward rose by at least {c.train_rise} "
        f"while held-out rose by less than {c.heldout_min_rise}.",
        "",
    ]
    alarms = [f"- **{r.reward}** at step {r.step}: {r.alarm}" for r in report.alarms]
    out += ["## Alarms", "", *alarms, ""] if alarms else ["No divergence alarm.", ""]
    return "\n".join(out + ([f"![training vs held-out]({plot_name})", ""] if plot_name else []))


_COLORS = ("tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def plot_report(report: Report, path: str | Path) -> Path:
    """A PNG with one panel per reward: training mean per step, training window mean and held-out per checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(set(report.train_curve) | {r.reward for r in report.rows}) or ["(none)"]
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.8 * len(names)), squeeze=False)
    first = report.evaluations[0].id if report.evaluations else ""
    for ax, name in zip(axes[:, 0], names, strict=True):
        if curve := report.train_curve.get(name, []):
            ax.plot(*zip(*curve, strict=True), color="tab:blue", alpha=0.35, lw=1, label="training (per step)")
        rows = [r for r in report.rows if r.reward == name]
        if tr := [(r.step, r.train_mean) for r in rows if r.train_mean is not None and r.evaluation == first]:
            ax.plot(*zip(*tr, strict=True), "o-", color="tab:blue", label="training (since previous checkpoint)")
        for ev, color in zip(report.evaluations, _COLORS * len(report.evaluations), strict=False):
            if ho := [(r.step, r.heldout) for r in rows if r.heldout is not None and r.evaluation == ev.id]:
                tag = f" [{ev.id}]" if len(report.evaluations) > 1 and ev.id else ""
                ax.plot(*zip(*ho, strict=True), "s-", color=color, label=f"held-out ({ev.label}){tag}")
        for r in (r for r in rows if r.alarm):
            ax.axvline(r.step, color="tab:red", ls="--", lw=1)
        if any(r.alarm for r in rows):
            ax.plot([], [], color="tab:red", ls="--", label="divergence alarm")
        ax.set(title=name, xlabel="training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def write_report(report: Report, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.png`` into ``out_dir``; returns their paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    png = plot_report(report, d / "report.png")
    (md := d / "report.md").write_text(to_markdown(report, png.name), encoding="utf-8")
    return md, png
