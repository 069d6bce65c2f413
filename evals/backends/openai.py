"""The ``openai`` backend: any OpenAI-compatible HTTP server (``vllm serve``, llama.cpp's server, SGLang, TGI).

With the chat template on, prompts go to ``/chat/completions`` as messages (the server applies the model's
template); off, the rendered text goes to ``/completions``. Each of the ``k`` samples of a prompt is its own
request with ``n=1`` and ``seed = prompt seed + sample index`` (servers differ in how they treat ``n`` and seeds;
this form works on all of them, and reproduces where the server honours seeds). The first :data:`MAX_STOP` stop
strings go in the request's ``stop`` field (OpenAI's API refuses more; humaneval has 5), and the reply is cut at the
first of all of them here (:func:`~evals.backends.base.cut_at_stop`, the hf and vllm backends' one rule), which also
covers servers that ignore the field.

Requests run on a thread pool of ``concurrency``; each has a wall-clock ``timeout``. Connection errors, timeouts,
HTTP 429 and 5xx are retried ``max_retries`` times with exponential backoff (``backoff_s * 2**attempt``). Other
HTTP errors, and running out of retries, raise :class:`BackendError` naming the URL and what to do; finished
prompts are kept by the runner, so the evaluation resumes once the server is back.

Stdlib only (``urllib``); no OpenAI SDK is needed. Streaming, tool calls and logprobs are not used.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from evals.backends.base import Generation, PromptRequest, SamplingParams, cut_at_stop
from evals.errors import BackendError
from harness.data import render_prompt, to_messages

__all__ = ["OpenAIBackend", "MAX_STOP"]

log = logging.getLogger(__name__)

#: Stop strings sent in a request: OpenAI's API answers HTTP 400 to more than 4; the rest are applied to the reply.
MAX_STOP = 4

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class _Retryable(Exception):
    pass


class OpenAIBackend:
    """Sample from an OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name to send; default: the first one the server lists at ``/models``.
        api_key: sent as a Bearer token when given; default: the ``api_key_env`` environment variable.
        concurrency: requests in flight at once.
        timeout: seconds per request.
        max_retries: retries of a retryable failure.
        backoff_s: the first retry delay; doubles each retry.
        chat_template: use ``/chat/completions`` (True) or ``/completions`` with plain text (False).
        system_prompt: a system message put before each prompt.

    Raises:
        BackendError: the server cannot be reached at construction (checked with ``GET /models``).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 4,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        chat_template: bool = True,
        system_prompt: str | None = None,
    ) -> None:
        if not base_url:
            raise BackendError("openai backend needs a server URL (--base-url http://HOST:PORT/v1)")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        self.retries = 0  # retried requests so far, for results.json
        self.model = model or self._first_model()

    # --- HTTP -------------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300]
            if e.code in _RETRY_STATUS:
                raise _Retryable(f"HTTP {e.code} from {url}: {detail}") from None
            raise BackendError(f"openai backend: HTTP {e.code} from {url}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise _Retryable(f"{url}: {type(reason).__name__}: {reason}") from None
        except json.JSONDecodeError as e:
            raise _Retryable(f"{url}: the reply is not JSON: {e}") from None

    def _with_retries(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return self._request(method, path, body)
            except _Retryable as e:
                last = str(e)
                if attempt == self.max_retries:
                    break
                self.retries += 1
                delay = self.backoff_s * (2**attempt)
                log.warning("openai backend: %s; retry %d/%d in %.1f s", last, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        raise BackendError(
            f"openai backend: no answer from the server at {self.base_url} after {self.max_retries + 1} attempt(s) "
            f"(timeout {self.timeout:g} s each): {last}. Is the server running (e.g. `vllm serve MODEL`, "
            "`llama-server -m MODEL.gguf`) and is --base-url right? Finished prompts are saved; rerun to resume."
        )

    def _first_model(self) -> str:
        reply = self._with_retries("GET", "/models")
        models = [m.get("id") for m in reply.get("data", []) if isinstance(m, dict) and m.get("id")]
        if not models:
            raise BackendError(f"openai backend: {self.base_url}/models lists no model; pass --model NAME")
        return str(models[0])

    # --- generation -------------------------------------------------------------------------------------------

    def _one(self, request: PromptRequest, index: int, params: SamplingParams) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": request.seed + index,
            "n": 1,
        }
        if params.stop:
            body["stop"] = list(params.stop[:MAX_STOP])
        if self.chat_template:
            body["messages"] = to_messages(request.prompt, self.system_prompt)
            reply = self._with_retries("POST", "/chat/completions", body)
        else:
            body["prompt"] = render_prompt(request.prompt, None, chat_template=False, system_prompt=self.system_prompt)
            reply = self._with_retries("POST", "/completions", body)
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] if self.chat_template else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"openai backend: unexpected reply from {self.base_url}: {str(reply)[:300]}") from None
        finish = choice.get("finish_reason") or "stop"
        tokens = (reply.get("usage") or {}).get("completion_tokens")
        text, hit = cut_at_stop(text or "", params.stop)  # every stop string: those not sent, and a server that
        # ignores `stop`
        return Generation(text, "stop" if hit or finish != "length" else "length", tokens)

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions per request; requests run ``concurrency`` at a time."""
        with cf.ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai-backend") as pool:
            futures = [[pool.submit(self._one, r, j, params) for j in range(k)] for r in requests]
            try:
                return [[f.result() for f in row] for row in futures]
            except BaseException:
                for row in futures:
                    for f in row:
                        f.cancel()
                raise

    def describe(self) -> dict[str, Any]:
        """Server URL, model name and the request settings."""
        return {
            "backend": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "endpoint": "chat/completions" if self.chat_template else "completions",
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "retries": self.retries,
            "system_prompt": self.system_prompt,
        }

    def close(self) -> None:
        """Nothing to release (connections are per request)."""
