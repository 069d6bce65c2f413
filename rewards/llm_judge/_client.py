"""A small HTTP client for OpenAI-compatible ``/chat/completions``: retries, 429 Retry-After, timeouts.

Standard library only (``urllib``). One call is one request with up to ``retries`` retries:

* connection refused, reset or closed before a reply, and read timeouts: retried with exponential backoff
  (``backoff_s * 2**attempt``, with jitter, at most 10 s);
* HTTP 408, 5xx: retried the same way; HTTP 429: retried after the server's ``Retry-After`` (seconds or an HTTP
  date), or the backoff when it sends none; a ``Retry-After`` beyond ``max_retry_after_s`` ends the call;
* any other HTTP status, a body that is not JSON, or JSON without ``choices[0].message.content``: not retried.

A call that fails raises :class:`JudgeCallError` with ``status`` ``"timeout"`` (the last attempt timed out, or
no time was left for the next one) or ``"error"`` (with the HTTP status code when there was one). ``timeout``
bounds the whole call, its retries and their waits included (or a ``deadline`` the caller passes, which may span
several calls): each attempt's socket operations (connect, send, each read) get the time left, and a retry whose
wait would end past the deadline is not made. At most ``max_concurrency`` calls are in flight at once per
client.

The API key is held in memory only, sent as a Bearer token, and never put in a message, a repr or an error.
Streaming, tools and logprobs are not used.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatClient", "ChatReply", "JudgeCallError"]

_RETRY_STATUS = frozenset({408, 500, 502, 503, 504})
_BODY_CHARS = 300


@dataclass(frozen=True)
class ChatReply:
    """The judge's reply to one request."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)  # input_tokens, output_tokens (GenAI names)
    model: str | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    attempts: int = 1


class JudgeCallError(Exception):
    """A request that failed after its retries; ``status`` is ``"timeout"`` or ``"error"``."""

    def __init__(self, status: str, reason: str, *, http_status: int | None = None, attempts: int = 1) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.http_status = http_status
        self.attempts = attempts


class _Retry(Exception):
    def __init__(self, status: str, reason: str, http_status: int | None = None, wait: float | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.http_status, self.wait = status, reason, http_status, wait


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds to wait: delta-seconds or an HTTP date; None when absent or unreadable.

    >>> retry_after_seconds("3"), retry_after_seconds(None), retry_after_seconds("soon")
    (3.0, None, None)
    """
    if value is None:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _usage(obj: dict[str, Any]) -> dict[str, int]:
    u = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
    out = {}
    for src, dst in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        v = u.get(src) if isinstance(u, dict) else None
        if isinstance(v, int) and not isinstance(v, bool):
            out[dst] = v
    return out


class ChatClient:
    """POST chat requests to ``{base_url}/chat/completions``.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer``; empty sends no header (local servers).
        timeout: seconds for one call, its retries and their waits included.
        retries: retries after the first attempt.
        max_concurrency: calls in flight at once through this client.
        backoff_s: the first retry's wait; doubled each retry.
        max_retry_after_s: the longest ``Retry-After`` honoured; a longer one ends the call as an error.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "",
        timeout: float = 25.0,
        retries: int = 3,
        max_concurrency: int = 8,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 60.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.timeout, self.retries = float(timeout), int(retries)
        self.backoff_s, self.max_retry_after_s = float(backoff_s), float(max_retry_after_s)
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.max_concurrency = max(1, int(max_concurrency))
        self._slots = threading.BoundedSemaphore(self.max_concurrency)

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"ChatClient({self.url!r}, timeout={self.timeout}, retries={self.retries})"

    def chat(self, body: dict[str, Any], deadline: float | None = None) -> ChatReply:
        """Send ``body`` (model, messages, sampling parameters); the reply, or :class:`JudgeCallError`.

        ``deadline`` (``time.monotonic()`` seconds) ends the call, retries included; default: ``timeout`` from now.
        """
        data = json.dumps(body).encode("utf-8")
        with self._slots:
            t0 = time.perf_counter()
            end = time.monotonic() + self.timeout if deadline is None else deadline
            for attempt in range(self.retries + 1):
                left = end - time.monotonic()
                if left <= 0:
                    raise JudgeCallError(
                        "timeout",
                        f"no time left for a request to {self.url} within {self.timeout:g} s",
                        attempts=attempt,
                    )
                try:
                    reply = self._once(data, left)
                except _Retry as r:
                    wait = r.wait if r.wait is not None else self._backoff(attempt)
                    out_of_time = time.monotonic() + wait >= end
                    if attempt >= self.retries or out_of_time:
                        why = (
                            f"no time left for a retry within {self.timeout:g} s; "
                            if out_of_time and attempt < self.retries
                            else ""
                        )
                        raise JudgeCallError(
                            r.status,
                            f"{r.reason} ({why}after {attempt + 1} attempts)",
                            http_status=r.http_status,
                            attempts=attempt + 1,
                        ) from None
                    time.sleep(wait)
                    continue
                except JudgeCallError as e:
                    e.attempts = attempt + 1
                    raise
                return ChatReply(
                    reply["text"],
                    reply["usage"],
                    reply["model"],
                    reply["finish_reason"],
                    time.perf_counter() - t0,
                    attempt + 1,
                )
        raise AssertionError("unreachable: the loop returns or raises")

    def _backoff(self, attempt: int) -> float:
        return min(10.0, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)

    def _once(self, data: bytes, timeout: float) -> dict[str, Any]:
        req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise self._http_error(e) from None
        except TimeoutError as e:
            raise _Retry("timeout", f"no reply from {self.url} within {timeout:.3g} s ({e})") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise _Retry("timeout", f"no reply from {self.url} within {timeout:.3g} s") from None
            raise _Retry("error", f"cannot reach {self.url}: {e.reason}") from None
        except (http.client.HTTPException, ConnectionError, OSError) as e:
            raise _Retry("error", f"connection to {self.url} failed: {type(e).__name__}: {e}") from None
        return self._parse(raw)

    def _http_error(self, e: urllib.error.HTTPError) -> Exception:
        try:
            body = e.read()[:_BODY_CHARS].decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            body = ""
        reason = f"HTTP {e.code} from {self.url}: {body.strip() or e.reason}"
        if e.code == 429:
            wait = retry_after_seconds(e.headers.get("Retry-After") if e.headers else None)
            if wait is not None and wait > self.max_retry_after_s:
                return JudgeCallError(
                    "error",
                    f"{reason}; Retry-After {wait:g} s is beyond the {self.max_retry_after_s:g} s this judge waits",
                    http_status=429,
                )
            return _Retry("error", reason, 429, wait)
        if e.code in _RETRY_STATUS:
            return _Retry("error", reason, e.code)
        return JudgeCallError("error", reason, http_status=e.code)

    def _parse(self, raw: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(raw)
            choice = obj["choices"][0]
            text = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            snippet = raw[:_BODY_CHARS].decode("utf-8", "replace")
            raise JudgeCallError(
                "error", f"malformed reply from {self.url} ({type(e).__name__}: {e}): {snippet!r}", http_status=200
            ) from None
        if not isinstance(text, str):
            raise JudgeCallError(
                "error", f"reply from {self.url} has non-text content {type(text).__name__}", http_status=200
            )
        return {
            "text": text,
            "usage": _usage(obj),
            "model": obj.get("model"),
            "finish_reason": choice.get("finish_reason"),
        }
