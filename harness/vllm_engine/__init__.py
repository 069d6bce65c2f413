"""vLLM engines shared by the trainer's rollout and the evaluator: platform-aware settings and the weight sync."""

from harness.vllm_engine.platform import EnginePlatform, engine_platform
from harness.vllm_engine.sync import WORKER_EXTENSION, StaleEngineError, SyncReport, check_weights, sync_weights

__all__ = [
    "EnginePlatform",
    "engine_platform",
    "WORKER_EXTENSION",
    "StaleEngineError",
    "SyncReport",
    "check_weights",
    "sync_weights",
]
