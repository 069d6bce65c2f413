"""The ``vllm`` backend: offline batched sampling with vLLM's ``LLM`` and ``SamplingParams`` (GPU only).

Written against vLLM's documented offline-inference API: ``LLM(model=..., seed=..., dtype=...)``,
``SamplingParams(n=k, temperature=..., top_p=..., max_tokens=..., seed=...)`` and ``LLM.generate(prompts,
sampling_params)`` returning one ``RequestOutput`` per prompt whose ``outputs`` hold ``text``, ``token_ids`` and
``finish_reason``. Each prompt gets its own ``SamplingParams`` with that prompt's seed, so results do not depend on
batching. vLLM is imported when the backend is built, never at module import.

Not tested here: vLLM needs a CUDA GPU, and this project's tests run on CPU. For a served model, the ``openai``
backend against ``vllm serve`` is the tested path.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from evals.backends.base import Generation, PromptRequest, SamplingParams
from evals.errors import BackendError
from harness.data import render_prompt

__all__ = ["VLLMBackend"]

log = logging.getLogger(__name__)


class VLLMBackend:
    """Generate with ``vllm.LLM`` from a local checkpoint directory or a model name.

    Args:
        model_path: what ``vllm.LLM(model=...)`` loads.
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        seed: the engine seed (each request also carries its prompt's seed).
        chat_template: apply the tokenizer's chat template to prompts.
        system_prompt: a system message put before each prompt.
        engine_kwargs: further ``vllm.LLM`` arguments (``gpu_memory_utilization``, ``tensor_parallel_size``...).
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
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise BackendError(
                f"vllm backend: cannot import vllm ({e}); install it on a CUDA machine (pip install vllm) or use "
                "--backend hf, or --backend openai against a running `vllm serve`"
            ) from None
        self._vllm = vllm
        self.model_path = str(model_path)
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        self.llm = vllm.LLM(model=self.model_path, dtype=dtype, seed=seed, **(engine_kwargs or {}))
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions per request in one ``LLM.generate`` call."""
        texts = [render_prompt(r.prompt, self.tokenizer, chat_template=self.chat_template,
                               system_prompt=self.system_prompt) for r in requests]
        sps = [
            self._vllm.SamplingParams(n=k, temperature=params.temperature, top_p=params.top_p,
                                      max_tokens=params.max_new_tokens, seed=r.seed)
            for r in requests
        ]
        outputs = self.llm.generate(texts, sps, use_tqdm=False)
        result: list[list[Generation]] = []
        for out in outputs:
            gens = [
                Generation(o.text, "length" if o.finish_reason == "length" else "stop", len(o.token_ids))
                for o in out.outputs
            ]
            result.append(gens)
        return result

    def describe(self) -> dict[str, Any]:
        """Model path, vLLM version and chat settings."""
        return {
            "backend": self.name,
            "model": self.model_path,
            "vllm": getattr(self._vllm, "__version__", "?"),
            "chat_template": self.chat_template,
            "system_prompt": self.system_prompt,
        }

    def close(self) -> None:
        """Drop the engine."""
        self.llm = None
