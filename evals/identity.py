"""Which evaluation a held-out score belongs to: its key, its description, and whether it is the run's own.

An evaluation is keyed by what decides its numbers: the held-out data (the fingerprint of the loaded samples), k,
the sampling settings (temperature, top-p, token limit, seed), the reward specs and the prompt rendering (chat
template, system prompt). Two evaluations with the same key measure the same thing; a later one of the same
checkpoint replaces the earlier in ``harness report``. The backend is not in the key: the same evaluation served by
hf or vLLM measures the same quantity.

The run's own evaluation is the one ``harness eval --checkpoints RUN`` runs without flags: the run config's
``data.heldout``, its ``eval`` section and its rewards. ``harness report`` follows it by default; any other
evaluation of the run's checkpoints (another data set, k, sampling or reward) is shown only when asked for.

This module loads a data set only to fingerprint the run's own held-out set; it does not sample, score or trace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.result_types import EvaluationInfo
from harness.types import RewardSpec

__all__ = ["evaluation_key", "describe_evaluation", "data_label"]


def evaluation_key(
    fingerprint: str,
    k: int,
    sampling: Mapping[str, Any],
    specs: Sequence[RewardSpec],
    chat_template: bool,
    system_prompt: str | None,
) -> str:
    """A 12-hex-digit key of an evaluation's identity (stable across processes and machines).

    >>> a = evaluation_key("f", 8, {"temperature": 0.6}, [RewardSpec(name="math")], True, None)
    >>> a == evaluation_key("f", 8, {"temperature": 0.6}, [RewardSpec(name="math")], True, None)
    True
    >>> a == evaluation_key("f", 4, {"temperature": 0.6}, [RewardSpec(name="math")], True, None)
    False
    """
    ident = {
        "fingerprint": fingerprint,
        "k": int(k),
        "sampling": dict(sampling),
        "rewards": [s.model_dump(mode="json") for s in specs],
        "chat_template": bool(chat_template),
        "system_prompt": system_prompt,
    }
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def data_label(source: str) -> str:
    """A short name of a data source for tables and legends: a file's name, or the ``hf:`` name as given."""
    return source if source.startswith("hf:") or "://" in source else Path(source).name


def describe_evaluation(
    key: str,
    own: bool,
    source: str,
    fingerprint: str,
    prompts: int,
    k: int,
    sampling: Mapping[str, Any],
    specs: Sequence[RewardSpec],
) -> EvaluationInfo:
    """What the evaluation's spans carry (``harness.eval.*``) and ``results.json`` records under ``evaluation``."""
    return EvaluationInfo(
        id=key,
        own=own,
        data=data_label(source),
        fingerprint=fingerprint,
        prompts=prompts,
        k=k,
        temperature=sampling.get("temperature"),
        top_p=sampling.get("top_p"),
        max_new_tokens=sampling.get("max_new_tokens"),
        seed=sampling.get("seed"),
        rewards=[s.name for s in specs],
    )
