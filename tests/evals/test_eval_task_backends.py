"""Stop strings and prompts reach the backends exactly: the hf backend on the tiny random-init model (a real
transformers model built from a config, see conftest), and the openai backend against a small HTTP server in this
test process that records every request body and answers with a fixed text (the reply content does not matter to
what is checked: what was sent)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evals.backends import PromptRequest, SamplingParams
from evals.backends.hf import HFBackend
from evals.backends.openai import OpenAIBackend
from evals.backends.vllm import sampling_kwargs

FEWSHOT = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "1 + 1 = ?"},
    {"role": "assistant", "content": "2"},
    {"role": "user", "content": "2 + 5 = ?"},
]
PLAIN = "Question: 1 + 1 = ?\nAnswer: 2\n\nQuestion: 2 + 5 = ?\nAnswer:"


def _first_position(text: str, start: int) -> tuple[str, int]:
    """A 2-character stop string whose first occurrence in ``text`` is at or after ``start``."""
    for i in range(start, len(text) - 1):
        s = text[i : i + 2]
        if text.find(s) == i:
            return s, i
    raise AssertionError(f"no fresh 2-character string in {text!r}")


def test_hf_stop_string_cuts_the_text_and_ends_generation(tiny_model_dir: Path) -> None:
    be = HFBackend(tiny_model_dir, chat_template=False)
    free_params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=40, seed=0)
    for seed in range(50):  # a prompt seed whose sample runs to the limit (the model is random: most do)
        req = PromptRequest("p", "12 + 3 =", seed)
        free = be.generate([req], 1, free_params)[0][0]
        if free.finish_reason == "length":
            break
    assert free.finish_reason == "length" and len(free.text) >= 20, free  # the control: no stop, runs to the limit
    stop, at = _first_position(free.text, 8)
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=40, seed=0, stop=(stop,))
    cut = be.generate([req], 1, params)[0][0]
    assert cut.text == free.text[:at]  # the same sample, cut before the stop string (which is not kept)
    assert cut.finish_reason == "stop"
    assert cut.tokens is not None and cut.tokens <= at + len(stop) + 1 < 40  # generation stopped there


def test_hf_stop_strings_match_the_generated_text_only(tiny_model_dir: Path) -> None:
    """A stop string spanning the prompt's end and the first generated token does not stop (lm-eval's and the
    OpenAI API's rule; transformers' StopStringCriteria stops there and leaves a one-token completion)."""
    be = HFBackend(tiny_model_dir, chat_template=False)
    req = PromptRequest("p", "12 + 3 =", 5)
    free = be.generate([req], 1, SamplingParams(1.0, 1.0, 20, 0))[0][0]
    stop = "=" + free.text[0]  # the prompt's last character and the first generated one
    got = be.generate([req], 1, SamplingParams(1.0, 1.0, 20, 0, (stop,)))[0][0]
    at = free.text.find(stop)
    assert got.text == (free.text[:at] if at >= 0 else free.text)
    assert len(got.text) > 1, got


def test_hf_stop_applies_per_sequence_in_a_batch(tiny_model_dir: Path) -> None:
    be = HFBackend(tiny_model_dir, chat_template=False, batch_size=2)
    reqs = [PromptRequest("a", "12 + 3 =", 7), PromptRequest("b", "hello", 7)]
    base = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=30, seed=0)
    free = be.generate(reqs, 2, base)
    stop, _ = _first_position(free[0][0].text, 5)
    got = be.generate(reqs, 2, SamplingParams(1.0, 1.0, 30, 0, (stop,)))
    for row_free, row_cut in zip(free, got, strict=True):
        for f, c in zip(row_free, row_cut, strict=True):
            at = f.text.find(stop)
            assert c.text == (f.text[:at] if at >= 0 else f.text)
            assert stop not in c.text
    assert got[0][0].finish_reason == "stop"


class _Recorder:
    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()


def _handler(rec: _Recorder, reply_text: str) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:
            pass

        def _send(self, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"data": [{"id": "recorder"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with rec.lock:
                rec.bodies.append((self.path, body))
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            if self.path.endswith("/chat/completions"):
                choice["message"] = {"role": "assistant", "content": reply_text}
            else:
                choice["text"] = reply_text
            self._send({"choices": [choice], "usage": {"completion_tokens": 9}})

    return H


@pytest.fixture()
def recorder() -> Iterator[tuple[str, _Recorder]]:
    rec = _Recorder()
    # the reply ignores `stop` (as some servers do): the client must cut it
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec, "7\n\nQuestion: 3 + 3 = ?"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", rec
    finally:
        server.shutdown()
        server.server_close()


def test_openai_sends_stop_fewshot_messages_and_plain_text_exactly(recorder: tuple[str, _Recorder]) -> None:
    url, rec = recorder
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=32, seed=3, stop=("\n\n", "Question:"))
    chat = OpenAIBackend(url, chat_template=True, max_retries=0)
    got = chat.generate([PromptRequest("c", FEWSHOT, 11)], 2, params)
    plain = OpenAIBackend(url, chat_template=False, max_retries=0)
    got_plain = plain.generate([PromptRequest("p", PLAIN, 11)], 1, params)
    chats = [b for path, b in rec.bodies if path == "/v1/chat/completions"]
    texts = [b for path, b in rec.bodies if path == "/v1/completions"]
    assert len(chats) == 2 and len(texts) == 1
    for b in chats:
        assert b["messages"] == FEWSHOT  # the few-shot turns and the task's system prompt, unchanged
        assert b["stop"] == ["\n\n", "Question:"] and b["max_tokens"] == 32 and b["temperature"] == 0.0
    assert sorted(b["seed"] for b in chats) == [11, 12]
    assert texts[0]["prompt"] == PLAIN and texts[0]["stop"] == ["\n\n", "Question:"] and "messages" not in texts[0]
    for g in [*got[0], *got_plain[0]]:
        assert g.text == "7" and g.finish_reason == "stop"  # cut at the first stop string, not "length"


def test_openai_sends_no_stop_field_without_stop_strings(recorder: tuple[str, _Recorder]) -> None:
    url, rec = recorder
    OpenAIBackend(url, chat_template=False, max_retries=0).generate(
        [PromptRequest("p", "x", 0)], 1, SamplingParams(0.0, 1.0, 4, 0)
    )
    assert "stop" not in rec.bodies[-1][1]


def test_vllm_sampling_params_carry_the_stop_strings() -> None:
    kw = sampling_kwargs(SamplingParams(0.6, 0.95, 64, 0, ("\n\n",)), 4, 99)
    assert kw == {"n": 4, "temperature": 0.6, "top_p": 0.95, "max_tokens": 64, "seed": 99, "stop": ["\n\n"]}
    assert "stop" not in sampling_kwargs(SamplingParams(0.6, 0.95, 64, 0), 4, 99)


class _StrictAPI(BaseHTTPRequestHandler):
    """Stands in for OpenAI's remote API on what matters here: a request with more than 4 ``stop`` strings is refused
    with HTTP 400 (the API's error body), and the reply is cut at the first stop string that was sent (it is not
    kept). It answers every prompt with :data:`_STRICT_REPLY`."""

    bodies: list[dict[str, Any]] = []

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _send(self, code: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"data": [{"id": "strict-api"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.bodies.append(body)
        stop = body.get("stop") or []
        if len(stop) > 4:
            message = (
                "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with "
                f"length {len(stop)} instead."
            )
            self._send(400, {"error": {"message": message, "type": "invalid_request_error", "param": "stop"}})
            return
        text, reason = _STRICT_REPLY, "length"
        hits = [i for i in (text.find(s) for s in stop) if i >= 0]
        if hits:
            text, reason = text[: min(hits)], "stop"
        self._send(200, {"choices": [{"index": 0, "text": text, "finish_reason": reason}], "usage": {}})


#: A completion holding humaneval's 5th plain stop string ("\nprint") before its 2nd ("\ndef").
_STRICT_REPLY = "    return sorted(xs)\nprint(f([2, 1]))\ndef g():\n    pass"


def test_openai_sends_at_most_4_stop_strings_and_cuts_at_the_rest() -> None:
    """humaneval has 5 plain stop strings; the API takes 4: the first 4 go in ``stop``, the 5th cuts the reply here."""
    from evals.task_run import get_tasks

    [task] = get_tasks("humaneval")
    stop = tuple(task.generation.stop_for(False))
    assert len(stop) == 5 and stop[4] == "\nprint"
    _StrictAPI.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StrictAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        be = OpenAIBackend(f"http://127.0.0.1:{server.server_address[1]}/v1", chat_template=False, max_retries=0)
        params = SamplingParams(0.0, 1.0, 64, 0, stop)
        [[got]] = be.generate([PromptRequest("HumanEval/0", "def f(xs):\n", 0)], 1, params)
    finally:
        server.shutdown()
        server.server_close()
    [body] = _StrictAPI.bodies
    assert body["stop"] == list(stop[:4])
    # the server stopped at "\ndef" (sent); the client cut earlier, at "\nprint" (not sent)
    assert got.text == "    return sorted(xs)" and got.finish_reason == "stop"


# --- through a task: few-shot prompts, the chat template on and off, and the task's stop strings ---------------

GSM8K_ROWS = [
    {"question": f"Ann has {a} pens and gets {b} more. How many pens?", "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}
    for a, b in [(3, 4), (10, 5), (7, 8), (2, 9), (6, 6)]
]
CHAT_Q = "Question: {question}\nSolve it step by step and end with '#### <number>'."


def _expected_plain(prompt: str) -> str:
    """The plain few-shot text for ``prompt``, rebuilt from the rows: the shots in the order they appear in it."""
    *shots, own = sorted(
        (r for r in GSM8K_ROWS if f"Question: {r['question']}" in prompt), key=lambda r: prompt.index(r["question"])
    )
    assert len(shots) == 2
    return "\n\n".join(
        [f"Question: {r['question']}\nAnswer: {r['answer']}" for r in shots] + [f"Question: {own['question']}\nAnswer:"]
    )


def _check_chat(msgs: list[dict[str, str]], own_question: str) -> None:
    """Two user/assistant shots from other rows, then the row's own question, in the task's chat wording."""
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[-1]["content"] == CHAT_Q.format(question=own_question)
    by_q = {CHAT_Q.format(question=r["question"]): r["answer"] for r in GSM8K_ROWS}
    for user, assistant in zip(msgs[0:4:2], msgs[1:4:2], strict=True):
        assert by_q[user["content"]] == assistant["content"] and user["content"] != msgs[-1]["content"]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("chat", [True, False])
def test_task_prompts_reach_the_hf_model_exactly(tiny_model_dir: Path, tmp_path: Path, chat: bool) -> None:
    from evals.task_run import TaskOverrides, evaluate_task, get_tasks

    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    be = HFBackend(tiny_model_dir, chat_template=chat)
    seen: list[list[int]] = []

    def record(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[1] > 1:  # the prefill: the whole prompt (decoding steps feed one token)
            seen.append(ids[0].tolist())

    be.model.register_forward_pre_hook(record, with_kwargs=True)
    [task] = get_tasks("gsm8k")
    over = TaskOverrides(settings={"max_new_tokens": 3}, num_fewshot=2, chat=chat, data=str(data))
    ev = evaluate_task(task, tiny_model_dir, over, output_dir=tmp_path / "o", backend=be, telemetry=False)
    recs = _records(ev.result.output_dir)
    assert len(seen) == len(recs) == 5
    for rec, ids in zip(recs, seen, strict=True):
        own = GSM8K_ROWS[int(rec["prompt_id"])]["question"]
        if chat:
            _check_chat(rec["prompt"], own)
            text = be.tokenizer.apply_chat_template(rec["prompt"], tokenize=False, add_generation_prompt=True)
            assert isinstance(text, str) and text.startswith("u:Question: ")  # eval_runs.CHAT_TEMPLATE's rendering
        else:
            text = rec["prompt"]
            assert text == _expected_plain(text) and text.endswith(f"Question: {own}\nAnswer:")
        assert ids == be.tokenizer(text, add_special_tokens=False)["input_ids"]  # exactly these tokens
    assert ev.result.results["sampling"]["stop"] == list(task.generation.stop_for(chat))


@pytest.mark.parametrize("chat", [True, False])
def test_task_prompts_and_stop_reach_the_openai_server_exactly(
    recorder: tuple[str, _Recorder], tiny_model_dir: Path, tmp_path: Path, chat: bool
) -> None:
    from evals.task_run import TaskOverrides, evaluate_task, get_tasks

    url, rec = recorder
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    [task] = get_tasks("gsm8k")
    be = OpenAIBackend(url, chat_template=chat, max_retries=0)
    over = TaskOverrides(settings={"max_new_tokens": 5}, num_fewshot=2, chat=chat, data=str(data))
    ev = evaluate_task(task, tiny_model_dir, over, output_dir=tmp_path / "o", backend=be, telemetry=False)
    stop = list(task.generation.stop_for(chat))
    assert stop and len(rec.bodies) == 5
    by_seed = {b["seed"]: b for _, b in rec.bodies}
    for r in _records(ev.result.output_dir):
        body = by_seed[r["seed"]]
        own = GSM8K_ROWS[int(r["prompt_id"])]["question"]
        assert body["stop"] == stop and body["max_tokens"] == 5 and body["temperature"] == 0.0
        if chat:
            assert body["messages"] == r["prompt"]
            _check_chat(body["messages"], own)
        else:
            assert body["prompt"] == r["prompt"] == _expected_plain(body["prompt"])
            assert body["prompt"].endswith(f"Question: {own}\nAnswer:")
    expected_path = "/v1/chat/completions" if chat else "/v1/completions"
    assert {p for p, _ in rec.bodies} == {expected_path}
