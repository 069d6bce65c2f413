"""evals.evaluate with the hf backend on a tiny random-init model (see conftest), real scoring workers."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from eval_runs import HELDOUT, TRAIN, write_jsonl

from evals import evaluate
from evals.errors import ContaminationError, EvalError, ResumeError
from harness.errors import DataError
from harness.telemetry import iter_spans


def _ckpt(run: Path) -> Path:
    return run / "checkpoints" / "step-000004"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_rewards_come_from_the_saved_config_and_metrics_match_the_samples(run_dir: Path) -> None:
    res = evaluate(_ckpt(run_dir))
    out = run_dir / "eval" / "step-000004"
    assert res.output_dir == out
    saved = json.loads((out / "results.json").read_text())
    assert saved["step"] == 4 and saved["run_id"] == "r1" and saved["k"] == 4
    assert list(saved["rewards"]) == ["evals_contains_answer", "evals_length"]  # the training rewards
    assert saved["rewards"]["evals_length"]["weight"] == 0.0
    assert saved["success"] == {"reward": "evals_contains_answer", "threshold": 1.0}
    assert set(saved["pass@k"]) == {"1", "2", "3", "4"} and set(saved["maj@k"]) == {"1", "2", "3", "4"}
    assert saved["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12, "seed": 0}
    assert saved["versions"]["torch"] and saved["dataset"]["fingerprint"]
    samples = _lines(out / "samples.jsonl")
    assert len(samples) == len(HELDOUT) * 4
    # the reward mean and pass@1 in results.json are what the per-sample scores say
    vals = [s["scores"]["evals_contains_answer"]["value"] for s in samples]
    assert saved["rewards"]["evals_contains_answer"]["mean"] == pytest.approx(sum(vals) / len(vals))
    assert saved["pass@k"]["1"]["value"] == pytest.approx(sum(v >= 1.0 for v in vals) / len(vals))
    lengths = [s["scores"]["evals_length"]["value"] for s in samples]
    assert lengths == [pytest.approx(len(s["completion"]) / 10.0) for s in samples]
    assert all(s["total"] == s["scores"]["evals_contains_answer"]["value"] for s in samples)  # weight 0 left out
    assert saved["contamination"]["checked"] and saved["contamination"]["exact"] == 0
    assert "evals_contains_answer" in res.table() and "pass@1=" in res.table()


def test_same_seed_same_completions_other_seed_differs(run_dir: Path, tmp_path: Path) -> None:
    a = evaluate(_ckpt(run_dir), output_dir=tmp_path / "a", telemetry=False)
    b = evaluate(_ckpt(run_dir), output_dir=tmp_path / "b", telemetry=False)
    ca = [s["completion"] for s in _lines(a.output_dir / "samples.jsonl")]
    cb = [s["completion"] for s in _lines(b.output_dir / "samples.jsonl")]
    assert ca == cb and len(set(ca)) > 1
    from harness.cfg.eval import EvalSection

    c = evaluate(
        _ckpt(run_dir),
        output_dir=tmp_path / "c",
        telemetry=False,
        settings=EvalSection(k=4, temperature=1.0, top_p=1.0, max_new_tokens=12, seed=1, workers=2),
    )
    assert [s["completion"] for s in _lines(c.output_dir / "samples.jsonl")] != ca


def test_eval_span_links_to_the_training_step(run_dir: Path) -> None:
    evaluate(_ckpt(run_dir))
    spans = list(iter_spans(run_dir / "traces.jsonl"))
    train = next(s for s in spans if s["name"] == "train.step")
    ev = next(s for s in spans if s["name"] == "eval.checkpoint")
    assert any(link["span_id"] == train["span_id"] for link in ev.get("links", []))
    rew = next(s for s in spans if s["name"] == "eval.reward/evals_contains_answer")
    assert rew["attributes"]["harness.reward.train_mean"] == pytest.approx(0.75)
    assert "harness.reward.heldout" in rew["attributes"]


def test_contamination_reported_and_fail_on_overlap(run_dir: Path, tmp_path: Path) -> None:
    leaked = write_jsonl(tmp_path / "leaky.jsonl", HELDOUT[:3] + [dict(TRAIN[0], id="leak")])
    res = evaluate(_ckpt(run_dir), leaked, output_dir=tmp_path / "o", telemetry=False)
    c = res.results["contamination"]
    assert c["exact"] == 1 and c["exact_ids"] == ["leak"] and c["examples"][0]["train_id"] == "t0"
    from harness.cfg.eval import EvalSection

    with pytest.raises(ContaminationError, match="1/4 held-out prompts exactly"):
        evaluate(
            _ckpt(run_dir),
            leaked,
            output_dir=tmp_path / "o2",
            telemetry=False,
            settings=EvalSection(k=2, max_new_tokens=4, fail_on_overlap=True),
        )
    assert not (tmp_path / "o2" / "samples.jsonl").exists()  # failed before generating anything


def test_bad_rows_skipped_and_recorded_strict_raises(run_dir: Path, tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(HELDOUT[0]) + "\n" + json.dumps({"id": "x", "answer": "1"}) + "\n{oops\n")
    res = evaluate(_ckpt(run_dir), p, output_dir=tmp_path / "o", telemetry=False, k=2)
    ds = res.results["dataset"]
    assert ds["prompts"] == 1 and ds["skipped_rows"] == 2
    assert ds["row_errors"][0].startswith(f"{p}:2: prompt: missing prompt column")
    from harness.cfg.eval import EvalSection

    with pytest.raises(DataError, match="bad.jsonl:2"):
        evaluate(_ckpt(run_dir), p, output_dir=tmp_path / "o3", telemetry=False, settings=EvalSection(strict=True))


def test_truncation_warning(run_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from harness.cfg.eval import EvalSection

    with caplog.at_level(logging.WARNING, logger="evals.runner"):
        res = evaluate(
            _ckpt(run_dir),
            output_dir=tmp_path / "o",
            telemetry=False,
            settings=EvalSection(k=2, temperature=1.0, top_p=1.0, max_new_tokens=2, workers=2),
        )
    assert res.results["completions"]["truncated_frac"] > 0.5 and res.results["truncation_warning"]
    assert any("hit max_new_tokens=2" in r.getMessage() for r in caplog.records)


def test_resume_with_other_settings_is_refused(run_dir: Path, tmp_path: Path) -> None:
    evaluate(_ckpt(run_dir), output_dir=tmp_path / "o", telemetry=False, k=2)
    with pytest.raises(ResumeError, match="differs in: k"):
        evaluate(_ckpt(run_dir), output_dir=tmp_path / "o", telemetry=False, k=3)
    res = evaluate(_ckpt(run_dir), output_dir=tmp_path / "o", telemetry=False, k=3, resume=False)
    assert res.results["k"] == 3


def test_missing_rewards_and_data_are_clear_errors(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="no rewards to score with"):
        evaluate(tiny_model_dir, tmp_path / "x.jsonl")
    with pytest.raises(EvalError, match="no held-out data"):
        evaluate(tiny_model_dir, None, ["evals_length"])
    with pytest.raises(EvalError, match="checkpoint directory not found"):
        evaluate(tmp_path / "nope", None, ["evals_length"])


def test_plain_model_dir_with_explicit_rewards(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "h.jsonl", HELDOUT[:2])
    res = evaluate(tiny_model_dir, data, ["evals_length"], k=2, output_dir=tmp_path / "o", chat_template=False)
    assert res.results["step"] is None and res.results["contamination"]["checked"] is False
    assert res.results["backend"]["chat_template"] is False
    assert res.results["success"]["reward"] == "evals_length"


class _FailsOnCall:
    """Fault injection: the real hf backend, except that generate call number ``n`` raises BackendError (as
    when a server goes away mid-run)."""

    name = "hf"

    def __init__(self, inner: Any, n: int) -> None:
        self.inner, self.n, self.calls = inner, n, 0

    def generate(self, requests, k, params):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == self.n:
            from evals.errors import BackendError

            raise BackendError("server went away (injected)")
        return self.inner.generate(requests, k, params)

    def describe(self) -> dict:
        return self.inner.describe()

    def close(self) -> None:
        pass


def test_a_backend_failure_keeps_every_batch_generated_before_it(run_dir: Path, tmp_path: Path) -> None:
    from evals.backends.hf import HFBackend
    from evals.errors import BackendError
    from harness.cfg.eval import EvalSection

    settings = EvalSection(k=2, temperature=1.0, top_p=1.0, max_new_tokens=6, workers=2)
    flaky = _FailsOnCall(HFBackend(_ckpt(run_dir)), n=4)
    with pytest.raises(BackendError, match="went away"):
        evaluate(_ckpt(run_dir), settings=settings, backend=flaky, output_dir=tmp_path / "o", telemetry=False)
    kept = _lines(tmp_path / "o" / "samples.jsonl")
    assert sorted({r["prompt_id"] for r in kept}) == ["h0", "h1", "h2"]  # batches 1-3, the 3rd still being scored
    res = evaluate(_ckpt(run_dir), settings=settings, output_dir=tmp_path / "o", telemetry=False)
    assert res.results["timing"]["prompts_resumed"] == 3 and res.results["completions"]["count"] == 12


def test_default_output_places(run_dir: Path, tiny_model_dir: Path) -> None:
    from evals.checkpoint import list_checkpoints, resolve_checkpoint

    assert resolve_checkpoint(_ckpt(run_dir)).default_output == run_dir / "eval" / "step-000004"
    assert resolve_checkpoint(tiny_model_dir).default_output == Path("eval") / "model"  # not inside the model dir
    (run_dir / "checkpoints" / "step-000009.tmp").mkdir()  # a checkpoint being written is not listed
    (run_dir / "checkpoints" / "step-000010").mkdir()  # nor one without weights
    assert list_checkpoints(run_dir) == [_ckpt(run_dir)]


class _RefusesSome:
    """The real hf backend, except that the prompts named in ``refuse`` come back refused, as the vllm backend
    returns a prompt longer than the model's context (``Generation.refused``)."""

    name = "hf"

    def __init__(self, inner: Any, refuse: set[str]) -> None:
        self.inner, self.refuse = inner, refuse

    def generate(self, requests, k, params):  # type: ignore[no-untyped-def]
        from evals.backends import Generation

        todo = [r for r in requests if r.id not in self.refuse]
        made = iter(self.inner.generate(todo, k, params) if todo else [])
        no = Generation.refused("prompt of 900 tokens does not fit the model's context of 512 tokens")
        return [[no] * k if r.id in self.refuse else next(made) for r in requests]

    def describe(self) -> dict:
        return self.inner.describe()

    def close(self) -> None:
        pass


def test_a_prompt_the_backend_refuses_is_unscored_with_the_reason_and_the_rest_go_on(
    run_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from evals.backends.hf import HFBackend
    from harness.cfg.eval import EvalSection

    # batches of 2: h2 and h3 make a batch with nothing to score, h5 shares one with h4
    settings = EvalSection(k=2, temperature=1.0, top_p=1.0, max_new_tokens=6, workers=2, batch_size=2)
    be = _RefusesSome(HFBackend(_ckpt(run_dir)), {"h2", "h3", "h5"})
    with caplog.at_level(logging.WARNING, logger="evals._batches"):
        res = evaluate(_ckpt(run_dir), settings=settings, backend=be, output_dir=tmp_path / "o", telemetry=False)
    recs = _lines(tmp_path / "o" / "samples.jsonl")
    assert len(recs) == 12
    for r in recs:
        if r["prompt_id"] in ("h2", "h3", "h5"):
            assert r["finish_reason"] == "error" and r["completion"] == "" and r["total"] is None
            for s in r["scores"].values():
                assert s["value"] is None and s["status"] == "bad_input"
                assert s["info"]["reason"] == "prompt of 900 tokens does not fit the model's context of 512 tokens"
        else:
            assert r["scores"]["evals_length"]["value"] == pytest.approx(len(r["completion"]) / 10.0)
    assert res.results["completions"]["errors"] == 6
    assert res.results["rewards"]["evals_length"]["scored"] == 6  # h0, h1, h4: never a 0 for the others
    assert "2 prompt(s) left unscored: h2: prompt of 900 tokens" in caplog.text


def test_results_json_is_the_returned_results_byte_for_byte_in_its_key_order(run_dir: Path, tmp_path: Path) -> None:
    res = evaluate(_ckpt(run_dir), output_dir=tmp_path / "out", telemetry=False)
    text = (tmp_path / "out" / "results.json").read_text(encoding="utf-8")
    assert text == json.dumps(res.results, indent=2, sort_keys=False, default=str) + "\n"
    assert json.loads(text) == res.results  # every part is plain JSON: it round-trips unchanged
    assert list(res.results) == [
        *("checkpoint", "step", "run_id", "k", "rewards", "total", "success", "prompts", "pass@k", "avg@k", "maj@k"),
        *("completions", "truncation_warning", "dataset", "sampling", "seeds", "backend", "contamination", "timing"),
        *("versions", "started", "finished", "evaluation"),
    ]
    assert list(res.results["rewards"]["evals_contains_answer"]) == [
        *("weight", "params", "mean", "std", "count", "scored", "statuses", "p50_s", "p99_s", "stderr", "unscored"),
    ]
    first = _lines(tmp_path / "out" / "samples.jsonl")[0]
    assert list(first) == [
        *("prompt_id", "sample_index", "seed", "prompt", "answer", "completion", "finish_reason", "tokens"),
        *("scores", "total"),
    ]
