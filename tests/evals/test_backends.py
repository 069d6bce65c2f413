"""Backends: the hf backend on the tiny random-init model (see conftest); the vllm backend's settings against a
stand-in ``vllm`` module and a described platform (CUDA memory settings cannot run here; the real CPU engine runs
in tests/vllm/, and where vLLM is installed one test checks our argument names against its signatures); prompt
seeds."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from evals.backends import PromptRequest, SamplingParams, make_backend, prompt_seed
from evals.backends.hf import HFBackend
from evals.errors import BackendError
from harness.cfg.eval import EvalSection
from harness.vllm_engine import EnginePlatform


def _reqs(*prompts: str) -> list[PromptRequest]:
    return [PromptRequest(f"p{i}", p, prompt_seed(0, f"p{i}")) for i, p in enumerate(prompts)]


def test_hf_is_deterministic_per_prompt_whatever_the_order(tiny_model_dir: Path) -> None:
    be = HFBackend(tiny_model_dir, batch_size=1, chat_template=False)
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=10, seed=0)
    a, b = _reqs("12 + 3 =", "hello there")
    ab = be.generate([a, b], 3, params)
    ba = be.generate([b, a], 3, params)
    assert [g.text for g in ab[0]] == [g.text for g in ba[1]]
    assert [g.text for g in ab[1]] == [g.text for g in ba[0]]
    assert len(ab[0]) == 3 and len({g.text for g in ab[0]}) > 1  # k different samples
    for g in ab[0] + ab[1]:
        assert g.finish_reason in ("stop", "length") and g.tokens is not None and g.tokens <= 10
        if g.finish_reason == "length":  # no end-of-sequence within the limit
            assert g.tokens == 10


def test_hf_batches_prompts_with_left_padding_and_greedy(tiny_model_dir: Path) -> None:
    one = HFBackend(tiny_model_dir, batch_size=1, chat_template=False)
    two = HFBackend(tiny_model_dir, batch_size=2, chat_template=False)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    reqs = _reqs("a", "a much longer prompt here")
    solo = one.generate(reqs, 2, greedy)
    batched = two.generate(reqs, 2, greedy)
    assert len(batched) == 2 and all(len(row) == 2 for row in batched)
    assert solo[0][0].text == solo[0][1].text  # greedy: identical samples
    # left padding with an attention mask: the padded short prompt decodes the same tokens greedily
    assert [g.text for g in batched[0]] == [g.text for g in solo[0]]
    assert two.describe()["batch_size"] == 2 and two.describe()["chat_template"] is False


def test_hf_chat_template_is_applied(tiny_model_dir: Path) -> None:
    be = HFBackend(tiny_model_dir, system_prompt="be brief")
    assert be.render(PromptRequest("x", "2+2?", 0)) == "s:be brief\nu:2+2?\na:"
    plain = HFBackend(tiny_model_dir, chat_template=False, system_prompt="be brief")
    assert plain.render(PromptRequest("x", [{"role": "user", "content": "2+2?"}], 0)) == "be brief\n\n2+2?"


def test_hf_missing_model_is_a_backend_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="cannot load model/tokenizer"):
        HFBackend(tmp_path)


class _StandInVLLM(types.ModuleType):
    """Records how the backend calls vLLM 0.33's offline API (LLM, SamplingParams, LLM.generate with token-id
    prompts, collective_rpc("reload_weights"), reset_prefix_cache, the engine core's shutdown, the engine's
    ``model_config.max_model_len``)."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__("vllm")
        self.__version__ = "stand-in"
        self.calls: list[tuple[str, Any]] = []
        outer = self

        class SamplingParams:
            def __init__(self, **kw: Any) -> None:
                self.kw = kw

        class LLM:
            def __init__(self, **kw: Any) -> None:
                outer.calls.append(("LLM", kw))
                core = types.SimpleNamespace(shutdown=lambda: outer.calls.append(("shutdown", None)))
                config = types.SimpleNamespace(max_model_len=4096)  # what the backend checks prompt lengths against
                self.llm_engine = types.SimpleNamespace(engine_core=core, model_config=config)

            def get_tokenizer(self) -> Any:
                return tokenizer

            def collective_rpc(self, method: str, timeout: Any = None, args: tuple = (), kwargs: Any = None) -> list:
                outer.calls.append(("collective_rpc", (method, kwargs)))
                return [None]

            def reset_prefix_cache(self) -> bool:
                outer.calls.append(("reset_prefix_cache", None))
                return True

            def generate(self, prompts: list[dict], sps: list[Any], use_tqdm: bool = True) -> list[Any]:
                outer.calls.append(("generate", (prompts, [sp.kw for sp in sps])))
                out = []
                for sp in sps:
                    comps = [
                        types.SimpleNamespace(
                            text=f"c{j}", token_ids=[1] * (j + 1), finish_reason="length" if j == 0 else "stop"
                        )
                        for j in range(sp.kw["n"])
                    ]
                    out.append(types.SimpleNamespace(outputs=comps))
                return out

        self.LLM, self.SamplingParams = LLM, SamplingParams


CUDA = EnginePlatform(device="cuda", block_size=16, reserved_blocks=1, sleep_mode=True, kv_env_bytes=None)
CPU = EnginePlatform(device="cpu", block_size=128, reserved_blocks=1, sleep_mode=False, kv_env_bytes=None)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> _StandInVLLM:
    from transformers import AutoTokenizer

    mod = _StandInVLLM(AutoTokenizer.from_pretrained(tiny_model_dir))
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setattr("evals.backends.vllm.engine_platform", lambda: CUDA)

    def recorded_sync(llm: Any, *, path: str, check: str) -> None:
        mod.calls.append(("sync_weights", (path, check)))

    monkeypatch.setattr("evals.backends.vllm.sync_weights", recorded_sync)
    return mod


def test_vllm_backend_uses_the_documented_api(stand_in: _StandInVLLM, tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    be = make_backend("vllm", tiny_model_dir, EvalSection(seed=3))
    out = be.generate(_reqs("2+2?", "3+3?"), 2, SamplingParams(temperature=0.6, top_p=0.95, max_new_tokens=7))
    assert stand_in.calls[0] == (
        "LLM",
        {
            "model": str(tiny_model_dir),
            "dtype": "auto",
            "seed": 3,
            "worker_extension_cls": "harness.vllm_engine.worker.WeightSyncWorker",
        },
    )
    prompts, sps = stand_in.calls[1][1]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    hf = HFBackend(tiny_model_dir)  # the same tokens as the hf backend sends (no special tokens added)
    assert [hf.render(r) for r in _reqs("2+2?", "3+3?")] == ["u:2+2?\na:", "u:3+3?\na:"]  # chat template
    assert [p["prompt_token_ids"] for p in prompts] == [
        tok(hf.render(r), add_special_tokens=False)["input_ids"] for r in _reqs("2+2?", "3+3?")
    ]
    assert sps[0] == {"n": 2, "temperature": 0.6, "top_p": 0.95, "max_tokens": 7, "seed": prompt_seed(0, "p0")}
    assert [[(g.text, g.finish_reason, g.tokens) for g in row] for row in out] == [
        [("c0", "length", 1), ("c1", "stop", 2)]
    ] * 2


def test_vllm_memory_comes_from_the_config_or_the_free_memory(
    monkeypatch: pytest.MonkeyPatch, stand_in: Any, tiny_model_dir: Path
) -> None:
    monkeypatch.setattr("evals.backends.vllm._gpu_memory", lambda: (40 * 2**30, 80 * 2**30))  # (free, total)
    make_backend("vllm", tiny_model_dir, EvalSection())
    assert stand_in.calls[-1][1]["gpu_memory_utilization"] == 0.45  # 90% of the free memory, not vLLM's 0.92
    be = make_backend(
        "vllm",
        tiny_model_dir,
        EvalSection(vllm_gpu_memory_utilization=0.3, vllm_kv_cache_bytes=2**30, vllm_enforce_eager=True),
    )
    kw = stand_in.calls[-1][1]
    assert (kw["gpu_memory_utilization"], kw["kv_cache_memory_bytes"], kw["enforce_eager"]) == (0.3, 2**30, True)
    assert be.describe()["gpu_memory_utilization"] == 0.3


def test_vllm_on_cpu_sizes_the_cache_itself_and_keeps_the_checkpoint_dtype(
    monkeypatch: pytest.MonkeyPatch, stand_in: Any, tiny_model_dir: Path
):
    """On CPU: no GPU share, an explicit KV cache (the worker would take a share of the machine otherwise), the
    checkpoint's own dtype under ``auto`` (what the hf backend computes), and a VLLM_CPU_KVCACHE_SPACE that
    contradicts the configured size is an error naming both."""
    monkeypatch.setattr("evals.backends.vllm.engine_platform", lambda: CPU)
    monkeypatch.setattr("evals.backends.vllm._gpu_memory", lambda: pytest.fail("no GPU query on CPU"))
    be = make_backend("vllm", tiny_model_dir, EvalSection())
    kw = stand_in.calls[-1][1]
    assert kw["kv_cache_memory_bytes"] == 2**30 and "gpu_memory_utilization" not in kw and kw["dtype"] == "float32"
    assert be.describe()["platform"] == "cpu"
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    forced = EnginePlatform(device="cpu", block_size=128, reserved_blocks=1, sleep_mode=False, kv_env_bytes=3 * 2**30)
    monkeypatch.setattr("evals.backends.vllm.engine_platform", lambda: forced)
    make_backend("vllm", tiny_model_dir, EvalSection())
    assert stand_in.calls[-1][1]["kv_cache_memory_bytes"] == 3 * 2**30
    with pytest.raises(BackendError, match="eval.vllm_kv_cache_bytes=1073741824 .*VLLM_CPU_KVCACHE_SPACE=3"):
        make_backend("vllm", tiny_model_dir, EvalSection(vllm_kv_cache_bytes=2**30))


def test_one_vllm_engine_serves_every_checkpoint_and_is_released(
    stand_in: Any, tmp_path: Path, tiny_model_dir: Path
) -> None:
    import shutil

    from eval_runs import make_run

    from evals.cli import main

    run = make_run(tmp_path, tiny_model_dir, step=2, eval_section={"k": 2, "limit": 2})
    second = run / "checkpoints" / "step-000004"
    shutil.copytree(run / "checkpoints" / "step-000002", second)
    assert (
        main(
            [
                "--checkpoints",
                str(run),
                "--backend",
                "vllm",
                "--no-telemetry",
                "--no-progress",
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    names = [c[0] for c in stand_in.calls]
    assert names.count("LLM") == 1 and names.count("shutdown") == 1 and names[-1] == "shutdown"
    assert ("sync_weights", (str(second), "sampled")) in stand_in.calls
    assert names.count("generate") == 2
    assert (tmp_path / "out" / "step-000004" / "results.json").is_file()


def test_vllm_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(BackendError, match="cannot import vllm.*--backend openai"):
        make_backend("vllm", tiny_model_dir, EvalSection())


def test_unknown_backend_and_seeds() -> None:
    with pytest.raises(BackendError, match="unknown backend"):
        make_backend("tgi", ".", EvalSection())
    seeds = {prompt_seed(0, f"q{i}") for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**31 for s in seeds)
