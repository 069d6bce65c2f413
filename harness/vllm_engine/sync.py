"""One weight sync for every vLLM engine of the project (the trainer's rollout and the evaluator's backend).

:func:`sync_weights` pushes new weights into a running engine, from tensors in memory (the policy being trained)
or from a checkpoint directory, through the worker extension (:mod:`harness.vllm_engine.worker`): vLLM's in-place
``reload_weights``, then the layers that share a weight (tied output heads) are re-processed, then the prefix cache
is dropped. Then it checks, always, that the engine computes with the new weights, and raises
:class:`StaleEngineError` otherwise: a stale engine would sample one policy while the trainer optimizes another
(or score the wrong checkpoint), with every metric looking plausible.

The check compares entries of the engine's effective weights with the source's, cast to the engine's dtype (the
engine holds exactly that cast, so the comparison is exact up to one rounding): the output head and the input
embedding always, and a few other layers chosen at random; ``full`` (debug mode, or debug logging) compares every
layer that maps onto the source's tensors. A packed copy of a weight (the CPU build's oneDNN layout) is read by
applying the layer to one-hot inputs, so what is checked is what the engine computes with.

Not covered: quantized engines, tensor/pipeline parallel engines (one worker), LoRA adapters.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from harness.errors import HarnessError

__all__ = ["WORKER_EXTENSION", "StaleEngineError", "SyncReport", "sync_weights", "check_weights", "checkpoint_tensors"]

log = logging.getLogger(__name__)

#: The ``worker_extension_cls`` engine argument every engine of the project is built with.
WORKER_EXTENSION = "harness.vllm_engine.worker.WeightSyncWorker"
CheckLevel = Literal["sampled", "full"]
_LINEAR_SUFFIXES = ("Linear", "LMHead")
_CHEAP_OTHER_LAYERS = 2
_COLUMNS = {"sampled": 4, "full": 16}


class StaleEngineError(HarnessError):
    """The engine does not compute with the weights it was just given."""


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: seconds, layers re-processed, entries compared and their largest difference."""

    seconds: float
    reprocessed: list[str]
    layers_checked: int
    entries_checked: int
    max_abs_diff: float


@dataclass(frozen=True)
class _Probe:
    module: str  # vLLM module name
    sources: tuple[str, ...]  # source tensor names, concatenated along dim 0 (merged qkv / gate_up layers)
    kind: Literal["cols", "rows"]


def sync_weights(
    llm: Any,
    *,
    weights: Iterable[tuple[str, torch.Tensor]] | None = None,
    path: str | Path | None = None,
    check: CheckLevel = "sampled",
    seed: int = 0,
) -> SyncReport:
    """Load ``weights`` (name, tensor in checkpoint format) or the checkpoint at ``path`` into ``llm``, then check.

    Raises:
        StaleEngineError: the engine's weights differ from the source's after the sync.
        ValueError: neither or both of ``weights`` and ``path``.
    """
    if (weights is None) == (path is None):
        raise ValueError("sync_weights: give exactly one of weights= and path=")
    started = time.perf_counter()
    source: Mapping[str, torch.Tensor] | _LazyCheckpoint
    if weights is not None:
        pairs = [(n, t.detach()) for n, t in weights]
        source = dict(pairs)
        result = llm.collective_rpc("harness_reload", kwargs={"weights": pairs})
    else:
        source = _LazyCheckpoint(Path(path))  # type: ignore[arg-type]
        result = llm.collective_rpc("harness_reload", kwargs={"weights_path": str(path)})
    llm.reset_prefix_cache()
    reprocessed = list(result[0]["reprocessed"]) if result and result[0] else []
    level: CheckLevel = "full" if log.isEnabledFor(logging.DEBUG) else check
    layers, entries, worst = check_weights(llm, source, level=level, seed=seed)
    report = SyncReport(time.perf_counter() - started, reprocessed, layers, entries, worst)
    log.info(
        "vllm weight sync: %.2f s, re-processed %s, check (%s) of %d layers, %d entries: max |diff| %.3g",
        report.seconds,
        ", ".join(reprocessed) or "nothing",
        level,
        layers,
        entries,
        worst,
    )
    return report


def check_weights(
    llm: Any, source: Mapping[str, torch.Tensor] | _LazyCheckpoint, *, level: CheckLevel = "sampled", seed: int = 0
) -> tuple[int, int, float]:
    """Compare entries of the engine's effective weights with ``source``'s; returns (layers, entries, max |diff|).

    Raises:
        StaleEngineError: an entry differs by more than one rounding of the engine's dtype, or the output head
            cannot be mapped onto a source tensor (the head is what goes stale).
    """
    info = llm.collective_rpc("harness_module_names")[0]
    probes = plan_probes(list(source.keys()), info["modules"], info["packed"])
    if not any(p.module.endswith("lm_head") for p in probes):
        raise StaleEngineError(
            "vllm weight check: the engine's output head maps onto no source tensor (expected lm_head.weight or a "
            f"tied embedding among {len(source)} tensors); the sync cannot be verified"
        )
    rng = random.Random(seed)
    chosen = _choose(probes, level, rng)
    requests, refs = [], []
    for probe in chosen:
        full = torch.cat([source[s].detach().float().cpu() for s in probe.sources], dim=0)
        n_idx = full.shape[1] if probe.kind == "cols" else full.shape[0]
        idx = sorted(rng.sample(range(n_idx), min(_COLUMNS[level], n_idx)))
        ref = full[:, idx] if probe.kind == "cols" else full[idx]
        requests.append((probe.module, idx if probe.kind == "cols" else None, idx if probe.kind == "rows" else None))
        refs.append(ref)
    got = llm.collective_rpc("harness_sample_weights", args=(requests,))[0]
    dtype = _DTYPES[info["dtype"]]
    worst, entries = 0.0, 0
    for probe, ref, values in zip(chosen, refs, got, strict=True):
        eng = torch.tensor(values, dtype=torch.float32)
        eng = eng[: ref.shape[0]] if probe.kind == "cols" else eng  # a padded vocabulary has extra rows
        want = ref.to(dtype).float()
        diff = (eng - want).abs()
        tol = 2 * torch.finfo(dtype).eps * want.abs() + 1e-30
        worst, entries = max(worst, float(diff.max())), entries + diff.numel()
        if eng.shape != want.shape or bool((diff > tol).any()):
            raise StaleEngineError(
                f"vllm weight check: the engine's {probe.module} differs from the source "
                f"({' + '.join(probe.sources)}) by up to {float(diff.max()):.3g} after the sync (allowed: one "
                f"rounding to {info['dtype']}); the engine would sample from stale weights"
            )
    return len(chosen), entries, worst


_DTYPES = {"torch.float32": torch.float32, "torch.bfloat16": torch.bfloat16, "torch.float16": torch.float16}


def plan_probes(source_names: list[str], modules: dict[str, str], packed: dict[str, list[str]]) -> list[_Probe]:
    """The engine's layers that map onto source tensors: same name, a merged layer (``packed``: ``qkv_proj`` ->
    ``q_proj, k_proj, v_proj``), or a tied output head (the input embedding's tensor)."""
    names = set(source_names)
    embed = next((m for m, cls in modules.items() if cls == "VocabParallelEmbedding"), None)
    probes = []
    for module, cls in modules.items():
        linear = cls.endswith(_LINEAR_SUFFIXES)
        if not linear and cls != "VocabParallelEmbedding":
            continue  # norms and buffers are loaded as they are, never processed into a copy
        kind: Literal["cols", "rows"] = "cols" if linear else "rows"
        parent, _, leaf = module.rpartition(".")
        if f"{module}.weight" in names:
            probes.append(_Probe(module, (f"{module}.weight",), kind))
        elif leaf in packed and all(f"{parent}.{p}.weight" in names for p in packed[leaf]):
            probes.append(_Probe(module, tuple(f"{parent}.{p}.weight" for p in packed[leaf]), kind))
        elif cls == "ParallelLMHead" and embed is not None and f"{embed}.weight" in names:
            probes.append(_Probe(module, (f"{embed}.weight",), kind))
    return probes


def _choose(probes: list[_Probe], level: CheckLevel, rng: random.Random) -> list[_Probe]:
    if level == "full":
        return probes
    always = [p for p in probes if p.module.endswith(("lm_head", "embed_tokens"))]
    rest = [p for p in probes if p not in always]
    return always + rng.sample(rest, min(_CHEAP_OTHER_LAYERS, len(rest)))


class _LazyCheckpoint:
    """The tensors of a safetensors checkpoint directory, read one at a time on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        index = path / "model.safetensors.index.json"
        if index.is_file():
            self.files = {k: path / v for k, v in json.loads(index.read_text())["weight_map"].items()}
        else:
            single = path / "model.safetensors"
            if not single.is_file():
                raise StaleEngineError(
                    f"vllm weight check: {path} has no safetensors weights, so the sync cannot be verified; save the "
                    "checkpoint with save_pretrained (safetensors)"
                )
            from safetensors import safe_open

            with safe_open(str(single), "pt") as f:
                self.files = {k: single for k in f.keys()}  # noqa: SIM118 (safe_open is not a mapping)

    def keys(self) -> list[str]:
        return list(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        with safe_open(str(self.files[name]), "pt") as f:
            return f.get_tensor(name)


def checkpoint_tensors(path: str | Path, names: Iterable[str]) -> dict[str, torch.Tensor]:
    """The named tensors of a safetensors checkpoint directory."""
    lazy = _LazyCheckpoint(Path(path))
    return {n: lazy[n] for n in names}
