"""The `eval` section of a run config (owned by the held-out evaluator, :mod:`evals`).

Sampling defaults follow DeepSeek-R1's reporting of avg@k ("pass@1"): temperature 0.6, top-p 0.95, k samples
per prompt. ``max_new_tokens`` defaults to the training run's ``max_completion_length`` when the checkpoint belongs to
a run (so held-out scores are on the training scale), else 1024; the evaluator warns when most completions hit it,
because a limit that is too low silently zeroes scores.

``task`` names benchmark tasks (:mod:`harness.tasks`); a field set explicitly in this section wins over the task's
default for it (``k``, ``temperature``, ``top_p``, ``max_new_tokens``, ``stop``, ``success_reward``,
``success_threshold``, ``num_fewshot``), see :mod:`evals.task_run`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EvalSection", "BackendName"]

BackendName = Literal["hf", "vllm", "openai", "reference"]


class EvalSection(BaseModel):
    """Held-out evaluation settings; command-line flags of ``harness eval`` override them."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(8, ge=1, description="samples per prompt; pass@k and maj@k are reported for every k' <= k")
    backend: BackendName = "hf"
    temperature: float = Field(0.6, ge=0.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    max_new_tokens: int | None = Field(
        None, ge=1, description="default: the run's trainer.max_completion_length, else 1024"
    )
    seed: int = 0
    stop: list[str] = Field(
        default_factory=list, description="strings that end a completion (cut before the first; --gen-kwargs stop=)"
    )
    task: str | list[str] | None = Field(
        None,
        description="named task(s) (harness tasks list) to evaluate when no data is given; a task sets the data, "
        "rewards, prompt and generation defaults; fields set in this section override the task's",
    )
    num_fewshot: int | None = Field(None, ge=0, description="few-shot examples per prompt (default: the task's)")
    batch_size: int = Field(
        1,
        ge=1,
        description="hf: prompts per generate call; >1 is faster, and outputs then "
        "depend on which prompts share a batch (vllm, openai: at least)",
    )
    success_reward: str | None = Field(None, description="reward judged for pass@k/maj@k; default: the first one")
    success_threshold: float = Field(1.0, description="a sample succeeds when that reward is >= this")
    ngram: int = Field(13, ge=1, description="n-gram size of the contamination check")
    fail_on_overlap: bool = False
    strict: bool = Field(False, description="a bad data row is an error instead of being skipped")
    limit: int | None = Field(None, ge=1, description="evaluate only the first N prompts")
    score_timeout: float | None = Field(None, gt=0, description="seconds per reward call (default: the scoring path's)")
    workers: int | None = Field(None, ge=1, description="scoring worker processes")
    device: str = Field("auto", description="hf: cpu, cuda, cuda:1 ... or auto")
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="hf: CPU threads for torch's matmuls; auto: as trainer.threads (harness/threads.py)"
    )
    base_url: str | None = Field(None, description="openai: server base URL, e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(None, description="openai: model name sent to the server; vllm: model path override")
    vllm_gpu_memory_utilization: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="vllm: share of the GPU the engine takes (vLLM checks it against the free "
        "memory at start-up); default: 90% of the memory free at start-up, so it starts beside a training job",
    )
    vllm_kv_cache_bytes: int | None = Field(
        None, ge=1, description="vllm: KV cache size (default: what the memory share leaves)"
    )
    vllm_enforce_eager: bool = Field(False, description="vllm: no CUDA graphs (faster start-up, slower decoding)")
    vllm_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="vllm: engine dtype (auto: vLLM's choice on CUDA, the checkpoint's dtype on CPU)"
    )
    vllm_sync_check: Literal["sampled", "full"] = Field(
        "sampled", description="vllm: check after each checkpoint load (full: every layer; also on with -v)"
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="openai: environment variable holding the API key")
    concurrency: int = Field(4, ge=1, description="openai: requests in flight at once")
    request_timeout: float = Field(120.0, gt=0, description="openai: seconds per request")
    max_retries: int = Field(3, ge=0, description="openai: retries of a failed request, with exponential backoff")
