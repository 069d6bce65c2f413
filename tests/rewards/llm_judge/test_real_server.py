"""The judge against a real OpenAI-compatible server process: the evaluator tests' ``oai_server.py`` serving a
tiny random-init transformers model (built from a config, nothing downloaded; its replies are gibberish, so its
verdicts are mostly parse errors: the point is the path). Requests are counted at the server: a second run
answers from the disk cache and sends none. The API key never appears in any file a run writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from eval_runs import served

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
KEY = "sk-judge-secret-4f1c9e27b"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}a:{% endif %}"
)
ROWS = [
    {
        "id": f"r{i}",
        "prompt": f"What is {i} + {i + 1}?",
        "answer": str(2 * i + 1),
        "completion": f"{i} + {i + 1} = \\boxed{{{2 * i + 1 if i % 2 else 2 * i}}}",
    }
    for i in range(8)
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from trainer.toy import char_tokenizer, tiny_model

    model_dir = tmp_path_factory.mktemp("tiny-judge")
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    tiny_model(len(tok), seed=0).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    with served(model_dir) as base:
        yield base


def requests_served(base: str) -> int:
    req = urllib.request.Request(base.replace("/v1", "/_control"), data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return int(json.loads(r.read())["requests"])


def _score(run: Path, server: str, out: str) -> list[dict]:
    judge = {
        "base_url": server,
        "model": "tiny-test-model",
        "api_key_env": "JUDGE_TEST_KEY",
        "max_tokens": 24,
        "timeout": 100,  # below --timeout 120: the judge's own limit must end first
        "max_concurrency": 4,
        "cache_dir": str(run / "judge-cache"),
    }
    args = [
        sys.executable,
        "-m",
        "harness.cli",
        "score",
        "--reward",
        "math",
        "--reward",
        "llm_judge=0",
        "--input",
        str(run / "in.jsonl"),
        "--output",
        str(run / out),
        "--workers",
        "1",
        "--timeout",
        "120",
    ]
    for k, v in judge.items():
        args += ["--param", f"llm_judge.{k}={v}"]
    env = dict(os.environ, JUDGE_TEST_KEY=KEY, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    with open(run / f"{out}.log", "w") as log:
        done = subprocess.run(args, env=env, cwd=run, stdout=log, stderr=subprocess.STDOUT, timeout=600)
    assert done.returncode == 0, (run / f"{out}.log").read_text()
    return [json.loads(x) for x in (run / out).read_text().splitlines()]


def test_score_run_twice_second_from_cache_and_the_key_is_nowhere(server: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    before = requests_served(server)
    first = _score(run, server, "out1.jsonl")
    sent = requests_served(server) - before  # the server counts generation requests only
    assert sent == len(ROWS), f"{sent} judge requests for {len(ROWS)} rows"
    statuses = [r["scores"]["llm_judge"]["status"] for r in first]
    assert set(statuses) <= {"ok", "error"}, statuses
    for r in first:
        s = r["scores"]["llm_judge"]
        if s["status"] != "ok":
            assert s["value"] is None and r["rewards"]["llm_judge"] is None and s["info"]["judge_text"]
        assert s["info"]["usage"]["output_tokens"] > 0
    assert [r["rewards"]["math"] for r in first] == [float(i % 2) for i in range(8)]

    before = requests_served(server)
    second = _score(run, server, "out2.jsonl")
    assert requests_served(server) - before == 0, "the second run sent requests despite the disk cache"
    assert [r["scores"]["llm_judge"]["status"] for r in second] == statuses
    assert all(r["scores"]["llm_judge"]["info"]["cached_votes"] == 1 for r in second)

    files = [p for p in run.rglob("*") if p.is_file()]
    assert len(files) >= len(ROWS) + 4  # cache entries, both outputs and both logs
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_held_out_evaluation_with_math_and_the_judge(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate`` through the same server as generator and judge, with traces on; the key is in no file."""
    from evals import evaluate
    from harness.cfg.eval import EvalSection
    from trainer.toy import char_tokenizer, tiny_model

    monkeypatch.setenv("JUDGE_TEST_KEY", KEY)
    ckpt = tmp_path / "run" / "checkpoints" / "step-000001"
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    tiny_model(len(tok), seed=0).save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    data = tmp_path / "heldout.jsonl"
    data.write_text("".join(json.dumps({k: r[k] for k in ("id", "prompt", "answer")}) + "\n" for r in ROWS[:3]))
    judge = {
        "name": "llm_judge",
        "weight": 0.0,
        "params": {
            "base_url": server,
            "model": "tiny-test-model",
            "api_key_env": "JUDGE_TEST_KEY",
            "max_tokens": 16,
            "cache_dir": str(tmp_path / "run" / "judge-cache"),
        },
    }
    settings = EvalSection(
        backend="openai",
        base_url=server,
        k=2,
        temperature=1.0,
        top_p=1.0,
        max_new_tokens=8,
        workers=1,
        api_key_env="JUDGE_TEST_KEY",
    )
    res = evaluate(ckpt, data, ["math", judge], settings=settings, output_dir=tmp_path / "run" / "eval")
    assert set(res.results["rewards"]) == {"math", "llm_judge"}
    recs = [json.loads(x) for x in (res.output_dir / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and all(r["scores"]["llm_judge"]["status"] in ("ok", "error") for r in recs)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.name == "results.json" for p in files)
    assert [str(p) for p in files if KEY.encode() in p.read_bytes()] == []
