"""What the trainer adapters share: spec normalization and turning chat completions into the text scored.

This module does not score anything; the adapters call :func:`harness.score_batch` for that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import ScoringError
from harness.registry import build_reward
from harness.types import RewardSpec

__all__ = ["completion_text", "normalize_specs", "plain"]


def normalize_specs(specs: Sequence[RewardSpec | Mapping[str, Any] | str]) -> list[RewardSpec]:
    """RewardSpecs from specs, dicts or names, each built once so bad names *and values* fail here, at load.

    The scoring path builds process-isolated rewards inside its workers, where a bad parameter value (a regex
    that does not compile) would only show up as an error on every sample; building each factory once here
    makes a misconfigured trainer fail before its first step.

    Raises:
        UnknownRewardError, RewardParameterError: a name, parameter or parameter value the reward rejects.
        ScoringError: two specs share a name.
    """
    out = []
    for s in specs:
        if isinstance(s, RewardSpec):
            spec = s
        elif isinstance(s, str):
            spec = RewardSpec(name=s)
        else:
            spec = RewardSpec.model_validate(dict(s))
        build_reward(spec.name, spec.params)
        out.append(spec)
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ScoringError(f"reward names must be unique, got {names}")
    if not out:
        raise ScoringError("no reward specs given")
    return out


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}, ...]
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type", "text") == "text"]
        return "".join(str(p) for p in parts)
    return None


def completion_text(completion: Any) -> Any:
    """The text a reward scores: a string as is; for a chat turn list, the last assistant message's content.

    Anything else is returned unchanged, so the scoring path can mark it ``bad_input`` with its type.

    >>> completion_text("plain")
    'plain'
    >>> completion_text([{"role": "assistant", "content": "The answer is 4."}])
    'The answer is 4.'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    '4'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, (list, tuple)) and completion and all(isinstance(m, Mapping) for m in completion):
        assistant = [m for m in completion if m.get("role") == "assistant"]
        text = _content_text((assistant or list(completion))[-1].get("content"))
        if text is not None:
            return text
    return completion


def plain(value: Any) -> Any:
    """Numpy scalars and arrays (as verl and datasets hand them over) become plain Python values."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.startswith("numpy"):
        return tolist()
    return value
