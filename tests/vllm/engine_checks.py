"""Real vLLM engine checks, run as a script inside ``.venv-vllm`` (one process per engine; see test_real_engine.py).

The models are random-init tiny Qwen2-style causal LMs built from a config (2 layers, hidden 64, 2 heads of 32:
vLLM's CPU attention refuses head size 16) with the project's character-level tokenizer, saved by this script;
nothing is downloaded. ``initializer_range`` 0.2 makes their distributions peaked enough that greedy completions
vary with the prompt.

    python engine_checks.py model --out DIR [--untied] [--seed N]      save such a model
    python engine_checks.py sync --out result.json --dtype float32 [--untied] [--sampler] [--seed N] [--device D]

``sync`` builds the project's rollout engine (:class:`trainer.rollout.vllm.VLLMRollout`), optionally compares the
sampler's log-probs with the trainer's at T=1 and T=0.7, then: a training step (AdamW on the sequences' negative
log-likelihood), the engine's log-probs of fixed completions against the NEW policy's before and after the sync,
and a control in which the tied-head re-processing is switched off, which the always-on check must catch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

PROMPTS = ["abc:", "hello:", "xyz 12:", "the cat:", "q?", "mno pq:", "7+8=", "zz top:"]


def build_model(directory: Path | None, *, tied: bool, seed: int) -> tuple[Any, Any]:
    """A random-init tiny Qwen2 (head dim 32) and the char tokenizer, saved to ``directory`` when given."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.toy import char_tokenizer

    tok = char_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).eval()
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(directory)
        tok.save_pretrained(directory)
    return model, tok


def _engine_logprobs(llm: Any, vllm: Any, prompt_rows: list[list[int]], completions: list[list[int]]) -> torch.Tensor:
    """The engine's log-probs of each completion token given its prompt (prompt log-probs of the whole sequence)."""
    params = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
    seqs = [{"prompt_token_ids": p + c} for p, c in zip(prompt_rows, completions, strict=True)]
    outs = llm.generate(seqs, params, use_tqdm=False)
    width = max(len(c) for c in completions)
    lp = torch.zeros(len(completions), width)
    for i, (out, p, c) in enumerate(zip(outs, prompt_rows, completions, strict=True)):
        for j, tok in enumerate(c):
            lp[i, j] = out.prompt_logprobs[len(p) + j][tok].logprob
    return lp


def _on(model: Any, batch: Any) -> tuple[torch.device, list[torch.Tensor]]:
    device = next(model.parameters()).device
    return device, [
        t.to(device) for t in (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_lengths)
    ]


def _policy_logprobs(model: Any, batch: Any, temperature: float, bf16: bool) -> torch.Tensor:
    from trainer.update import autocast, completion_logprobs

    device, (p_ids, p_mask, c_ids, lengths) = _on(model, batch)
    with torch.no_grad(), autocast(device, bf16):
        lp, _ = completion_logprobs(model, p_ids, p_mask, c_ids, temperature, lengths=lengths)
    return lp.float().cpu()


def _max_gap(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return float(((a - b).abs() * mask).max())


def _mean_gap(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return float(((a - b).abs() * mask).sum() / mask.sum())


def _train_step(model: Any, batch: Any, lr: float, bf16: bool) -> None:
    """One AdamW step on the negative log-likelihood of the batch's completions (moves every weight by ~lr)."""
    from trainer.update import autocast, completion_logprobs

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    device, (p_ids, p_mask, c_ids, lengths) = _on(model, batch)
    with autocast(device, bf16):
        lp, _ = completion_logprobs(model, p_ids, p_mask, c_ids, 1.0, lengths=lengths)
    mask = batch.completion_mask.float().to(device)
    loss = -(lp.float() * mask).sum() / mask.sum()
    loss.backward()
    opt.step()
    model.eval()


def run_sync(args: argparse.Namespace) -> dict[str, Any]:
    import vllm
    from harness.cfg.trainer import VLLMSection
    from harness.vllm_engine import StaleEngineError
    from trainer.rollout.base import SamplingConfig
    from trainer.rollout.vllm import VLLMRollout

    bf16 = args.dtype == "bfloat16"
    model, tok = build_model(None, tied=not args.untied, seed=args.seed)
    model.to(args.device)
    started = time.perf_counter()
    rollout = VLLMRollout(
        model,
        tok,
        max_prompt_length=16,
        max_completion_length=16,
        seed=args.seed,
        max_num_seqs=32,
        bf16=bf16,
        settings=VLLMSection(dtype=args.dtype, enforce_eager=True, sleep=False, sync_check=args.check),
    )
    result: dict[str, Any] = {
        "engine_start_s": time.perf_counter() - started,
        "dtype": args.dtype,
        "tied": not args.untied,
        "seed": args.seed,
    }
    if args.sampler:
        result["sampler"] = {}
        for temperature in (1.0, 0.7):
            batch = rollout.generate(PROMPTS, 4, SamplingConfig(16, temperature=temperature))
            mine = _policy_logprobs(model, batch, temperature, bf16)
            assert batch.sampler_logp is not None, "the vLLM rollout returns its sampler's log-probs"
            result["sampler"][str(temperature)] = _max_gap(mine, batch.sampler_logp, batch.completion_mask.float())
    fixed = rollout.generate(PROMPTS, 2, SamplingConfig(16, temperature=1.0))
    prompts = [
        [t for t, m in zip(p.tolist(), pm.tolist(), strict=True) if m]
        for p, pm in zip(fixed.prompt_ids, fixed.prompt_mask, strict=True)
    ]
    comps = [c[: int(n)].tolist() for c, n in zip(fixed.completion_ids, fixed.completion_lengths, strict=True)]
    mask = fixed.completion_mask.float()

    def gap(key: str) -> None:
        eng = _engine_logprobs(rollout.llm, vllm, prompts, comps)
        mine, m = _policy_logprobs(model, fixed, 1.0, bf16)[:, : eng.shape[1]], mask[:, : eng.shape[1]]
        result[key], result[f"{key}_mean"] = _max_gap(eng, mine, m), _mean_gap(eng, mine, m)

    gap("initial")
    _train_step(model, fixed, args.lr, bf16)
    gap("before_sync")
    rollout.sync_weights()
    gap("after_sync")
    assert rollout.last_sync is not None
    result["layers_checked"] = rollout.last_sync.layers_checked
    # control: the same sync without re-processing the layers that share a weight
    import harness.vllm_engine.worker as worker

    worker.reprocess_shared_layers = lambda model: []  # type: ignore[assignment]
    _train_step(model, fixed, args.lr, bf16)
    try:
        rollout.sync_weights()
        result["control_raised"] = None
    except StaleEngineError as e:
        result["control_raised"] = str(e)
    gap("control_gap")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["model", "sync"])
    p.add_argument("--out", required=True)
    p.add_argument("--untied", action="store_true")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--sampler", action="store_true")
    p.add_argument("--check", default="sampled", choices=["sampled", "full"], help="trainer.vllm.sync_check")
    p.add_argument("--device", default="cpu", help="where the policy lives (cuda: the GPU check)")
    args = p.parse_args(argv)
    if args.what == "model":
        build_model(Path(args.out), tied=not args.untied, seed=args.seed)
        return 0
    Path(args.out).write_text(json.dumps(run_sync(args), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
