"""The vLLM backend's wiring on the CUDA path, against a FAKE ``vllm`` module (this machine has no GPU).

The real engine (the CPU build) runs in tests/vllm/; these tests cover what only a GPU platform does, with a fake
of the surface the backend uses, as read from vLLM 0.33.0 (``LLM(...)``, ``LLM.generate`` with token-id prompts and
``SamplingParams(n=..., logprobs=0)``, ``CompletionOutput.token_ids/finish_reason/logprobs``, ``sleep``/``wake_up``)
and a CUDA platform description: prompt truncation, group-major rows, truncation flags, EOS handling, sampler
log-probs, GPU memory settings, the sleep/wake order around the weight sync (the sync itself is recorded, not
run), and the platform's KV pages. Where vLLM is installed, one test checks our argument names against its
signatures.
"""

import os
import socket
import sys
import types
from dataclasses import dataclass

import pytest
import torch

from harness.errors import ConfigError
from harness.vllm_engine import EnginePlatform
from trainer.rollout.base import SamplingConfig
from trainer.toy import char_tokenizer, tiny_model


@dataclass
class _Completion:
    token_ids: list
    finish_reason: str
    logprobs: list | None = None


def _with_logprobs(ids, reason):
    return _Completion(ids, reason, [{t: types.SimpleNamespace(logprob=-0.1 * (i + 1))} for i, t in enumerate(ids)])


class _FakeLLM:
    instances: list = []

    def __init__(self, model, **kwargs):
        self.kwargs = dict(kwargs, model=model)
        self.loaded: list[str] = []
        self.resets = 0
        self.events: list = []

        def load_weights(pairs):
            names = [n for n, _ in pairs]
            self.loaded.extend(names)
            self.events.append(("load_weights", len(names)))

        engine_model = types.SimpleNamespace(load_weights=load_weights)
        runner = types.SimpleNamespace(model=engine_model)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner))
        )
        _FakeLLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm=False):
        self.prompts = prompts
        outs = []
        for p in prompts:
            ids = p["prompt_token_ids"]
            comps = []
            for j in range(sampling_params.n):  # even j: ends with EOS (id 1); odd j: hits max_tokens
                if j % 2 == 0:
                    comps.append(_with_logprobs([3 + j, 1], "stop"))
                else:
                    comps.append(_with_logprobs([3] * sampling_params.max_tokens, "length"))
            outs.append(types.SimpleNamespace(prompt_token_ids=ids, outputs=comps))
        return outs

    def reset_prefix_cache(self):
        self.resets += 1
        self.events.append("reset_prefix_cache")

    def sleep(self, level=1):
        self.events.append(("sleep", level))

    def wake_up(self, tags=None):
        self.events.append(("wake_up", tags))


@dataclass
class _FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    logprobs: int | None = None


CUDA = EnginePlatform(device="cuda", block_size=16, reserved_blocks=1, sleep_mode=True, kv_env_bytes=None)


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams = _FakeLLM, _FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setattr("trainer.rollout.vllm.engine_platform", lambda: CUDA)

    def recorded_sync(llm, *, weights, check, seed):
        names = [n for n, _ in weights]
        llm.loaded.extend(names)
        llm.events.append(("sync_weights", len(names), check))

    monkeypatch.setattr("trainer.rollout.vllm.sync_weights", recorded_sync)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        # the backend fills them in. setenv first, so that monkeypatch records the variable and removes what the
        # backend set after the test (delenv of a missing variable records nothing: the port would leak into
        # every later process this one starts)
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    monkeypatch.setattr("trainer.rollout.vllm._gpu_memory", lambda: (60 * 2**30, 80 * 2**30))  # (free, total)
    _FakeLLM.instances.clear()
    return mod


def test_generate_builds_group_major_rows_with_truncation_flags(fake_vllm):
    from trainer.rollout.vllm import VLLMRollout

    tok = char_tokenizer()
    model = tiny_model(len(tok))
    r = VLLMRollout(model, tok, max_prompt_length=4, max_completion_length=5)
    llm = _FakeLLM.instances[-1]
    assert llm.kwargs["max_model_len"] == 9 and llm.kwargs["distributed_executor_backend"] == "external_launcher"
    b = r.generate(["abcdefg:", "xy:"], 4, SamplingConfig(5))
    assert [len(p["prompt_token_ids"]) for p in llm.prompts] == [4, 3]  # cut to the last 4 tokens
    assert len(b) == 8
    assert b.truncated.tolist() == [False, True, False, True] * 2
    assert b.completion_lengths.tolist() == [2, 5, 2, 5] * 2
    assert b.completion_ids[0, :2].tolist() == [3, 1]  # EOS kept as a loss token
    assert b.texts[0] == tok.decode([3]) and (b.prompt_ids[:4] == b.prompt_ids[0]).all()
    assert b.sampler_logp[0, :2].tolist() == pytest.approx([-0.1, -0.2])  # the sampled tokens' log-probs
    assert b.sampler_logp[0, 2:].abs().sum() == 0 and b.sampler_logp[1].tolist() == pytest.approx(
        [-0.1, -0.2, -0.3, -0.4, -0.5]
    )


def test_engine_memory_seed_port_and_options(fake_vllm):
    from harness.cfg.trainer import VLLMSection
    from trainer.rollout.vllm import VLLMRollout, kv_cache_bytes

    tok = char_tokenizer()
    model = tiny_model(len(tok))  # 2 layers, 2 KV heads of 32: 512 bytes of 16-bit KV per token
    VLLMRollout(
        model,
        tok,
        max_prompt_length=10,
        max_completion_length=20,
        seed=7,
        max_num_seqs=16,
        settings=VLLMSection(enforce_eager=True),
    )
    kw = _FakeLLM.instances[-1].kwargs
    # 16 sequences x 2 pages of 16 tokens, plus the reserved page
    assert kw["kv_cache_memory_bytes"] == kv_cache_bytes(model.config, 16, 30) == int(512 * 33 * 16 * 1.25)
    assert kw["worker_extension_cls"] == "harness.vllm_engine.worker.WeightSyncWorker"
    n_params = sum(p.numel() for p in model.parameters())
    assert kw["gpu_memory_utilization"] == pytest.approx(
        (kw["kv_cache_memory_bytes"] + 2 * n_params + 2 * 2**30) / (80 * 2**30), abs=1e-4
    )
    assert kw["seed"] == 7 and kw["max_num_seqs"] == 16 and kw["enforce_eager"] is True
    assert kw["enable_sleep_mode"] is True and kw["logprobs_mode"] == "processed_logprobs"
    port = int(os.environ["MASTER_PORT"])
    with socket.socket() as s:  # a free port, bindable now
        s.bind(("127.0.0.1", port))
    VLLMRollout(
        model,
        tok,
        max_prompt_length=10,
        max_completion_length=20,
        settings=VLLMSection(kv_cache_bytes=12345, gpu_memory_utilization=0.5),
    )
    kw = _FakeLLM.instances[-1].kwargs
    assert kw["kv_cache_memory_bytes"] == 12345 and kw["gpu_memory_utilization"] == 0.5


def test_an_engine_that_does_not_fit_the_free_memory_is_a_config_error(fake_vllm, monkeypatch):
    from harness.cfg.trainer import VLLMSection
    from trainer.rollout.vllm import VLLMRollout

    monkeypatch.setattr("trainer.rollout.vllm._gpu_memory", lambda: (3 * 2**30, 80 * 2**30))
    tok = char_tokenizer()
    with pytest.raises(ConfigError, match="GiB are free"):
        VLLMRollout(
            tiny_model(len(tok)),
            tok,
            max_prompt_length=4,
            max_completion_length=5,
            settings=VLLMSection(kv_cache_bytes=2 * 2**30),
        )


def test_launcher_env_keeps_torchrun_values_and_picks_a_free_port():
    from trainer.dist import launcher_env

    env = {"RANK": "1", "MASTER_PORT": "1234"}
    assert launcher_env(env) == {"LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    assert env["RANK"] == "1" and env["MASTER_PORT"] == "1234"
    with socket.socket() as busy:  # a port taken by someone else is never chosen
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = {int(launcher_env({})["MASTER_PORT"]) for _ in range(20)}
    assert taken not in ports and all(0 < p < 65536 for p in ports)


def test_sleep_during_the_update_then_wake_weights_load_and_wake_cache(fake_vllm, monkeypatch):
    from trainer.rollout.vllm import VLLMRollout

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    tok = char_tokenizer()
    r = VLLMRollout(tiny_model(len(tok)), tok, max_prompt_length=4, max_completion_length=5)
    llm = _FakeLLM.instances[-1]
    r.release_memory()
    r.release_memory()  # idempotent
    r.sync_weights()
    n = len(list(r.model.parameters()))
    assert llm.events == [
        ("sleep", 2),
        ("wake_up", ["weights"]),
        ("sync_weights", n, "sampled"),
        ("wake_up", ["kv_cache"]),
    ]


def test_sync_weights_pushes_every_parameter(fake_vllm):
    from trainer.rollout.vllm import VLLMRollout

    tok = char_tokenizer()
    model = tiny_model(len(tok))
    r = VLLMRollout(model, tok, max_prompt_length=4, max_completion_length=5)
    r.sync_weights()
    llm = _FakeLLM.instances[-1]
    assert llm.loaded == [n for n, _ in model.named_parameters()]
    assert ("sleep", 2) not in llm.events  # no sleep without an update in between


def test_cpu_platform_pages_no_sleep_and_the_kv_override(fake_vllm, monkeypatch, caplog):
    """On CPU: 128-token pages plus the reserved one, sleep mode off with one log line, no GPU memory query, and
    VLLM_CPU_KVCACHE_SPACE either followed (nothing configured) or refused (it contradicts the configured size)."""
    import logging

    from harness.cfg.trainer import VLLMSection
    from trainer.rollout.vllm import VLLMRollout

    cpu = EnginePlatform(device="cpu", block_size=128, reserved_blocks=1, sleep_mode=False, kv_env_bytes=None)
    monkeypatch.setattr("trainer.rollout.vllm._gpu_memory", lambda: pytest.fail("no GPU query on CPU"))
    tok = char_tokenizer()
    model = tiny_model(len(tok))
    with caplog.at_level(logging.INFO):
        r = VLLMRollout(model, tok, max_prompt_length=10, max_completion_length=20, max_num_seqs=4, platform=cpu)
    kw = _FakeLLM.instances[-1].kwargs
    assert kw["dtype"] == "float32" and kw["enable_sleep_mode"] is False and "gpu_memory_utilization" not in kw
    assert kw["kv_cache_memory_bytes"] == int(1024 * (4 + 1) * 128 * 1.25)  # float32 KV: 1024 bytes per token
    assert sum("no sleep mode" in m for m in caplog.messages) == 1
    r.release_memory()
    assert ("sleep", 2) not in _FakeLLM.instances[-1].events
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    forced = EnginePlatform(device="cpu", block_size=128, reserved_blocks=1, sleep_mode=False, kv_env_bytes=2**31)
    VLLMRollout(model, tok, max_prompt_length=10, max_completion_length=20, platform=forced, bf16=True)
    kw = _FakeLLM.instances[-1].kwargs
    assert kw["kv_cache_memory_bytes"] == 2**31 and kw["dtype"] == "bfloat16"
    with pytest.raises(
        ConfigError,
        match="VLLM_CPU_KVCACHE_SPACE=2 .*trainer.vllm.kv_cache_bytes|"
        "trainer.vllm.kv_cache_bytes=12345.*VLLM_CPU_KVCACHE_SPACE=2",
    ):
        VLLMRollout(
            model,
            tok,
            max_prompt_length=10,
            max_completion_length=20,
            platform=forced,
            settings=VLLMSection(kv_cache_bytes=12345),
        )


def test_missing_vllm_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    from trainer.rollout.vllm import VLLMRollout

    tok = char_tokenizer()
    with pytest.raises(ConfigError, match="make vllm-env.*backend: hf"):
        VLLMRollout(tiny_model(len(tok)), tok, max_prompt_length=4, max_completion_length=5)
