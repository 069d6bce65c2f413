"""Evaluate a checkpoint on held-out prompts with the training rewards: :func:`evaluate`.

The flow: resolve the checkpoint (its step, run config, span context) -> load the held-out set
(:func:`harness.data.load_samples`) -> check it against the run's training prompts
(:func:`harness.contamination.check_contamination`) -> open the output directory (resuming finished prompts) ->
for each batch of prompts, sample ``k`` completions with the backend while the previous batch is scored by
:class:`harness.scoring.ScoringSession` (the same scoring path, and by default the same reward specs, as training)
-> append the scored completions to ``samples.jsonl`` -> compute metrics from every record -> write
``results.json`` atomically -> record an ``eval.checkpoint`` span linked to the checkpoint's training step.

What is evaluated on is resolved in :mod:`evals._plan`; the generate-and-score loop is :mod:`evals._batches`.
This module does not train, does not pick checkpoints to watch (see :mod:`evals.cli`) and does not print
(it logs; the CLI prints the table).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evals._batches import generate_and_score
from evals._plan import (
    Plan,
    contamination_record,
    make_plan,
    own_key,
    resolve_settings,
    resolve_specs,
    saved_data_path,
)
from evals.backends import Backend, make_backend
from evals.checkpoint import CheckpointInfo, resolve_checkpoint
from evals.config import BackendName, EvalSection
from evals.outputs import EvalOutput, read_records
from evals.result_types import EvalMetrics, EvalResults, SeedsRecord
from evals.results import TRUNCATION_WARN_FRAC, build_results, format_table, headline_metrics, package_versions
from harness.cfg.common import FieldMap
from harness.cfg.scoring import ScoringSection
from harness.data import LoadResult
from harness.plugins import add_plugins
from harness.scoring import scoring_pool
from harness.types import RewardSpec

__all__ = ["evaluate", "EvalResult", "resolve_specs", "resolve_settings", "saved_data_path"]

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """What :func:`evaluate` returns: the content of ``results.json`` and where it was written."""

    results: EvalResults
    output_dir: Path

    @property
    def pass_at_k(self) -> dict[int, float | None]:
        """pass@k for every k, on the success reward."""
        return {int(j): v["value"] for j, v in self.results["pass@k"].items()}

    @property
    def maj_at_k(self) -> dict[int, float | None]:
        """maj@k for every k, on the success reward."""
        return {int(j): v["value"] for j, v in self.results["maj@k"].items()}

    def reward_mean(self, name: str) -> float | None:
        """Mean of reward ``name`` over scored completions."""
        return self.results["rewards"][name]["mean"]

    def table(self) -> str:
        """The console summary table."""
        return format_table(self.results)


def _record_telemetry(info: CheckpointInfo, results: EvalResults) -> bool:
    if info.run_dir is None or info.step is None:
        return False
    from harness.telemetry import RunTelemetry

    tel = RunTelemetry.start(
        info.run_dir, info.run_id or info.run_dir.name, info.config.telemetry if info.config else None
    )
    try:
        with tel.eval_checkpoint(info.step, info.telemetry_ctx, results["evaluation"]) as ev:
            ev.set_metrics(headline_metrics(results))
            for name, r in results["rewards"].items():
                extra = {"stderr": r["stderr"], "scored": r["scored"], "count": r["count"]}
                metrics = {key: v for key, v in extra.items() if v is not None}
                ev.record_reward(name, r["mean"], metrics, nodes=r.get("nodes"))
    finally:
        tel.shutdown()
    return True


def _metrics(plan: Plan, cfg: EvalSection, output: EvalOutput) -> tuple[EvalMetrics, bool]:
    """Metrics over every record of this evaluation's prompts (a redone partial prompt: its last records win), and
    whether too many completions hit the token limit (logged here)."""
    ids = {s.id for s in plan.held.samples}
    latest = {(str(r["prompt_id"]), int(r["sample_index"])): r for r in read_records(output.samples_path)[0]}
    records = [r for key, r in latest.items() if key[0] in ids]
    metrics = build_results(records, plan.specs, k=cfg.k, success_reward=plan.success, threshold=cfg.success_threshold)
    trunc = metrics["completions"]["truncated_frac"]
    if trunc > TRUNCATION_WARN_FRAC:
        log.warning(
            "%.0f%% of completions hit max_new_tokens=%d: scores are likely cut short; raise the limit",
            100 * trunc,
            plan.params.max_new_tokens,
        )
    return metrics, trunc > TRUNCATION_WARN_FRAC


def evaluate(
    checkpoint: str | Path,
    data: str | Path | LoadResult | None = None,
    specs: Sequence[RewardSpec | str | Mapping[str, Any]] | None = None,
    *,
    k: int | None = None,
    backend: BackendName | Backend | None = None,
    settings: EvalSection | None = None,
    output_dir: str | Path | None = None,
    resume: bool = True,
    fields: FieldMap | None = None,
    chat_template: bool | None = None,
    system_prompt: str | None = None,
    train_data: str | None = None,
    gguf_file: str | None = None,
    telemetry: bool = True,
    progress: bool = False,
    scoring: ScoringSection | None = None,
    contamination: Mapping[str, Any] | None = None,
) -> EvalResult:
    """Score ``k`` samples per held-out prompt from ``checkpoint`` with the run's rewards; write results.json.

    Args:
        checkpoint: a checkpoint directory (``runs/<id>/checkpoints/step-N`` or any ``save_pretrained`` dir).
        data: the held-out set (see :func:`harness.data.load_samples`), or samples already loaded (a task's, see
            :mod:`evals.task_run`); default: the run config's data.heldout.
        specs: reward specs; default: those saved in the run config (the training rewards).
        k: samples per prompt (overrides ``settings.k``).
        backend: ``hf``, ``vllm``, ``openai`` or a ready :class:`~evals.backends.Backend` object.
        settings: eval settings; default: the run config's ``eval`` section, else the defaults.
        output_dir: default ``<run>/eval/<checkpoint name>``.
        resume: keep finished prompts found in ``output_dir`` (False starts over).
        fields, chat_template, system_prompt: default to the run config's data section.
        train_data: training prompts for the contamination check; default: the run config's data.train.
        contamination: the contamination record when the caller checked already (a task compares bare questions,
            :mod:`evals.task_contamination`); the check is then not run here.
        gguf_file: hf: a GGUF file inside ``checkpoint`` to load (dequantized; needs the gguf package).
        telemetry: record an ``eval.checkpoint`` span in the run's traces (when the checkpoint is in a run).
        progress: show progress bars.
        scoring: where the reward calls run (``backend: local|ray``); default: the run config's ``scoring``
            section, else this machine's pool.

    Raises:
        EvalError: no data or rewards; ContaminationError with ``fail_on_overlap``; BackendError when the model or
            server is unavailable; ResumeError when ``output_dir`` holds an evaluation with other settings;
            harness.errors.DataError for unreadable data (or a bad row with ``settings.strict``).
    """
    started = datetime.now(timezone.utc)
    info = resolve_checkpoint(checkpoint)
    if info.config is not None:
        add_plugins(info.config.plugins)  # the run's own reward modules (saved absolute in its config.yaml)
    cfg = resolve_settings(info, settings, k, backend)
    plan = make_plan(info, cfg, data, specs, fields, chat_template, system_prompt)
    if contamination is None:
        contamination = contamination_record(plan.held, info, train_data, plan.fields, cfg)
    log.info(
        "sampling: k=%d temperature=%g top_p=%g max_new_tokens=%d seed=%d",
        cfg.k,
        plan.params.temperature,
        plan.params.top_p,
        plan.params.max_new_tokens,
        plan.params.seed,
    )
    model_id: Any = (str(Path(checkpoint).resolve()), gguf_file)
    if cfg.backend in ("openai", "reference"):
        model_id = (cfg.base_url, cfg.model) if cfg.backend == "openai" else "reference"
    output = EvalOutput(Path(output_dir) if output_dir else info.default_output, plan.identity(cfg, model_id), cfg.k)
    finished = output.open(resume=resume)
    todo = [s for s in plan.held.samples if s.id not in finished]
    be: Backend | None = None if backend is None or isinstance(backend, str) else backend
    owned = be is None  # a Backend object passed in stays the caller's to close
    timing: dict[str, float] = {"generate_s": 0.0, "score_wait_s": 0.0, "score_call_s": 0.0, "score_submit_s": 0.0}
    t0 = time.perf_counter()
    try:
        if todo:
            if be is None:
                be = make_backend(
                    cfg.backend,
                    info.path,
                    cfg,
                    chat_template=plan.chat_template,
                    system_prompt=plan.system_prompt,
                    gguf_file=gguf_file,
                    samples=plan.held.samples,
                )
            pool = scoring_pool(scoring or (info.config.scoring if info.config is not None else None))
            timing = generate_and_score(be, todo, plan.specs, cfg, plan.params, output, progress, pool)
        describe = be.describe() if be is not None else {"backend": cfg.backend, "model": model_id}
    finally:
        if owned and be is not None:
            be.close()
    timing = {
        "wall_s": time.perf_counter() - t0,
        **timing,
        "prompts_generated": len(todo),
        "prompts_resumed": len(plan.held.samples) - len(todo),
    }
    metrics, truncation_warning = _metrics(plan, cfg, output)
    finished_at = datetime.now(timezone.utc).isoformat()
    results: EvalResults = {  # the key order is results.json's
        "checkpoint": str(info.path),
        "step": info.step,
        "run_id": info.run_id,
        "k": cfg.k,
        **metrics,
        "truncation_warning": truncation_warning,
        "dataset": plan.dataset_record(),
        "sampling": plan.params.to_dict(),
        "seeds": SeedsRecord(
            run_seed=plan.params.seed,
            per_prompt="sha256(run_seed, prompt id) -> 31 bits; openai adds the sample index",
        ),
        "backend": describe,
        "contamination": contamination,
        "timing": timing,
        "versions": package_versions(),
        "started": started.isoformat(),
        "finished": finished_at,
        "evaluation": plan.describe(cfg, plan.key(cfg) == own_key(info, plan)),
    }
    output.write_results(results)
    if telemetry:
        _record_telemetry(info, results)
    return EvalResult(results=results, output_dir=output.dir)
