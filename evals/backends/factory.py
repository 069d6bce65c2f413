"""Build a generation backend by name from the eval settings; model libraries load only for the chosen one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.backends.base import Backend
from evals.config import EvalSection
from evals.errors import BackendError
from harness.types import Sample

__all__ = ["make_backend"]


def make_backend(
    name: str,
    model_path: str | Path,
    settings: EvalSection,
    *,
    chat_template: bool = True,
    system_prompt: str | None = None,
    tokenizer_path: str | None = None,
    gguf_file: str | None = None,
    samples: Sequence[Sample] = (),
) -> Backend:
    """The backend ``name`` (``hf``, ``vllm``, ``openai`` or ``reference``) for ``model_path``.

    For ``openai`` the model path is not loaded: the server serves its own model (``settings.model`` names it).
    ``reference`` loads no model: it answers with each of ``samples``' reference solution.

    Raises:
        BackendError: an unknown name, or the backend cannot start (see each backend).
    """
    if name == "hf":
        from evals.backends.hf import HFBackend

        return HFBackend(
            model_path,
            tokenizer_path=tokenizer_path,
            device=settings.device,
            batch_size=settings.batch_size,
            chat_template=chat_template,
            system_prompt=system_prompt,
            gguf_file=gguf_file,
            threads=settings.threads,
        )
    if name == "vllm":
        from evals.backends.vllm import VLLMBackend

        return VLLMBackend(
            settings.model or str(model_path),
            seed=settings.seed,
            chat_template=chat_template,
            system_prompt=system_prompt,
            gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
            kv_cache_bytes=settings.vllm_kv_cache_bytes,
            enforce_eager=settings.vllm_enforce_eager,
            dtype=settings.vllm_dtype,
            sync_check=settings.vllm_sync_check,
        )
    if name == "openai":
        from evals.backends.openai import OpenAIBackend

        return OpenAIBackend(
            settings.base_url or "",
            model=settings.model,
            api_key_env=settings.api_key_env,
            concurrency=settings.concurrency,
            timeout=settings.request_timeout,
            max_retries=settings.max_retries,
            chat_template=chat_template,
            system_prompt=system_prompt,
        )
    if name == "reference":
        from evals.backends.reference import ReferenceBackend

        return ReferenceBackend(samples)
    raise BackendError(f"unknown backend {name!r}; expected hf, vllm, openai or reference")
