"""The ``llm_judge`` reward: rubric-based verdicts from any OpenAI-compatible endpoint, cached on disk.

Modules: ``_client`` (HTTP with retries, 429 Retry-After, timeouts), ``_cache`` (crash-safe disk cache of
replies), ``_rubrics`` (built-in templates shipped as package data, user template files), ``_verdict`` (strict
parsing), ``_plugin`` (the registered factory and the :class:`Judge`).
"""

from rewards.llm_judge._cache import DiskCache, default_cache_dir
from rewards.llm_judge._client import ChatClient, ChatReply, JudgeCallError
from rewards.llm_judge._plugin import Judge, aggregate_votes, llm_judge, request_key
from rewards.llm_judge._rubrics import BUILTIN_RUBRICS, Rubric, load_rubric
from rewards.llm_judge._verdict import Scale, Verdict, VerdictError, parse_scale, parse_verdict

__all__ = [
    "BUILTIN_RUBRICS",
    "ChatClient",
    "ChatReply",
    "DiskCache",
    "Judge",
    "JudgeCallError",
    "Rubric",
    "Scale",
    "Verdict",
    "VerdictError",
    "aggregate_votes",
    "default_cache_dir",
    "llm_judge",
    "load_rubric",
    "parse_scale",
    "parse_verdict",
    "request_key",
]
