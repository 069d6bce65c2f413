"""Throughput of the ``llm_judge`` reward through the scoring path, and what its disk cache saves.

Measures, side by side in one run, with the same rows and rubric:

1. requests/s and p50/p99 latency per judged sample at ``max_concurrency`` 1, 4 and 16 (the baseline is
   concurrency 1), against two local servers:
   * ``model``: the OpenAI-compatible test server (``tests/evals/oai_server.py``) serving a tiny random-init
     transformers model (built from a config, nothing downloaded). It generates one request at a time, so it
     shows what concurrency buys when the server is the bottleneck;
   * ``stub``: an HTTP server on 127.0.0.1 that answers every request with a fixed verdict after a fixed delay
     (``--stub-delay-ms``, default 50), many at once, like a remote endpoint with spare capacity; it shows what
     the client and the scoring path can overlap;
2. the cache hit speed-up: the same rows scored again with the disk cache warm (no requests), as the ratio of
   wall time cold / warm.

Latency is the judge's own time per sample (``Score.info["latency_s"]``: request, retries, parsing). Pass
``--base-url URL --model NAME`` to measure any other server instead (a llama.cpp or vLLM server, say).

    OMP_NUM_THREADS=1 python benchmarks/judge_throughput.py [--rows 48] [--max-tokens 16] [--stub-delay-ms 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from harness.scoring import ScoringSession, percentile

ROOT = Path(__file__).resolve().parents[1]
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}a:{% endif %}")


def stub_server(delay_s: float) -> ThreadingHTTPServer:
    """An OpenAI-compatible stub: ``VERDICT: yes`` after ``delay_s`` seconds, any number of requests at once."""
    reply = json.dumps({"model": "stub", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Matches.\nVERDICT: yes"}}], "usage": {"prompt_tokens": 200,
                                                                            "completion_tokens": 5}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    class Server(ThreadingHTTPServer):
        request_queue_size = 128  # the default backlog of 5 drops connections at 16 at once (a 1 s SYN retry)
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def model_server(root: Path) -> tuple[subprocess.Popen, str]:
    from trainer.toy import char_tokenizer, tiny_model

    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    tiny_model(len(tok), seed=0).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "evals" / "oai_server.py"), "--model",
                             str(root / "model"), "--port", "0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("LISTENING"):
        proc.kill()
        raise SystemExit(f"model server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def rows(n: int, tag: str) -> Iterator[tuple[dict[str, Any], str]]:
    for i in range(n):
        yield {"id": f"{tag}{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i)}, f"It is \\boxed{{{2 * i}}}."


def run(url: str, model: str, conc: int, n: int, tag: str, cache_dir: Path, max_tokens: int) -> dict[str, float]:
    spec = {"name": "llm_judge", "params": {"base_url": url, "model": model, "max_concurrency": conc,
                                            "max_tokens": max_tokens, "cache_dir": str(cache_dir), "timeout": 120}}
    samples, completions = zip(*rows(n, tag), strict=True)
    with ScoringSession([spec], timeout=600, cache=False) as session:
        t0 = time.perf_counter()
        res = session.score(list(samples), list(completions))
        wall = time.perf_counter() - t0
    scores = res.scores["llm_judge"]
    lat = [float(s.info.get("latency_s", 0.0)) for s in scores]
    statuses = sorted({s.status for s in scores})
    return {"wall": wall, "rps": n / wall, "p50": percentile(lat, 50) or 0.0, "p99": percentile(lat, 99) or 0.0,
            "statuses": ",".join(statuses)}  # type: ignore[dict-item]  # one text field among the numbers


def measure(label: str, url: str, model: str, n: int, max_tokens: int, tmp: Path) -> None:
    base = None
    for conc in (1, 4, 16):
        r = run(url, model, conc, n, f"{label}{conc}-", tmp / f"cache-{label}-{conc}", max_tokens)
        base = base or r["rps"]
        print(f"{label:<5} concurrency {conc:>2}: {r['rps']:7.1f} requests/s  p50 {1000 * r['p50']:7.1f} ms  "
              f"p99 {1000 * r['p99']:7.1f} ms  ({r['rps'] / base:.2f}x concurrency 1; {n} rows, {r['statuses']})")
    cold = run(url, model, 4, n, f"{label}c-", tmp / f"cache-{label}-hit", max_tokens)
    warm = run(url, model, 4, n, f"{label}c-", tmp / f"cache-{label}-hit", max_tokens)
    print(f"{label:<5} cache: cold {cold['wall']:.3f} s, warm {warm['wall']:.3f} s for {n} rows: "
          f"{cold['wall'] / warm['wall']:.0f}x faster from the disk cache ({warm['rps']:.0f} scores/s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--stub-delay-ms", type=float, default=50.0)
    ap.add_argument("--base-url", help="measure this server instead of the local ones")
    ap.add_argument("--model", default="tiny-test-model")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.base_url:
            measure("given", args.base_url, args.model, args.rows, args.max_tokens, tmp)
            return
        httpd = stub_server(args.stub_delay_ms / 1000)
        try:
            measure("stub", f"http://127.0.0.1:{httpd.server_address[1]}/v1", "stub", args.rows,
                    args.max_tokens, tmp)
        finally:
            httpd.shutdown()
        proc, url = model_server(tmp)
        try:
            measure("model", url, args.model, args.rows, args.max_tokens, tmp)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
