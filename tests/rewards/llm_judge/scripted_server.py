"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for the judge's failure tests (a thread of the test).

Each POST to ``/v1/chat/completions`` takes the next action of the script (then the default action): answer
with a chat reply, an HTTP status with headers, a raw body, sleep first, close the connection without a reply,
or hold until the test releases it; a ``responder`` makes the reply text from the
request. The server counts requests, in-flight requests and the maximum in flight,
and keeps each request's headers and body so tests can check what the client sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat_reply(text: str, *, model: str = "scripted", prompt_tokens: int = 11, completion_tokens: int = 7) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


@dataclass
class Action:
    kind: str = "reply"  # reply | status | raw | close | hold
    text: str = "Looks right.\nVERDICT: yes"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    sleep: float = 0.0


class ScriptedServer:
    def __init__(self) -> None:
        self.script: list[Action] = []
        self.default = Action()
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()
        self.responder: Callable[[dict], str] | None = None  # reply text from the request body, for "reply" actions
        self.lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, headers: dict[str, str], body: dict) -> Action:
        with self.lock:
            self.requests.append({"headers": headers, "body": body})
            self.times.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.script.pop(0) if self.script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw or b"{}")
                action = server._next(dict(self.headers), body)
                if action.kind == "reply" and server.responder is not None:
                    action = Action(text=server.responder(body))
                try:
                    self._act(action)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeouts)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _act(self, a: Action) -> None:
                if a.kind == "hold":
                    server.release.wait(60)
                time.sleep(a.sleep)
                if a.kind == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)  # no status line at all
                    return
                if a.kind in ("reply", "hold"):
                    data, status = json.dumps(chat_reply(a.text)).encode(), 200
                elif a.kind == "status":
                    data, status = json.dumps({"error": {"message": f"scripted {a.status}"}}).encode(), a.status
                else:
                    data, status = a.body, a.status
                self.send_response(status)
                for k, v in a.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
