"""GGUF models loaded through transformers, made ordinary: used by the trainer and by the demo's model conversion.

It lives in harness/ because both the trainer (:mod:`trainer.setup`) and the demo (:mod:`harness.demo`) need it,
and they may not import each other's packages. It does not load or convert files itself.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ConfigError

__all__ = ["detach_gguf_quantizer"]


def detach_gguf_quantizer(model: Any, gguf_file: str) -> None:
    """Make a GGUF model loaded as plain dequantized tensors trainable and savable like any other.

    transformers keeps its GGUF quantizer on the model even when it dequantized every weight, and then refuses
    ``save_pretrained``; the weights are ordinary tensors, so the quantizer is dropped. Weights left in GGUF blocks
    cannot be trained at all, which is an error here rather than at the first checkpoint.
    """
    if getattr(model, "hf_quantizer", None) is None:
        return
    if any(not p.is_floating_point() for p in model.parameters()):
        raise ConfigError(
            f"model.gguf_file {gguf_file!r}: the weights were loaded in GGUF blocks, which cannot be trained; "
            "uninstall the 'kernels' package so transformers dequantizes them, or convert the model first"
        )
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
