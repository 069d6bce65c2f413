"""Code that runs inside vLLM's worker process: the weight reload and the checks after it.

vLLM mixes :class:`WeightSyncWorker` into its worker class when the engine is built with
``worker_extension_cls="harness.vllm_engine.worker.WeightSyncWorker"``; the driver then calls its methods by name
through ``LLM.collective_rpc``, whether the engine runs in the calling process or in its own (no pickled callables).

* :meth:`WeightSyncWorker.harness_reload` reloads the weights in place with vLLM's own ``reload_weights`` (it
  re-runs each layer's weight processing, e.g. the CPU build's oneDNN repacking), then re-processes every layer
  that shares its weight with another one. That last step is ours: a tied output head loads nothing during a
  reload (its weight is the embedding's), so vLLM leaves the head's processed copy alone; where that copy is a
  packed duplicate of the weight (the CPU build, float32 and bfloat16), the head kept scoring with the OLD
  embedding. Re-processing is idempotent for unquantized layers and a no-op where the processing keeps no copy
  (CUDA).
* :meth:`WeightSyncWorker.harness_sample_weights` reads a few entries of the engine's effective weights, the way
  the engine computes with them: a packed linear layer's columns come from applying the layer to one-hot inputs
  (exact: one product per output, the rest zeros), plain parameters are indexed directly. The driver compares
  them with the policy's own values (:mod:`harness.vllm_engine.sync`).

Not covered: quantized engines (refused by the driver), tensor or pipeline parallelism (one worker).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["WeightSyncWorker", "reprocess_shared_layers", "sample_module_weights"]


def _shared_weight_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Layers with a ``quant_method`` whose ``weight`` parameter is also another layer's (tied heads)."""
    by_param: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = module._parameters.get("weight") if hasattr(module, "_parameters") else None
        if weight is not None and getattr(module, "quant_method", None) is not None:
            by_param.setdefault(id(weight), []).append(module)
    return [m for group in by_param.values() if len(group) > 1 for m in group]


def reprocess_shared_layers(model: torch.nn.Module) -> list[str]:
    """Re-run the weight processing of every layer that shares its weight; returns their class names.

    Raises:
        RuntimeError: such a layer is quantized (its processing is not known to be idempotent).
    """
    names = []
    for layer in _shared_weight_layers(model):
        method: Any = getattr(layer, "quant_method", None)
        weight: Any = getattr(layer, "weight", None)
        if "Unquantized" not in type(method).__name__:
            raise RuntimeError(
                f"weight sync: {type(layer).__name__} shares its weight and uses {type(method).__name__}; only "
                "unquantized engines are synced"
            )
        if weight is None or weight.numel() == 0:  # processing already replaced the weight; nothing to rebuild from
            continue
        method.process_weights_after_loading(layer)
        names.append(type(layer).__name__)
    return names


def sample_module_weights(module: torch.nn.Module, cols: list[int] | None, rows: list[int] | None) -> torch.Tensor:
    """Entries of ``module``'s effective weight (out x in) as the engine computes with it, in float32.

    ``cols``: columns of a linear layer or output head, read by applying the layer to one-hot inputs (rows: all
    outputs). ``rows``: rows of an embedding table or entries of a plain vector parameter, indexed directly.
    """
    weight = module._parameters.get("weight")
    if rows is not None:
        if weight is None or weight.numel() == 0:
            raise RuntimeError(f"weight sync check: {type(module).__name__} keeps no plain weight to index")
        return weight.detach()[rows].float().cpu()
    method = getattr(module, "quant_method", None)
    if method is None or cols is None:
        raise RuntimeError(f"weight sync check: {type(module).__name__} is not a linear layer")
    in_features = _in_features(module)
    dtype = next(iter(module.parameters())).dtype
    device = next(iter(module.parameters())).device
    eye = torch.zeros(len(cols), in_features, dtype=dtype, device=device)
    eye[torch.arange(len(cols)), torch.tensor(cols)] = 1
    out = method.apply(module, eye)  # no bias: the layer's forward adds it. Row i is column cols[i] of the weight
    return out.float().t().contiguous().cpu()


def _in_features(module: torch.nn.Module) -> int:
    for attr in ("input_size_per_partition", "embedding_dim", "input_size"):
        value = getattr(module, attr, None)
        if isinstance(value, int):
            return value
    raise RuntimeError(f"weight sync check: cannot tell the input size of {type(module).__name__}")


class WeightSyncWorker:
    """Methods vLLM mixes into its worker (``worker_extension_cls``); ``self`` is the worker."""

    model_runner: Any

    def harness_reload(
        self, weights: list[tuple[str, torch.Tensor]] | None = None, weights_path: str | None = None
    ) -> dict[str, Any]:
        """Reload the weights from ``weights`` (name, tensor pairs in checkpoint format) or a checkpoint directory,
        then rebuild the processed copies of layers that share a weight."""
        reload = getattr(self, "reload_weights", None) or self.model_runner.reload_weights
        with torch.no_grad():
            reload(weights_iterator=iter(weights) if weights is not None else None, weights_path=weights_path)
            shared = reprocess_shared_layers(self.model_runner.get_model())
        return {"reprocessed": shared}

    def harness_sample_weights(
        self, probes: list[tuple[str, list[int] | None, list[int] | None]]
    ) -> list[list[list[float]]]:
        """For each (module name, cols, rows): :func:`sample_module_weights` of that module of the engine's model,
        as nested lists (what crosses vLLM's process boundary unchanged)."""
        model = self.model_runner.get_model()
        with torch.no_grad():
            return [sample_module_weights(model.get_submodule(n), cols, rows).tolist() for n, cols, rows in probes]

    def harness_module_names(self) -> dict[str, Any]:
        """The engine model's layers with parameters of their own (name -> class name), its merged layers
        (``packed_modules_mapping``) and its dtype."""
        model = self.model_runner.get_model()
        return {
            "modules": {n: type(m).__name__ for n, m in model.named_modules() if m._parameters},
            "packed": dict(getattr(model, "packed_modules_mapping", None) or {}),
            "dtype": str(self.model_runner.model_config.dtype),
        }
