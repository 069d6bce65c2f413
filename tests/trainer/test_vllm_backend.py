"""The vLLM backend's wiring, against a FAKE ``vllm`` module: vLLM needs a CUDA GPU and cannot run here.

The fake implements only the documented surface the backend uses (``LLM(...)``, ``LLM.generate`` with token-id
prompts and ``SamplingParams(n=...)``, ``CompletionOutput.token_ids/finish_reason``, the engine's model
``load_weights`` and ``reset_prefix_cache``). What this checks is our side: prompt truncation, group-major rows,
truncation flags, EOS handling, and that every parameter is pushed after an update. It says nothing about vLLM
itself.
"""

import sys
import types
from dataclasses import dataclass

import pytest
import torch

from harness.errors import ConfigError
from trainer.rollout.base import SamplingConfig
from trainer.toy import char_tokenizer, tiny_model


@dataclass
class _Completion:
    token_ids: list
    finish_reason: str


class _FakeLLM:
    instances: list = []

    def __init__(self, model, **kwargs):
        self.kwargs = dict(kwargs, model=model)
        self.loaded: list[str] = []
        self.resets = 0
        engine_model = types.SimpleNamespace(load_weights=lambda pairs: self.loaded.extend(n for n, _ in pairs))
        runner = types.SimpleNamespace(model=engine_model)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))
        _FakeLLM.instances.append(self)

    def generate(self, prompts, sampling_params, use_tqdm=False):
        self.prompts = prompts
        outs = []
        for p in prompts:
            ids = p["prompt_token_ids"]
            comps = []
            for j in range(sampling_params.n):  # even j: ends with EOS (id 1); odd j: hits max_tokens
                if j % 2 == 0:
                    comps.append(_Completion([3 + j, 1], "stop"))
                else:
                    comps.append(_Completion([3] * sampling_params.max_tokens, "length"))
            outs.append(types.SimpleNamespace(prompt_token_ids=ids, outputs=comps))
        return outs

    def reset_prefix_cache(self):
        self.resets += 1


@dataclass
class _FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams = _FakeLLM, _FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", mod)
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                 ("MASTER_PORT", "29531")):
        monkeypatch.setenv(k, v)  # restored after the test (the backend fills them in when missing)
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


def test_sync_weights_pushes_every_parameter_and_resets_the_prefix_cache(fake_vllm):
    from trainer.rollout.vllm import VLLMRollout

    tok = char_tokenizer()
    model = tiny_model(len(tok))
    r = VLLMRollout(model, tok, max_prompt_length=4, max_completion_length=5)
    r.sync_weights()
    llm = _FakeLLM.instances[-1]
    assert llm.loaded == [n for n, _ in model.named_parameters()]
    assert llm.resets == 1


def test_missing_vllm_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    from trainer.rollout.vllm import VLLMRollout

    tok = char_tokenizer()
    with pytest.raises(ConfigError, match="backend: hf"):
        VLLMRollout(tiny_model(len(tok)), tok, max_prompt_length=4, max_completion_length=5)
