"""Generation backends of the evaluator: ``hf`` (transformers), ``vllm`` (GPU), ``openai`` (HTTP server) and
``reference`` (no model: each row's reference solution)."""

from evals.backends.base import Backend, Generation, PromptRequest, SamplingParams, cut_at_stop, prompt_seed
from evals.backends.factory import make_backend

__all__ = ["Backend", "Generation", "PromptRequest", "SamplingParams", "prompt_seed", "cut_at_stop", "make_backend"]
