"""What one evaluation runs on (:class:`Plan`): the held-out prompts, the rewards, the prompt rendering and the
sampling parameters, resolved from the arguments of :func:`evals.runner.evaluate` and the checkpoint's run config;
and the contamination check of those prompts against the run's training prompts.

This module loads data and reads configs; it does not generate, score or write results (:mod:`evals.runner`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.backends import SamplingParams
from evals.checkpoint import CheckpointInfo
from evals.config import EvalSection
from evals.errors import ContaminationError, EvalError
from evals.identity import describe_evaluation, evaluation_key
from evals.result_types import DatasetRecord, EvaluationInfo
from harness.cfg.common import FieldMap
from harness.contamination import ContaminationReport, check_contamination
from harness.data import LoadResult, load_samples
from harness.errors import DataError
from harness.types import RewardSpec

__all__ = [
    "Plan",
    "make_plan",
    "own_key",
    "resolve_specs",
    "resolve_settings",
    "saved_data_path",
    "contamination_record",
    "report_overlap",
]

log = logging.getLogger(__name__)


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


def contamination_record(
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
    report_overlap(report, settings)
    return {"checked": True, "train_source": source, **report.to_dict()}


def report_overlap(report: ContaminationReport, settings: EvalSection, what: str = "") -> None:
    """The one console line about a contamination check (the CLI prints none of its own), and a
    :class:`ContaminationError` naming examples when there is overlap and ``settings.fail_on_overlap``.
    ``what``: a prefix for the error (``"task gsm8k: "``)."""
    if report.overlap:
        log.warning("%s (examples in results.json)", report.summary())
    else:
        log.info("%s", report.summary())
    if report.overlap and settings.fail_on_overlap:
        ex = "; ".join(f"{e['heldout_id']} ~ {e['train_id']} ({e['kind']})" for e in report.examples)
        raise ContaminationError(f"{what}{report.summary()}; examples: {ex}")


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


@dataclass
class Plan:
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


def make_plan(
    info: CheckpointInfo,
    cfg: EvalSection,
    data: str | Path | LoadResult | None,
    specs: Sequence[RewardSpec | str | Mapping[str, Any]] | None,
    fields: FieldMap | None,
    chat_template: bool | None,
    system_prompt: str | None,
    held: Plan | None = None,
) -> Plan:
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
    return Plan(
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


def own_key(info: CheckpointInfo, plan: Plan) -> str | None:
    """The key of the run's own evaluation (its config's data.heldout, eval section and rewards), None outside a run.

    The run's held-out set is loaded again only when this evaluation read another source or read it differently.
    A run trained on a task (``data.task``) has none of its own here: its held-out file is in the task's schema
    and is evaluated through the task (:mod:`evals.task_run`).
    """
    if info.config is None or not info.config.data.heldout or info.config.data.task:
        return None
    cfg = resolve_settings(info, None, None, None)
    try:
        own = make_plan(info, cfg, None, None, None, None, None, held=plan)
    except (EvalError, DataError) as e:
        log.debug("no own evaluation key for this run: %s", e)
        return None
    return own.key(cfg)
