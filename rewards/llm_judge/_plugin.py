"""The ``llm_judge`` reward: a rubric sent to any OpenAI-compatible endpoint, its verdict parsed strictly.

One score is ``votes`` requests (seeds ``0..votes-1``), each answered from the disk cache when the same request
was made before, then parsed (:mod:`._verdict`) and aggregated: ``majority`` (the most common verdict; a tie
gives the mean of the votes) or ``mean``. Failures are unscored, never 0.0: ``timeout`` and ``error`` (the HTTP
status in ``info``) when a request fails after its retries, and also ``error`` (the judge's text in ``info``)
when no vote holds a valid verdict, ``bad_input`` when the row lacks a column the rubric reads.

``Score.info`` carries the verdict, the rationale, latency, token usage (``input_tokens``, ``output_tokens``)
and how many votes came from the cache; when a global OpenTelemetry tracer provider is installed, each score
is a span with GenAI semantic-convention attributes (``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.evaluation.*``). The API key is read from the environment variable named by ``api_key_env`` (a named
variable that is unset or empty fails the load, naming it: requests without the key would only see HTTP 401) and
goes nowhere but the request's Authorization header.

One limit bounds a score: ``timeout`` covers every vote, attempt and retry wait, and must be below the scoring
path's per-call limit (checked when a session loads), so the judge reports its own ``timeout`` or ``error`` with
its attempts instead of the scoring path abandoning the call.

Not covered: a judge can be talked into a verdict by the completion it grades (prompt injection). The rubrics
fence the completion and tell the judge to treat it as data, which lowers the risk and does not remove it;
use a deterministic reward where one exists and check agreement (``harness judge-agreement``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace

from harness.errors import RewardParameterError
from harness.registry import reward
from harness.types import Sample, Score
from rewards.llm_judge._cache import DiskCache, default_cache_dir
from rewards.llm_judge._client import ChatClient, ChatReply, JudgeCallError
from rewards.llm_judge._rubrics import Rubric, RubricFieldMissing, load_rubric
from rewards.llm_judge._verdict import Scale, Verdict, VerdictError, parse_scale, parse_verdict

__all__ = ["Judge", "llm_judge", "request_key", "aggregate_votes"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_TEXT_CHARS = 2000
_KEY_VERSION = 1


def request_key(
    model: str,
    rubric_sha256: str,
    prompt: str,
    temperature: float,
    max_tokens: int,
    seed: int,
    extra_body: Mapping[str, Any] | None = None,
) -> str:
    """The cache key of one judge request: model, rubric text, the rendered fields, sampling parameters (and the
    request's extra fields, when there are any: a constrained reply is another reply)."""
    parts: list[Any] = [_KEY_VERSION, model, rubric_sha256, prompt, float(temperature), int(max_tokens), int(seed)]
    if extra_body:
        parts.append(json.dumps(extra_body, sort_keys=True, default=str))
    payload = json.dumps(parts)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def aggregate_votes(values: Sequence[float], how: str) -> float:
    """``mean``, or ``majority``: the most common value, the mean of all votes when the top count ties.

    >>> aggregate_votes([1.0, 0.0, 1.0], "majority"), aggregate_votes([1.0, 0.0], "majority")
    (1.0, 0.5)
    >>> aggregate_votes([0.25, 0.5, 1.0], "mean")
    0.5833333333333334
    """
    if not values:
        raise ValueError("aggregate_votes: no votes")
    mean = sum(values) / len(values)
    if how == "mean":
        return mean
    counts = Counter(values).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return mean
    return counts[0][0]


@dataclass
class _Votes:
    verdicts: list[Verdict]
    texts: list[str]
    errors: list[str]
    usage: Counter[str]
    cached: int
    model: str | None


class Judge:
    """A configured judge: ``judge(sample, completion) -> Score``. Built by the ``llm_judge`` factory."""

    def __init__(
        self,
        client: ChatClient,
        *,
        model: str,
        rubric: Rubric,
        scale: Scale,
        votes: int = 1,
        aggregate: str = "majority",
        temperature: float = 0.0,
        max_tokens: int = 256,
        cache: DiskCache | None = None,
        tracer: trace.Tracer | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.client, self.model, self.rubric, self.scale = client, model, rubric, scale
        self.votes, self.aggregate = votes, aggregate
        self.temperature, self.max_tokens = temperature, max_tokens
        self.cache = cache
        self.extra_body = dict(extra_body or {})
        self.tracer = tracer or trace.get_tracer("rewards.llm_judge")
        self.max_concurrency = client.max_concurrency  # read by the scoring path to size its thread pool
        # one score (every vote, attempt and retry wait) ends within this; the scoring path checks it is below its own
        self.time_limit_s = client.timeout
        parts = urlsplit(client.url)
        self._server = (parts.hostname or "", parts.port)

    def __call__(self, sample: Sample | Mapping[str, Any], completion: str) -> Score:
        with self.tracer.start_as_current_span(f"llm_judge {self.rubric.name}") as span:
            t0 = time.perf_counter()
            score = self._score(sample, completion)
            span.set_attributes(self._attributes(score, time.perf_counter() - t0))
            return score

    def _score(self, sample: Sample | Mapping[str, Any], completion: str) -> Score:
        if not isinstance(sample, Sample):
            sample = Sample.model_validate(dict(sample))
        row = dict(sample.model_dump(), prompt=sample.prompt_text)
        try:
            prompt = self.rubric.render(row, completion, self.scale.instruction)
        except RubricFieldMissing as e:
            return Score.unscored("bad_input", str(e), rubric=self.rubric.name)
        t0 = time.perf_counter()
        try:
            got = self._ask(prompt, time.monotonic() + self.time_limit_s)
        except JudgeCallError as e:
            return Score.unscored(
                e.status,  # type: ignore[arg-type]  # status is timeout|error
                e.reason,
                http_status=e.http_status,
                attempts=e.attempts,
                rubric=self.rubric.name,
                model=self.model,
                latency_s=time.perf_counter() - t0,
            )
        info: dict[str, Any] = {
            "rubric": self.rubric.name,
            "model": got.model or self.model,
            "latency_s": round(time.perf_counter() - t0, 6),
            "usage": dict(got.usage),
            "cached_votes": got.cached,
            "votes": self.votes,
        }
        if not got.verdicts:
            return Score(
                value=None,
                status="error",  # the judge's reply, not the completion, could not be read: unscored
                info={
                    **info,
                    "reason": f"no valid verdict: {'; '.join(got.errors)}",
                    "judge_text": [t[:_TEXT_CHARS] for t in got.texts],
                },
            )
        value = aggregate_votes([v.value for v in got.verdicts], self.aggregate)
        if got.errors:
            info["unparsed_votes"] = got.errors
        raw = [v.raw for v in got.verdicts]
        info.update(verdict=raw[0] if len(raw) == 1 else raw, rationale=got.verdicts[0].rationale)
        return Score(value=value, status="ok", answer=str(raw[0] if len(raw) == 1 else raw), info=info)

    def _ask(self, prompt: str, deadline: float) -> _Votes:
        out = _Votes([], [], [], Counter(), 0, None)
        for seed in range(self.votes):
            reply = self._reply(prompt, seed, deadline)
            out.cached += reply.attempts == 0
            out.texts.append(reply.text)
            out.usage.update(reply.usage)
            out.model = out.model or reply.model
            try:
                out.verdicts.append(parse_verdict(reply.text, self.scale))
            except VerdictError as e:
                out.errors.append(str(e))
        return out

    def _reply(self, prompt: str, seed: int, deadline: float) -> ChatReply:
        key = request_key(
            self.model, self.rubric.sha256, prompt, self.temperature, self.max_tokens, seed, self.extra_body
        )
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            return ChatReply(
                hit["text"], dict(hit.get("usage", {})), hit.get("model"), hit.get("finish_reason"), 0.0, attempts=0
            )
        body = {
            **self.extra_body,
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": seed,
            "n": 1,
        }
        reply = self.client.chat(body, deadline)
        if self.cache is not None:
            self.cache.put(
                key,
                {"text": reply.text, "usage": reply.usage, "model": reply.model, "finish_reason": reply.finish_reason},
            )
        return reply

    def _attributes(self, score: Score, seconds: float) -> dict[str, Any]:
        info = score.info
        usage = info.get("usage") or {}
        attrs: dict[str, Any] = {
            "openinference.span.kind": "EVALUATOR",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model,
            "gen_ai.request.temperature": float(self.temperature),
            "gen_ai.request.max_tokens": int(self.max_tokens),
            "gen_ai.evaluation.name": self.rubric.name,
            "server.address": self._server[0],
            "harness.judge.rubric_sha256": self.rubric.sha256,
            "harness.judge.status": score.status,
            "harness.judge.latency_s": seconds,
            "harness.judge.votes": self.votes,
            "harness.judge.cached_votes": int(info.get("cached_votes", 0)),
        }
        if self._server[1] is not None:
            attrs["server.port"] = self._server[1]
        if isinstance(info.get("model"), str):
            attrs["gen_ai.response.model"] = info["model"]
        for k in ("input_tokens", "output_tokens"):
            if k in usage:
                attrs[f"gen_ai.usage.{k}"] = int(usage[k])
        if score.value is not None:
            attrs["gen_ai.evaluation.score.value"] = float(score.value)
            attrs["gen_ai.evaluation.score.label"] = str(score.answer)
            attrs["gen_ai.evaluation.explanation"] = str(info.get("rationale", ""))[:_TEXT_CHARS]
        else:
            attrs["error.type"] = score.status if info.get("http_status") is None else str(info["http_status"])
        return attrs


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise RewardParameterError(f"llm_judge: {msg}")


_JUDGE_FIELDS = ("model", "messages", "temperature", "max_tokens", "seed", "n", "stream")


def _check_extra_body(extra_body: Any) -> None:
    if extra_body is None:
        return
    _check(isinstance(extra_body, dict), f"extra_body must be a mapping of request fields, got {extra_body!r}")
    taken = sorted(set(extra_body) & set(_JUDGE_FIELDS))
    _check(not taken, f"extra_body cannot set {', '.join(taken)}: the judge sets those fields itself")
    try:
        json.dumps(extra_body)
    except (TypeError, ValueError) as e:
        raise RewardParameterError(f"llm_judge: extra_body must be JSON: {e}") from None


def _api_key(api_key_env: str | None) -> str:
    """The key from the variable ``api_key_env`` names (which must be set); unnamed: ``$OPENAI_API_KEY`` or none."""
    if api_key_env is None:
        return os.environ.get("OPENAI_API_KEY", "")
    _check(
        isinstance(api_key_env, str) and _ENV_NAME.fullmatch(api_key_env) is not None,
        "api_key_env must be the NAME of an environment variable (letters, digits, underscores), not a key",
    )
    key = os.environ.get(api_key_env, "")
    _check(
        bool(key.strip()),
        f"api_key_env names the environment variable {api_key_env}, which is "
        f"{'empty' if api_key_env in os.environ else 'not set'}; requests would go without a key and fail with "
        f"HTTP 401. Set {api_key_env}, or leave api_key_env out for a server that takes no key",
    )
    return key


@reward("llm_judge", isolation="inline")
def llm_judge(
    *,
    model: str,
    rubric: str = "correctness",
    base_url: str | None = None,
    api_key_env: str | None = None,
    scale: str = "binary",
    votes: int = 1,
    aggregate: str = "majority",
    temperature: float = 0.0,
    max_tokens: int = 256,
    timeout: float = 25.0,
    max_concurrency: int = 8,
    retries: int = 3,
    cache: bool = True,
    cache_dir: str | None = None,
    extra_body: dict[str, Any] | None = None,
) -> Judge:
    """An LLM judge through any OpenAI-compatible endpoint: a rubric's verdict, unscored when the judge fails.

    Built-in rubrics: correctness, hallucination, instruction_following, reasoning_soundness; or a template file.

    Args:
        model: the model name the endpoint serves.
        rubric: a built-in rubric name or the path of a template file (see :mod:`._rubrics`).
        base_url: the API root (``http://host:port/v1``); default ``$OPENAI_BASE_URL``.
        api_key_env: the NAME of the environment variable holding the API key (never the key itself). A variable
            named here must be set and non-empty, or the reward fails to load. Left out: ``$OPENAI_API_KEY`` when
            it is set, else no key (a local server).
        scale: ``binary`` (yes/no) or ``1-N``, normalized to [0, 1].
        votes: requests per score; aggregated by ``aggregate`` (``majority`` or ``mean``).
        temperature, max_tokens: sampling parameters of each request.
        timeout: seconds for one score: every vote, attempt and retry wait. It must be below the scoring
            path's limit per call (``harness score --timeout``, default 30 s), which the session checks at load.
        retries: retries per request, made only while time is left.
        max_concurrency: requests in flight at once.
        cache, cache_dir: the disk cache of replies (default directory: ``$GRPO_HARNESS_JUDGE_CACHE`` or
            ``~/.cache/grpo-harness/llm_judge``).
        extra_body: fields added to every request, for a server's own options, e.g. vLLM's
            ``{"structured_outputs": {"choice": ["VERDICT: yes", "VERDICT: no"]}}`` so a small model can only
            answer with a verdict. They cannot replace the fields the judge sets (model, messages, sampling).

    An endpoint that cannot be reached gives an unscored ``error``, not 0.0:

    >>> from harness import get_reward
    >>> judge = get_reward("llm_judge", model="m", base_url="http://127.0.0.1:9/v1", retries=0, cache=False)
    >>> s = judge({"prompt": "What is 2+3?", "answer": "5"}, "It is 5.")
    >>> s.value, s.status, s.info["rubric"]
    (None, 'error', 'correctness')
    """
    _check(isinstance(model, str) and bool(model.strip()), "model must be a non-empty string")
    url = base_url or os.environ.get("OPENAI_BASE_URL", "")
    _check(
        bool(url) and urlsplit(url).scheme in ("http", "https"),
        "base_url must be an http(s) URL such as http://127.0.0.1:8000/v1 (or set OPENAI_BASE_URL)",
    )
    api_key = _api_key(api_key_env)
    try:
        scale_ = parse_scale(scale)
        rubric_ = load_rubric(rubric)
    except ValueError as e:
        raise RewardParameterError(f"llm_judge: {e}") from None
    _check(aggregate in ("majority", "mean"), f"aggregate must be 'majority' or 'mean', got {aggregate!r}")
    for label, v, lo in (
        ("votes", votes, 1),
        ("max_tokens", max_tokens, 1),
        ("max_concurrency", max_concurrency, 1),
        ("retries", retries, 0),
    ):
        _check(isinstance(v, int) and not isinstance(v, bool) and v >= lo, f"{label} must be an integer >= {lo}")
    _check(isinstance(timeout, (int, float)) and timeout > 0, "timeout must be a positive number of seconds")
    _check(isinstance(temperature, (int, float)) and 0 <= temperature <= 2, "temperature must be in [0, 2]")
    _check_extra_body(extra_body)
    client = ChatClient(
        url,
        api_key=api_key,
        timeout=float(timeout),
        retries=retries,
        max_concurrency=max_concurrency,
    )
    store = DiskCache(cache_dir or default_cache_dir()) if cache else None
    return Judge(
        client,
        model=model,
        rubric=rubric_,
        scale=scale_,
        votes=votes,
        aggregate=aggregate,
        temperature=float(temperature),
        max_tokens=max_tokens,
        cache=store,
        extra_body=extra_body,
    )
