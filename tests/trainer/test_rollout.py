"""The transformers rollout backend on a random-init tiny Qwen2 model (no download)."""

import torch
from _batches import rollout_batch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trainer.rollout.base import RolloutBatch, SamplingConfig, left_pad
from trainer.rollout.hf import HFRollout, sample_next
from trainer.toy import char_tokenizer
from trainer.update import completion_logprobs


def _model(tok, std=0.5):
    # a larger init spread than the default makes greedy outputs differ per position (a real test of the cache)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=std,
        pad_token_id=0,
        eos_token_id=1,
    )
    torch.manual_seed(3)
    return Qwen2ForCausalLM(cfg).eval()


def test_cached_greedy_decode_matches_transformers_generate_with_left_padding():
    tok = char_tokenizer()
    model = _model(tok)
    r = HFRollout(model, tok, max_prompt_length=32, generator=torch.Generator().manual_seed(0))
    prompts = ["hello:", "a much longer prompt:"]
    out = r.generate(prompts, 1, SamplingConfig(12, temperature=1e-5))
    for i, p in enumerate(prompts):
        ids = torch.tensor([tok(p)["input_ids"]])
        ref = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=1, pad_token_id=0)[0, ids.shape[1] :]
        got = out.completion_ids[i][out.completion_mask[i].bool()]
        assert got.tolist() == ref.tolist()[: len(got)]
        assert len(set(got.tolist())) > 1  # not a degenerate constant output


def test_groups_are_adjacent_and_truncation_is_flagged():
    tok = char_tokenizer()
    r = HFRollout(_model(tok, std=0.02), tok, max_prompt_length=8, generator=torch.Generator().manual_seed(1))
    b = r.generate(["ab:", "cdefghijkl:"], 4, SamplingConfig(6))
    assert len(b) == 8
    assert (b.prompt_ids[:4] == b.prompt_ids[0]).all() and (b.prompt_ids[4:] == b.prompt_ids[4]).all()
    assert b.prompt_mask[4].sum() == 8  # cut to max_prompt_length from the left
    ends_eos = torch.tensor(
        [bool((row[m.bool()] == 1).any()) for row, m in zip(b.completion_ids, b.completion_mask, strict=True)]
    )
    assert (b.truncated == (~ends_eos & (b.completion_lengths == 6))).all()
    assert all("<eos>" not in t for t in b.texts)


def test_sampling_logprobs_match_the_training_forward_pass():
    tok = char_tokenizer()
    model = _model(tok)
    r = HFRollout(model, tok, max_prompt_length=16, generator=torch.Generator().manual_seed(2))
    b = r.generate(["xy:", "longer one:"], 2, SamplingConfig(5))
    logp, ent = completion_logprobs(model, b.prompt_ids, b.prompt_mask, b.completion_ids, 1.0, with_entropy=True)
    assert logp.shape == b.completion_ids.shape and (logp <= 0).all()
    # the same rows one at a time without padding give the same log-probs (padding and positions are right)
    for i in range(len(b)):
        pm = b.prompt_mask[i].bool()
        n = int(b.completion_mask[i].sum())
        one, _ = completion_logprobs(
            model, b.prompt_ids[i][pm][None], torch.ones(1, int(pm.sum())), b.completion_ids[i, :n][None], 1.0
        )
        assert torch.allclose(one[0], logp[i, :n], atol=1e-4)


def test_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    g = torch.Generator().manual_seed(0)
    draws = {int(sample_next(logits, SamplingConfig(1, top_p=0.8), g)) for _ in range(200)}
    assert draws == {0, 1}


def test_concat_repads_batches():
    a = rollout_batch([[5, 6]], [[7, 1]], texts=["x"])
    b = rollout_batch([[5, 6, 8]], [[9]], truncated=[True], texts=["y"])
    c = RolloutBatch.concat([a, b], pad_id=0)
    assert c.prompt_ids.tolist() == [[0, 5, 6], [5, 6, 8]]
    assert c.completion_ids.tolist() == [[7, 1], [9, 0]] and c.texts == ["x", "y"]


def test_lean_decoder_logits_match_the_transformers_forward_with_gqa_and_padding():
    from trainer.rollout.fast_decode import LeanDecoder, supports

    tok = char_tokenizer()
    model = _model(tok)  # 4 query heads over 2 key/value heads, q/k/v biases (Qwen2)
    assert supports(model)
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11]], 0)
    dec = LeanDecoder(model, 2, 12)
    got = [dec.prefill(ids, mask)]
    for _ in range(3):
        nxt = got[-1].argmax(-1)
        ids, mask = torch.cat([ids, nxt[:, None]], 1), torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1)
        got.append(dec.step(nxt))
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    for j, logits in enumerate(got):
        assert torch.allclose(logits, ref[:, 4 + j], atol=1e-4), j


def test_bf16_rollout_on_cpu_samples_under_autocast_with_float32_weights():
    # random-init tiny model: checks the mechanics (bfloat16 matmul copies, float32 weights untouched, logits near
    # the float32 ones, tokens from the vocabulary), not a speed-up, which needs a model of real size
    from trainer.rollout.fast_decode import LeanDecoder

    tok = char_tokenizer()
    model = _model(tok, std=0.05)
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11]], 0)
    ref = LeanDecoder(model, 2, 12).prefill(ids, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dec = LeanDecoder(model, 2, 12, cache_dtype=torch.bfloat16, matmul_dtype=torch.bfloat16)
        got = dec.prefill(ids, mask)
    assert dec.layers[0].qkv.dtype == torch.bfloat16 and dec.k.dtype == torch.bfloat16
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    err = (got.float() - ref).abs().max().item()
    assert 0 < err < 0.05 * ref.abs().max().item()  # bfloat16 rounding, not another function
    r = HFRollout(model, tok, max_prompt_length=32, generator=torch.Generator().manual_seed(0), bf16=True)
    out = r.generate(["hello:", "abc"], 2, SamplingConfig(6, temperature=1.0))
    assert out.completion_ids.shape[0] == 4 and int(out.completion_ids.max()) < len(tok)


def test_group_prompt_prefilled_once_gives_the_same_completions_as_a_prefill_per_row():
    from trainer.rollout.fast_decode import LeanDecoder

    tok = char_tokenizer()
    model = _model(tok)
    prompts = ["hello:", "a much longer prompt:"]
    calls = []
    prefill = LeanDecoder.prefill

    def counted(dec, ids, mask):
        calls.append(ids.shape[0])
        return prefill(dec, ids, mask)

    LeanDecoder.prefill = counted
    try:
        greedy = SamplingConfig(10, temperature=1e-5)
        shared = HFRollout(model, tok, max_prompt_length=32, generator=torch.Generator().manual_seed(0))
        grouped = shared.generate(prompts, 3, greedy)
        per_row = shared.generate([p for p in prompts for _ in range(3)], 1, greedy)
    finally:
        LeanDecoder.prefill = prefill
    assert calls == [2, 6]  # one prefill row per group, then one per row
    assert grouped.completion_ids.tolist() == per_row.completion_ids.tolist()
    assert grouped.completion_ids[0].tolist() != grouped.completion_ids[3].tolist()  # the groups differ


def test_sample_next_draws_each_token_with_its_probability_and_never_a_zero_one():
    probs = torch.tensor([0.5, 0.0, 0.3, 0.2, 0.0])
    logits = torch.log(probs).repeat(20_000, 1)
    g = torch.Generator().manual_seed(0)
    freq = torch.bincount(sample_next(logits, SamplingConfig(1), g), minlength=5).double() / 20_000
    assert freq[1] == 0 and freq[4] == 0
    assert torch.allclose(freq, probs.double(), atol=0.015)  # 4 standard errors of a 0.5 frequency is 0.014
    # temperature sharpens: at 0.5 the probabilities are p^2 renormalized
    sharp = torch.bincount(sample_next(logits, SamplingConfig(1, temperature=0.5), g), minlength=5).double() / 20_000
    assert torch.allclose(sharp, (probs**2 / (probs**2).sum()).double(), atol=0.015)


def test_prepacked_bf16_decoder_gives_the_same_bits_as_plain_bf16_weights():
    # oneDNN's blocked weight layout changes where the weights live, not what is computed (q/k/v biases included)
    from trainer.rollout.fast_decode import LeanDecoder

    tok = char_tokenizer()
    model = _model(tok, std=0.05)
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11]], 0)
    outs = []
    for prepack in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            dec = LeanDecoder(model, 2, 12, cache_dtype=torch.bfloat16, matmul_dtype=torch.bfloat16, prepack=prepack)
            got = [dec.prefill(ids, mask)]
            for _ in range(3):
                got.append(dec.step(got[-1].argmax(-1)))
        outs.append(torch.stack(got))
        assert dec.layers[0].qkv.dtype == torch.bfloat16 and dec.layers[0].qkv.packed == (
            prepack and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
        )
    assert torch.equal(outs[0], outs[1])
