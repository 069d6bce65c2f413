"""The pure parts of harness.vllm_engine (no vLLM needed): which engine layers the post-sync check can compare
with the source's tensors, and the KV sizing in the platform's pages. The sync itself runs against a real engine
in tests/vllm/."""

from __future__ import annotations

from types import SimpleNamespace

from harness.vllm_engine.platform import kv_cache_bytes
from harness.vllm_engine.sync import plan_probes

MODULES = {  # the vLLM Qwen2 layers with parameters of their own, as the worker reports them
    "model.embed_tokens": "VocabParallelEmbedding",
    "model.layers.0.self_attn.qkv_proj": "QKVParallelLinear",
    "model.layers.0.self_attn.o_proj": "RowParallelLinear",
    "model.layers.0.mlp.gate_up_proj": "MergedColumnParallelLinear",
    "model.layers.0.mlp.down_proj": "RowParallelLinear",
    "model.layers.0.input_layernorm": "RMSNorm",
    "model.norm": "RMSNorm",
    "lm_head": "ParallelLMHead",
}
PACKED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
HF = ["model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight"] + [
    f"model.layers.0.{m}.weight"
    for m in (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
    )
]


def test_tied_head_maps_onto_the_embedding_and_merged_layers_onto_their_parts():
    probes = {p.module: p for p in plan_probes(HF, MODULES, PACKED)}
    assert set(probes) == {m for m, cls in MODULES.items() if cls != "RMSNorm"}  # norms are never repacked
    assert probes["lm_head"].sources == ("model.embed_tokens.weight",) and probes["lm_head"].kind == "cols"
    assert probes["model.embed_tokens"].kind == "rows"
    assert probes["model.layers.0.self_attn.qkv_proj"].sources == tuple(
        f"model.layers.0.self_attn.{x}_proj.weight" for x in "qkv"
    )
    assert probes["model.layers.0.mlp.down_proj"].sources == ("model.layers.0.mlp.down_proj.weight",)


def test_untied_head_uses_its_own_tensor_and_unknown_names_are_left_out():
    probes = {p.module: p for p in plan_probes([*HF, "lm_head.weight"], MODULES, PACKED)}
    assert probes["lm_head"].sources == ("lm_head.weight",)
    partial = [n for n in HF if "k_proj" not in n]  # a merged layer with a part missing cannot be compared
    assert "model.layers.0.self_attn.qkv_proj" not in {p.module for p in plan_probes(partial, MODULES, PACKED)}


def test_kv_cache_counts_whole_pages_plus_the_reserved_one():
    cfg = SimpleNamespace(
        num_hidden_layers=2, num_key_value_heads=2, num_attention_heads=2, hidden_size=64, head_dim=32
    )
    per_token = 2 * 2 * 2 * 32 * 4  # K and V, layers, KV heads, head dim, float32
    assert kv_cache_bytes(cfg, 16, 32, dtype_bytes=4, block=128, margin=1.0) == per_token * (16 + 1) * 128
    assert kv_cache_bytes(cfg, 16, 32, dtype_bytes=4, block=16, margin=1.0) == per_token * (16 * 2 + 1) * 16
