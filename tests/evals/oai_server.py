"""A small OpenAI-compatible HTTP server over a transformers model, run as its own process by the tests.

Serves ``GET /v1/models``, ``POST /v1/completions`` and ``POST /v1/chat/completions`` (``n``, ``seed``,
``temperature``, ``top_p``, ``max_tokens``; chat prompts go through the tokenizer's chat template). For the
failure tests it also has ``POST /_control`` taking ``{"delay": seconds, "slow_next": n, "fail_next": n}``: the
next ``slow_next`` generation requests sleep ``delay`` seconds first (all of them when ``slow_next`` is -1), the
next ``fail_next`` answer HTTP 503.

Usage: ``python oai_server.py --model DIR [--port 0]``; prints ``LISTENING <port>`` once it accepts requests.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(1)


class State:
    def __init__(self, model_dir: str, name: str) -> None:
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.tok.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.name = name
        self.lock = threading.Lock()  # one generate at a time (the RNG is global)
        self.ctl = threading.Lock()
        self.delay = 0.0
        self.slow_next = 0
        self.fail_next = 0
        self.requests = 0

    def admit(self) -> tuple[bool, float]:
        """(fail?, seconds to sleep) for the next generation request."""
        with self.ctl:
            self.requests += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                return True, 0.0
            if self.slow_next != 0:
                if self.slow_next > 0:
                    self.slow_next -= 1
                return False, self.delay
            return False, 0.0

    def generate(self, text: str, body: dict[str, Any]) -> dict[str, Any]:
        n = int(body.get("n", 1))
        max_tokens = int(body.get("max_tokens", 16))
        temperature = float(body.get("temperature", 1.0))
        enc = self.tok(text, return_tensors="pt", add_special_tokens=False)
        kw: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "num_return_sequences": n,
            "pad_token_id": self.tok.pad_token_id,
        }
        if temperature > 0:
            kw.update(do_sample=True, temperature=temperature, top_p=float(body.get("top_p", 1.0)), top_k=0)
        else:
            kw.update(do_sample=False)
        with self.lock, torch.inference_mode():
            torch.manual_seed(int(body.get("seed", 0)))
            out = self.model.generate(**enc, **kw)[:, enc["input_ids"].shape[1] :].tolist()
        choices, used = [], 0
        for i, row in enumerate(out):
            eos = next((j for j, t in enumerate(row) if t == self.tok.eos_token_id), None)
            toks = row if eos is None else row[:eos]
            used += len(toks) + (eos is not None)
            reason = "stop" if eos is not None or len(row) < max_tokens else "length"
            choices.append(
                {"index": i, "text": self.tok.decode(toks, skip_special_tokens=True), "finish_reason": reason}
            )
        return {"choices": choices, "usage": {"prompt_tokens": enc["input_ids"].shape[1], "completion_tokens": used}}


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:  # keep the test output clean
            pass

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": state.name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/_control":
                with state.ctl:
                    for key in ("delay", "slow_next", "fail_next"):
                        if key in body:
                            setattr(state, key, body[key])
                    self._send(200, {"requests": state.requests})
                return
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            fail, delay = state.admit()
            if fail:
                self._send(503, {"error": {"message": "overloaded (test)"}})
                return
            time.sleep(delay)
            if self.path == "/v1/chat/completions":
                text = str(state.tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True))
            else:
                text = body["prompt"]
            reply = state.generate(text, body)
            if self.path == "/v1/chat/completions":
                for c in reply["choices"]:
                    c["message"] = {"role": "assistant", "content": c.pop("text")}
            try:
                self._send(200, {"id": "cmpl-test", "object": "completion", "model": state.name, **reply})
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", default="tiny-test-model")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    state = State(args.model, args.name)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.daemon_threads = True
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
