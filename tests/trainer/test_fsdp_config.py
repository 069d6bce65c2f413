"""``trainer.parallel``: what ``auto`` picks and why, and the settings refused before any sharding."""

import logging

import pytest
from _trainer_helpers import toy_config

from harness.errors import ConfigError
from trainer.dist import DistInfo
from trainer.fsdp import choose_parallel, decoder_layers, prepare
from trainer.toy import char_tokenizer, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model(len(char_tokenizer()))


def test_auto_picks_ddp_for_one_process_or_one_cpu_node_and_fsdp_across_nodes(model, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="trainer.fsdp")
    assert choose_parallel("auto", model, DistInfo()) == "ddp"
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert choose_parallel("auto", model, DistInfo(0, 4)) == "ddp"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two nodes of two processes
    assert choose_parallel("auto", model, DistInfo(0, 4)) == "fsdp"
    assert "several nodes" in caplog.text
    assert (
        choose_parallel("fsdp", model, DistInfo()) == "fsdp" and choose_parallel("ddp", model, DistInfo(0, 4)) == "ddp"
    )


def test_config_field_and_lora_refusal(tmp_path, model):
    with pytest.raises(ConfigError, match="parallel"):
        toy_config(tmp_path, parallel="zero3")
    t = toy_config(tmp_path, parallel="fsdp", lora={"r": 4}).trainer.resolved()
    with pytest.raises(ConfigError, match="trainer.parallel=fsdp with trainer.lora"):
        prepare(model, None, t, DistInfo(0, 2))
    t = toy_config(tmp_path, parallel="ddp").trainer.resolved()
    placed, ref, info = prepare(model, None, t, DistInfo())
    assert placed is model and ref is None and info.parallel == "ddp"


def test_decoder_layers_are_the_models_no_split_blocks(model):
    layers = decoder_layers(model)
    assert len(layers) == 2 and all(type(m).__name__ == "Qwen2DecoderLayer" for m in layers)
    with pytest.raises(ValueError, match="no decoder layers"):
        decoder_layers(model.model.norm)
