"""A few GRPO steps of a random-init ~100M-parameter Qwen2-style model in bf16 on one GPU (no network needed).

Prints per step: step time, tokens/s (prompt + completion tokens through generation and training), peak GPU
memory and achieved TFLOP/s, estimated as ``2 * N * generated tokens + 6 * N * trained tokens`` over the step
time (N = parameters, the tied embedding counted once as the output head; attention's sequence terms left out,
so this slightly underestimates). Run through ``benchmarks/gpu_check.sh``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--completion-length", type=int, default=256)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--generations", type=int, default=8)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device visible")
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from harness.config import load_config
    from trainer import train
    from trainer.toy import char_tokenizer

    vocab = 32000
    tok = char_tokenizer(vocab)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                      num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048,
                      tie_word_embeddings=True, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(f"{d}/model")
        tok.save_pretrained(f"{d}/model")
        del model
        run = load_config({
            "run": {"id": "gpu-check", "output_dir": f"{d}/runs", "seed": 0},
            "model": {"name_or_path": f"{d}/model"},
            "data": {"train": "toy:256", "chat_template": False},
            "rewards": {"char_count": {"weight": 1.0, "params": {"char": "a", "norm": float(a.completion_length)}}},
            "trainer": {"loss": "grpo", "num_generations": a.generations, "prompts_per_step": a.prompts,
                        "micro_batch_size": a.generations * a.prompts // 2, "max_prompt_length": 32,
                        "max_completion_length": a.completion_length, "lr": 1e-5, "max_steps": a.steps, "bf16": True,
                        "monitors": {"truncated_frac": 1.0}},
        })
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        res = train(run, progress=False)
        total = time.perf_counter() - t0
    print(f"gpu: {torch.cuda.get_device_name(0)}; model: {n_params / 1e6:.1f}M parameters, bf16 autocast, "
          f"G={a.generations}, {a.prompts} prompts/step, completion length {a.completion_length}")
    rows = []
    for m in res.metrics:
        gen_tok = m["completions/mean_length"] * a.generations * a.prompts
        trained = gen_tok + 5 * a.generations * a.prompts  # prompts are ~5 tokens
        flops = 2 * n_params * gen_tok + 6 * n_params * trained
        rows.append((m["timing/step_s"], m["tokens_per_s"], flops / m["timing/step_s"] / 1e12,
                     m["timing/generate_s"]))
        print(f"step {m['step']}: {m['timing/step_s']:.3f} s (generate {m['timing/generate_s']:.3f} s), "
              f"{m['tokens_per_s']:.0f} tokens/s, {rows[-1][2]:.2f} TFLOP/s, reward {m['reward/total/mean']:.3f}")
    steady = rows[1:] or rows
    print(f"median after the first step: step {statistics.median(r[0] for r in steady):.3f} s, "
          f"{statistics.median(r[1] for r in steady):.0f} tokens/s, {statistics.median(r[2] for r in steady):.2f} "
          f"TFLOP/s; peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB; wall {total:.1f} s")


if __name__ == "__main__":
    main()
