"""The vLLM API our code calls exists in the vLLM we install: every keyword the rollout and the evaluator pass to
``vllm.LLM`` is one of its parameters or an ``EngineArgs`` field, and the methods we call are there.

It runs in ``.venv-vllm`` (the CPU build on a machine without a GPU, vLLM 0.33.0 with one), so it runs in
``make test`` everywhere instead of only where vLLM sits beside the main environment.
"""

from __future__ import annotations

from pathlib import Path

from vllm_envs import run_in

SCRIPT = r"""
import dataclasses, inspect
import vllm
from vllm.engine.arg_utils import EngineArgs
from harness.cfg.trainer import VLLMSection
from trainer.rollout.vllm import engine_kwargs

known = set(inspect.signature(vllm.LLM.__init__).parameters) | {f.name for f in dataclasses.fields(EngineArgs)}
for sleep in (True, False):
    kw = engine_kwargs("m", dtype="bfloat16", max_model_len=8, seed=0, settings=VLLMSection(), kv_bytes=1,
                       utilization=0.1, max_num_seqs=1, sleep=sleep)
    assert set(kw) <= known, sorted(set(kw) - known)
assert {"model", "dtype", "seed", "gpu_memory_utilization", "kv_cache_memory_bytes", "enforce_eager"} <= known
vllm.SamplingParams(n=2, temperature=1.0, top_p=1.0, max_tokens=4, logprobs=0, seed=1)
for name in ("sleep", "wake_up", "reset_prefix_cache", "generate", "collective_rpc", "get_tokenizer"):
    assert callable(getattr(vllm.LLM, name)), name
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
assert "weights_path" in inspect.signature(GPUModelRunner.reload_weights).parameters
print("vllm api ok", vllm.__version__)
"""


def test_the_keywords_and_methods_we_use_exist_in_the_installed_vllm(vllm_venv: Path) -> None:
    out = run_in(vllm_venv, ["python", "-c", SCRIPT], timeout=300)
    assert "vllm api ok" in out
