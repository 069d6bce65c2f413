""" "Is my run working?": per-step metrics checks that warn loudly, and the metrics JSONL writer.

:class:`Monitors` looks at each step's flat metrics dict and returns (and logs) warnings for:

* variance collapse: the fraction of zero-variance groups at or above a threshold for ``window`` steps in a row
  (no group teaches anything, the gradient is ~0);
* length bias: mean completion length up by over 20% across the last ``window`` steps while the total reward
  moved by under 5%;
* KL to the reference above ``kl_max``;
* an all-unscored batch (every reward failed on every sample);
* more than ``truncated_frac`` of completions truncated;
* a reward plugin leaving more than ``unscored_frac`` of samples unscored (named, with its rate).

Each kind of warning is repeated at most once per ``window`` steps. This module does not stop a run.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer import metrics as M
from trainer.config import MonitorSection

__all__ = ["Monitors", "MetricsWriter"]

log = logging.getLogger(__name__)


def _half_means(xs: list[float]) -> tuple[float, float]:
    h = len(xs) // 2
    return sum(xs[:h]) / h, sum(xs[h:]) / (len(xs) - h)


class Monitors:
    """Stateful checks over the stream of step metrics.

    Args:
        cfg: thresholds and window.
        reward_names: the reward spec names (for per-reward unscored rates).
        mask_truncated: the run's ``trainer.mask_truncated`` (the truncation warning's advice depends on it).
    """

    def __init__(self, cfg: MonitorSection, reward_names: list[str], *, mask_truncated: bool = False) -> None:
        self.cfg = cfg
        self.mask_truncated = mask_truncated
        self.reward_names = list(reward_names)
        self._zero_run = 0
        self._lengths: deque[float] = deque(maxlen=cfg.window)
        self._rewards: deque[float] = deque(maxlen=cfg.window)
        self._last_warned: dict[str, int] = {}

    def _warn(self, kind: str, step: int, message: str, out: list[str]) -> None:
        last = self._last_warned.get(kind)
        if last is not None and step - last < self.cfg.window:
            return
        self._last_warned[kind] = step
        text = f"step {step}: {message}"
        log.warning(text)
        out.append(text)

    def update(self, step: int, m: Mapping[str, Any]) -> list[str]:
        """Check one step's metrics; returns the warnings raised now (also logged)."""
        out: list[str] = []
        c = self.cfg
        zv = m.get(M.ZERO_STD_FRAC)
        self._zero_run = self._zero_run + 1 if zv is not None and zv >= c.zero_variance_frac else 0
        if self._zero_run >= c.window:
            self._warn(
                "variance",
                step,
                f"variance collapse: {zv:.0%} of groups have zero reward variance for "
                f"{self._zero_run} steps; rewards no longer separate completions (harder prompts, higher "
                "temperature or dynamic_sampling may help)",
                out,
            )
        if m.get(M.TOTAL_SCORED_FRAC, 1.0) == 0.0:
            self._warn(
                "unscored_all",
                step,
                "every sample of this batch is unscored: no gradient this step; check the reward warnings above",
                out,
            )
        for name in self.reward_names:
            frac = m.get(M.reward_key(name, "unscored_frac"))
            if frac is not None and frac > c.unscored_frac:
                self._warn(
                    f"unscored/{name}",
                    step,
                    f"reward {name!r} left {frac:.0%} of samples unscored "
                    f"({m.get(M.reward_key(name, 'statuses'), '')}); they are excluded from their groups",
                    out,
                )
        kl = m.get(M.KL)
        if kl is not None and kl > c.kl_max:
            self._warn(
                "kl",
                step,
                f"KL to the reference is {kl:.3g} > {c.kl_max:g}: the policy is drifting fast (lower lr or raise beta)",
                out,
            )
        tr = m.get(M.CLIPPED_RATIO)
        if tr is not None and tr > c.truncated_frac:
            advice = (
                "trainer.mask_truncated leaves them out of the loss, so they teach nothing: raise "
                "trainer.max_completion_length"
                if self.mask_truncated
                else "raise trainer.max_completion_length, or set trainer.mask_truncated: true to leave truncated "
                "completions out of the loss (DAPO's overlong filtering; see docs/TRAINING.md)"
            )
            self._warn("truncated", step, f"{tr:.0%} of completions hit trainer.max_completion_length; {advice}", out)
        self._check_length_bias(step, m, out)
        return out

    def _check_length_bias(self, step: int, m: Mapping[str, Any], out: list[str]) -> None:
        length, reward = m.get(M.MEAN_LENGTH), m.get(M.TOTAL_MEAN)
        if length is None or reward is None or not math.isfinite(reward):
            return
        self._lengths.append(float(length))
        self._rewards.append(float(reward))
        if len(self._lengths) < self.cfg.window:
            return
        l1, l2 = _half_means(list(self._lengths))
        r1, r2 = _half_means(list(self._rewards))
        if l2 > 1.2 * max(l1, 1.0) and abs(r2 - r1) <= 0.05 * max(abs(r1), abs(r2), 1e-3):
            self._warn(
                "length_bias",
                step,
                f"length bias: mean completion length {l1:.0f} -> {l2:.0f} tokens over "
                f"{self.cfg.window} steps while the reward stayed at {r2:.3g}",
                out,
            )


class MetricsWriter:
    """Appends one JSON object per step to ``metrics.jsonl``; on resume, drops lines past the resumed step."""

    def __init__(self, path: Path, *, resume_from_step: int | None = None) -> None:
        self.path = path
        if resume_from_step is not None and path.exists():
            keep = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    if int(json.loads(line).get(M.STEP, 0)) <= resume_from_step:
                        keep.append(line)
                except (ValueError, AttributeError):
                    continue  # a line cut by the kill
            path.write_text("".join(k + "\n" for k in keep), encoding="utf-8")
        elif resume_from_step is None and path.exists():
            path.unlink()

    def write(self, metrics: Mapping[str, Any]) -> None:
        """Append one step's metrics."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(metrics), default=str) + "\n")
