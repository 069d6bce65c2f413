"""Evaluate a checkpoint on held-out prompts with the training rewards: :func:`evaluate`.

The flow: resolve the checkpoint (its step, run config, span context) -> load the held-out set
(:func:`harness.data.load_samples`) -> check it against the run's training prompts
(:func:`harness.contamination.check_contamination`) -> open the output directory (resuming finished prompts) ->
for each batch of prompts, sample ``k`` completions with the backend while the previous batch is scored by
:class:`harness.scoring.ScoringSession` (the same scoring path, and by default the same reward specs, as training)
-> append the scored completions to ``samples.jsonl`` -> compute metrics from every record -> write
``results.json`` atomically -> record an ``eval.checkpoint`` span linked to the checkpoint's training step.

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

from evals.backends import Backend, Generation, PromptRequest, SamplingParams, make_backend, prompt_seed
from evals.checkpoint import CheckpointInfo, resolve_checkpoint
from evals.config import BackendName, EvalSection
from evals.errors import ContaminationError, EvalError
from evals.identity import describe_evaluation, evaluation_key
from evals.outputs import EvalOutput, read_records
from evals.result_types import DatasetRecord, EvalMetrics, EvalResults, EvaluationInfo, SampleRecord, SeedsRecord
from evals.results import TRUNCATION_WARN_FRAC, build_results, format_table, headline_metrics, package_versions
from harness.cfg.common import FieldMap
from harness.cfg.scoring import ScoringSection
from harness.contamination import check_contamination
from harness.data import LoadResult, load_samples
from harness.errors import DataError
from harness.plugins import add_plugins
from harness.scoring import (
    BatchResult,
    ScoringSession,
    Submitted,
    TaskPool,
    score_while_generating,
    scoring_pool,
    weighted_total,
)
from harness.types import RewardSpec, Sample, Score

__all__ = ["evaluate", "EvalResult", "resolve_specs", "resolve_settings"]

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


def resolve_specs(
    specs: Sequence[RewardSpec | str | Mapping[str, Any]] | None, info: CheckpointInfo
) -> list[RewardSpec]:
    """The reward specs to use: ``specs`` when given, else those saved in the checkpoint's run config."""
    if specs:
        out = [
            s
            if isinstance(s, RewardSpec)
            else RewardSpec(name=s)
            if isinstance(s, str)
            else RewardSpec.model_validate(dict(s))
            for s in specs
        ]
    elif info.config is not None and info.config.rewards:
        out = list(info.config.rewards)
    else:
        raise EvalError(
            f"{info.path}: no rewards to score with: no config.yaml with rewards is saved with this "
            "checkpoint or its run; pass them (--reward NAME[=WEIGHT])"
        )
    return out


def _success_reward(specs: Sequence[RewardSpec], settings: EvalSection) -> str:
    names = [s.name for s in specs]
    if settings.success_reward is not None:
        if settings.success_reward not in names:
            raise EvalError(f"success reward {settings.success_reward!r} is not among the rewards {names}")
        return settings.success_reward
    weighted = [s.name for s in specs if s.weight != 0]
    return (weighted or names)[0]


def saved_data_path(info: CheckpointInfo, source: str | None) -> str | None:
    """A data path from a run's saved config, resolved where that run was started.

    Runs save their data paths absolute; an older config may hold one relative to the directory ``harness train``
    ran in, which is the run directory less ``run.output_dir/<run id>`` (when ``output_dir`` is relative).
    """
    if (
        not source
        or source.startswith("hf:")
        or Path(source).is_absolute()
        or info.run_dir is None
        or info.config is None
    ):
        return source
    out = Path(info.config.run.output_dir)
    if out.is_absolute():
        return source
    start = info.run_dir.resolve()
    for _ in range(len(out.parts) + 1):
        start = start.parent
    candidate = start / source
    return str(candidate) if candidate.exists() else source


def _contamination(
    held: LoadResult, info: CheckpointInfo, train_data: str | None, fields: FieldMap, settings: EvalSection
) -> dict[str, Any]:
    source = train_data or saved_data_path(info, info.config.data.train if info.config else None)
    if not source:
        return {"checked": False, "reason": "no training data source (run config data.train) to compare with"}
    try:
        # the run's training rows are read as the run read them (a task's or --field's mapping is the held-out set's)
        train = load_samples(source, info.config.data.fields if info.config and not train_data else fields)
    except DataError as e:
        log.warning("contamination check skipped: %s", e)
        return {"checked": False, "reason": str(e)}
    report = check_contamination(held.samples, train.samples, n=settings.ngram)
    if report.overlap:  # the one console line about it (the CLI prints none of its own)
        log.warning("%s (examples in results.json)", report.summary())
    else:
        log.info("%s", report.summary())
    if report.overlap and settings.fail_on_overlap:
        ex = "; ".join(f"{e['heldout_id']} ~ {e['train_id']} ({e['kind']})" for e in report.examples)
        raise ContaminationError(f"{report.summary()}; examples: {ex}")
    return {"checked": True, "train_source": source, **report.to_dict()}


def resolve_settings(info: CheckpointInfo, settings: EvalSection | None, k: int | None, backend: Any) -> EvalSection:
    """The eval settings in force: explicit ones, else the run config's, with k, backend and length filled in."""
    base = settings or (info.config.eval if info.config is not None else EvalSection())
    update: dict[str, Any] = {}
    if k is not None:
        update["k"] = k
    if isinstance(backend, str):
        update["backend"] = backend
    if base.max_new_tokens is None:  # score held-out completions on the same length budget as training
        update["max_new_tokens"] = info.config.trainer.max_completion_length if info.config is not None else 1024
    return EvalSection.model_validate({**base.model_dump(), **update}) if update else base


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


def _generate_and_score(
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


@dataclass
class _Plan:
    """What one evaluation runs on: the prompts, rewards, prompt rendering and sampling parameters."""

    source: str
    held: LoadResult
    limit: int | None
    strict: bool
    specs: list[RewardSpec]
    success: str
    fields: FieldMap
    chat_template: bool
    system_prompt: str | None
    params: SamplingParams

    def identity(self, cfg: EvalSection, model_id: Any) -> dict[str, Any]:
        """The settings that determine the samples (compared on resume)."""
        return {
            "dataset_fingerprint": self.held.fingerprint,
            "k": cfg.k,
            "sampling": self.params.to_dict(),
            "rewards": [s.model_dump() for s in self.specs],
            "backend": cfg.backend,
            "model": model_id,
            "chat_template": self.chat_template,
            "system_prompt": self.system_prompt,
        }

    def key(self, cfg: EvalSection) -> str:
        """The key of this evaluation (:func:`evals.identity.evaluation_key`)."""
        return evaluation_key(
            self.held.fingerprint, cfg.k, self.params.to_dict(), self.specs, self.chat_template, self.system_prompt
        )

    def dataset_record(self) -> DatasetRecord:
        """The dataset part of results.json."""
        return DatasetRecord(
            source=self.source,
            fingerprint=self.held.fingerprint,
            prompts=len(self.held.samples),
            skipped_rows=len(self.held.errors),
            row_errors=[str(e) for e in self.held.errors[:20]],
            fields=self.fields.model_dump(),
            chat_template=self.chat_template,
            system_prompt=self.system_prompt,
        )

    def describe(self, cfg: EvalSection, own: bool) -> EvaluationInfo:
        """The ``evaluation`` part of results.json (:func:`evals.identity.describe_evaluation`)."""
        return describe_evaluation(
            self.key(cfg),
            own,
            self.source,
            self.held.fingerprint,
            len(self.held.samples),
            cfg.k,
            self.params.to_dict(),
            self.specs,
        )


def _plan(
    info: CheckpointInfo,
    cfg: EvalSection,
    data: str | Path | LoadResult | None,
    specs: Sequence[RewardSpec | str | Mapping[str, Any]] | None,
    fields: FieldMap | None,
    chat_template: bool | None,
    system_prompt: str | None,
    held: _Plan | None = None,
) -> _Plan:
    """What to evaluate on; ``held``: a plan whose loaded data is reused when it read the same source the same way."""
    reward_specs = resolve_specs(specs, info)
    data_cfg = info.config.data if info.config else None
    source: str | None
    if isinstance(data, LoadResult):  # already loaded (a named task's prompts, rendered by the task)
        source = data.source
    else:
        source = str(data) if data is not None else saved_data_path(info, data_cfg.heldout if data_cfg else None)
    if not source:
        raise EvalError("no held-out data: pass --data SOURCE (or set data.heldout in the run config)")
    fmap = fields or (data_cfg.fields if data_cfg else FieldMap())
    if isinstance(data, LoadResult):
        loaded = data
    elif held is not None and (held.source, held.fields, held.limit, held.strict) == (
        source,
        fmap,
        cfg.limit,
        cfg.strict,
    ):
        loaded = held.held
    else:
        loaded = load_samples(source, fmap, strict=cfg.strict, limit=cfg.limit)
    if not loaded.samples:
        raise EvalError(f"{source}: no usable prompts ({len(loaded.errors)} bad rows)")
    assert cfg.max_new_tokens is not None, "resolve_settings fills max_new_tokens"
    return _Plan(
        source=source,
        held=loaded,
        limit=cfg.limit,
        strict=cfg.strict,
        specs=reward_specs,
        success=_success_reward(reward_specs, cfg),
        fields=fmap,
        chat_template=chat_template if chat_template is not None else (data_cfg.chat_template if data_cfg else True),
        system_prompt=system_prompt if system_prompt is not None else (data_cfg.system_prompt if data_cfg else None),
        params=SamplingParams(cfg.temperature, cfg.top_p, cfg.max_new_tokens, cfg.seed, tuple(cfg.stop)),
    )


def _own_key(info: CheckpointInfo, plan: _Plan) -> str | None:
    """The key of the run's own evaluation (its config's data.heldout, eval section and rewards), None outside a run.

    The run's held-out set is loaded again only when this evaluation read another source or read it differently.
    A run trained on a task (``data.task``) has none of its own here: its held-out file is in the task's schema
    and is evaluated through the task (:mod:`evals.task_run`).
    """
    if info.config is None or not info.config.data.heldout or info.config.data.task:
        return None
    cfg = resolve_settings(info, None, None, None)
    try:
        own = _plan(info, cfg, None, None, None, None, None, held=plan)
    except (EvalError, DataError) as e:
        log.debug("no own evaluation key for this run: %s", e)
        return None
    return own.key(cfg)


def _metrics(plan: _Plan, cfg: EvalSection, output: EvalOutput) -> tuple[EvalMetrics, bool]:
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
    plan = _plan(info, cfg, data, specs, fields, chat_template, system_prompt)
    if contamination is None:
        contamination = _contamination(plan.held, info, train_data, plan.fields, cfg)
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
            timing = _generate_and_score(be, todo, plan.specs, cfg, plan.params, output, progress, pool)
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
        "evaluation": plan.describe(cfg, plan.key(cfg) == _own_key(info, plan)),
    }
    output.write_results(results)
    if telemetry:
        _record_telemetry(info, results)
    return EvalResult(results=results, output_dir=output.dir)
