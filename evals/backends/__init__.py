"""Generation backends of the evaluator: ``hf`` (transformers), ``vllm`` (GPU) and ``openai`` (HTTP server)."""

from evals.backends.base import Backend, Generation, PromptRequest, SamplingParams, prompt_seed
from evals.backends.factory import make_backend

__all__ = ["Backend", "Generation", "PromptRequest", "SamplingParams", "prompt_seed", "make_backend"]
