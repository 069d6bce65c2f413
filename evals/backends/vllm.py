"""The ``vllm`` backend: offline batched sampling with vLLM's ``LLM`` and ``SamplingParams`` (GPU only).

Written against vLLM 0.33.0's offline API, read from its wheel: ``LLM(model=..., seed=..., dtype=...,
gpu_memory_utilization=..., kv_cache_memory_bytes=..., enforce_eager=...)``, ``SamplingParams(n=k,
temperature=..., top_p=..., max_tokens=..., seed=...)``, ``LLM.generate`` with ``{"prompt_token_ids": ...}``
prompts, ``LLM.collective_rpc("reload_weights", kwargs={"weights_path": ...})`` and ``LLM.reset_prefix_cache``.

* Memory comes from the eval settings: ``vllm_gpu_memory_utilization`` (default: 90% of the memory free at
  start-up, so the engine starts beside a training job that holds the rest; vLLM's own default, 0.92 of the
  whole GPU, fails there) and ``vllm_kv_cache_bytes``.
* Prompts are rendered and tokenized exactly as in the ``hf`` backend (the tokenizer's ids of the rendered text,
  ``add_special_tokens=False``) and sent as token ids, so both backends see the same tokens; vLLM's own text
  path would add special tokens (a BOS for Llama-family tokenizers).
* One engine serves a series of checkpoints of one run: :meth:`VLLMBackend.load_checkpoint` reloads the weights
  of another checkpoint directory in place (same architecture and tokenizer) instead of building a new engine.
  :meth:`VLLMBackend.close` shuts the engine down and frees its GPU memory.

Each prompt gets its own ``SamplingParams`` with that prompt's seed, so results do not depend on batching. vLLM
is imported when the backend is built, never at module import. Not run here: vLLM needs a CUDA GPU; the tests
use a stand-in module, plus a check of the argument names where vLLM is installed.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.backends.base import Generation, PromptRequest, SamplingParams
from evals.errors import BackendError
from harness.data import render_prompt

__all__ = ["VLLMBackend", "memory_settings"]

log = logging.getLogger(__name__)


def memory_settings(
    free: int | None, total: int | None, utilization: float | None, kv_cache_bytes: int | None
) -> dict[str, Any]:
    """The engine's memory arguments: ``gpu_memory_utilization`` (given, else 90% of ``free`` over ``total``; left
    to vLLM when the memory is unknown) and ``kv_cache_memory_bytes`` when given.

    >>> memory_settings(40 * 2**30, 80 * 2**30, None, None)
    {'gpu_memory_utilization': 0.45}
    """
    out: dict[str, Any] = {}
    if utilization is None and free is not None and total:
        utilization = round(0.9 * free / total, 4)
    if utilization is not None:
        out["gpu_memory_utilization"] = utilization
    if kv_cache_bytes is not None:
        out["kv_cache_memory_bytes"] = int(kv_cache_bytes)
    return out


def _gpu_memory() -> tuple[int | None, int | None]:
    try:
        import torch

        if torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info()
            return int(free), int(total)
    except (ImportError, RuntimeError):
        pass
    return None, None


class VLLMBackend:
    """Generate with ``vllm.LLM`` from a local checkpoint directory or a model name.

    Args:
        model_path: what ``vllm.LLM(model=...)`` loads.
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        seed: the engine seed (each request also carries its prompt's seed).
        chat_template: apply the tokenizer's chat template to prompts.
        system_prompt: a system message put before each prompt.
        gpu_memory_utilization: the engine's share of the GPU (default: 90% of the free memory).
        kv_cache_bytes: the KV cache size (default: what the share leaves).
        enforce_eager: no CUDA graphs.
        engine_kwargs: further ``vllm.LLM`` arguments (``tensor_parallel_size``, ``max_model_len``...).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "auto",
        seed: int = 0,
        chat_template: bool = True,
        system_prompt: str | None = None,
        gpu_memory_utilization: float | None = None,
        kv_cache_bytes: int | None = None,
        enforce_eager: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise BackendError(
                f"vllm backend: cannot import vllm ({e}); install it on a CUDA machine (make setup-gpu) or use "
                "--backend hf, or --backend openai against a running `vllm serve`"
            ) from None
        self._vllm = vllm
        self.model_path = str(model_path)
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        self.checkpoints_loaded = 1
        kw = {
            "model": self.model_path,
            "dtype": dtype,
            "seed": seed,
            **memory_settings(*_gpu_memory(), gpu_memory_utilization, kv_cache_bytes),
            **(engine_kwargs or {}),
        }
        if enforce_eager:
            kw["enforce_eager"] = True
        self.engine_args = kw
        self.llm = vllm.LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()

    def load_checkpoint(self, model_path: str | Path) -> None:
        """Reload the engine's weights from another checkpoint directory of the same model, in place."""
        path = str(model_path)
        if path == self.model_path:
            return
        if self.llm is None:
            raise BackendError("vllm backend: load_checkpoint after close()")
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": path})
        self.llm.reset_prefix_cache()
        self.model_path = path
        self.checkpoints_loaded += 1

    def _prompt_ids(self, request: PromptRequest) -> list[int]:
        text = render_prompt(
            request.prompt, self.tokenizer, chat_template=self.chat_template, system_prompt=self.system_prompt
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions per request in one ``LLM.generate`` call."""
        prompts = [{"prompt_token_ids": self._prompt_ids(r)} for r in requests]
        sps = [
            self._vllm.SamplingParams(
                n=k, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_new_tokens, seed=r.seed
            )
            for r in requests
        ]
        outputs = self.llm.generate(prompts, sps, use_tqdm=False)
        result: list[list[Generation]] = []
        for out in outputs:
            gens = [
                Generation(o.text, "length" if o.finish_reason == "length" else "stop", len(o.token_ids))
                for o in out.outputs
            ]
            result.append(gens)
        return result

    def describe(self) -> dict[str, Any]:
        """Model path, vLLM version, memory settings and chat settings."""
        return {
            "backend": self.name,
            "model": self.model_path,
            "vllm": getattr(self._vllm, "__version__", "?"),
            "gpu_memory_utilization": self.engine_args.get("gpu_memory_utilization"),
            "kv_cache_memory_bytes": self.engine_args.get("kv_cache_memory_bytes"),
            "chat_template": self.chat_template,
            "system_prompt": self.system_prompt,
        }

    def close(self) -> None:
        """Shut the engine down and free its GPU memory."""
        if self.llm is None:
            return
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
