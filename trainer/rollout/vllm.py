"""vLLM rollout backend, colocated: the vLLM engine shares the GPU (and the process) with the trainer.

Written against vLLM's documented offline API (``vllm.LLM``, ``SamplingParams``, token-id prompts) as of vLLM
0.10-0.11, and it cannot be exercised on a machine without a CUDA GPU: it has not been run against a real
vLLM. A test checks its wiring against a fake ``vllm`` module. How it works:

* the engine is built once from the policy's weights (a temporary ``save_pretrained`` copy, so in-memory and
  toy models work too) with ``distributed_executor_backend="external_launcher"``: the engine runs inside this
  process (one engine per rank under torchrun), so the model's weights are reachable for updates;
* :meth:`VLLMRollout.generate` sends token-id prompts (truncated here to ``max_prompt_length``) with
  ``SamplingParams(n=G, ...)``; ``finish_reason == "length"`` marks a truncated completion;
* :meth:`VLLMRollout.sync_weights` streams ``named_parameters()`` into the engine's model with ``load_weights``
  after every optimizer step and resets the prefix cache, so the next batch is sampled on-policy.

Not covered: LoRA adapters (merge them first), server mode, sleep mode, tensor parallelism.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Sequence

import torch

from harness.errors import ConfigError
from trainer.rollout.base import RolloutBatch, SamplingConfig, left_pad, right_pad

__all__ = ["VLLMRollout"]

log = logging.getLogger(__name__)


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise ConfigError("trainer.backend=vllm: the vllm package is not installed (pip install vllm on a CUDA "
                          "machine), or use backend: hf") from None
    return vllm


class VLLMRollout:
    """Sample with a colocated vLLM engine and keep its weights equal to the policy's.

    Args:
        model: the policy being trained (a transformers model).
        tokenizer: its tokenizer.
        max_prompt_length: prompts are cut to their last ``max_prompt_length`` tokens.
        max_completion_length: the engine's length budget.
        gpu_memory_utilization: the share of GPU memory vLLM may take (the trainer needs the rest).
        seed: sampling seed of the engine.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_prompt_length: int, max_completion_length: int,
                 gpu_memory_utilization: float = 0.3, seed: int = 0) -> None:
        vllm = _import_vllm()
        if hasattr(model, "peft_config"):
            raise ConfigError("trainer.backend=vllm does not take LoRA adapters; use backend: hf with trainer.lora")
        self.model, self.tokenizer = model, tokenizer
        self.max_prompt_length = max_prompt_length
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                     ("MASTER_PORT", "29531")):
            os.environ.setdefault(k, v)  # external_launcher reads the torchrun variables
        self._tmp = tempfile.TemporaryDirectory(prefix="vllm-policy-")
        model.save_pretrained(self._tmp.name)
        tokenizer.save_pretrained(self._tmp.name)
        dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
        self.llm = vllm.LLM(
            model=self._tmp.name, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_prompt_length + max_completion_length, distributed_executor_backend="external_launcher",
            seed=seed + int(os.environ["RANK"]), enable_prefix_caching=True,
        )
        self._vllm = vllm

    def sync_weights(self) -> None:
        """Copy the policy's current parameters into the engine and drop cached prefixes."""
        engine_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                engine_model.load_weights([(name, param.data)])
        self.llm.reset_prefix_cache()

    def generate(self, prompts: Sequence[str], n: int, sampling: SamplingConfig) -> RolloutBatch:
        """Sample ``n`` completions per prompt; rows are group-major."""
        ids = [list(self.tokenizer(p, add_special_tokens=False)["input_ids"])[-self.max_prompt_length:] for p in prompts]
        params = self._vllm.SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p,
                                           max_tokens=sampling.max_new_tokens)
        outs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        rows, truncated, prompt_rows = [], [], []
        for p_ids, out in zip(ids, outs):
            for c in out.outputs:
                rows.append(list(c.token_ids))
                truncated.append(c.finish_reason == "length")
                prompt_rows.append(p_ids)
        prompt_ids, prompt_mask = left_pad(prompt_rows, self.pad_id)
        completion_ids, completion_mask = right_pad(rows, self.pad_id)
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True)
        return RolloutBatch(prompt_ids, prompt_mask, completion_ids, completion_mask, torch.tensor(truncated), texts)
