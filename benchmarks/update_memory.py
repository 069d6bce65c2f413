"""Peak CPU memory of one policy update: chunked log-probs (the trainer's path) beside the naive full-logits path.

A random-init Qwen2-style model with a real vocabulary size (151,936, Qwen2.5's) and a small hidden size, and a
batch of ``rows`` completions of ``completion`` tokens after a ``prompt``-token prompt. Each path runs in its own
subprocess (so neither sees the other's allocations): build the model and batch, compute the log-probs of the
batch once (kept for the equality check), reset the process's peak-RSS counter (``/proc/self/clear_refs``), take
one update (forward, loss, backward, AdamW step) through :func:`trainer.loop.policy_update`, and report the peak
resident memory above the resident memory at the start of the update. The naive path is the same update with
:func:`trainer.update.completion_logprobs` replaced by the former implementation: full logits from the model,
a float32 copy divided by the temperature, a log-softmax over the vocabulary, gathered.

    python benchmarks/update_memory.py                      # 4 x 1024 completion tokens, vocab 151,936
    python benchmarks/update_memory.py --rows 2 --completion 256 --json out.json

Prints both peaks, their ratio (goal: chunked <= 0.25 x naive) and the largest log-prob difference (goal:
<= 1e-5). Needs about 12 GB of free memory at the default size (the naive path's logits alone are 2.5 GB a copy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def _naive_completion_logprobs(model: Any, prompt_ids: Any, prompt_mask: Any, completion_ids: Any,
                               temperature: float, *, with_entropy: bool = False, chunk: Any = None,
                               **_: Any) -> Any:
    """The former implementation: full (B, T, V) logits, a float32 tempered copy, log-softmax, gather (rows that
    share a prompt are not packed: the rows here have prompts of their own)."""
    import torch

    from trainer.head import PolicyForward
    from trainer.losses import entropy_from_logits
    from trainer.rollout.hf import position_ids_from_mask

    if isinstance(model, PolicyForward):  # the update passes the model with its probed head map
        model = model.model
    t = completion_ids.shape[1]
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attn = torch.cat([prompt_mask, torch.ones_like(completion_ids)], dim=1)
    out = model(input_ids=ids, attention_mask=attn, position_ids=position_ids_from_mask(attn), use_cache=False,
                logits_to_keep=t + 1)
    logits = out.logits[:, :-1].float() / temperature  # (B, T, V)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids[..., None]).squeeze(-1)
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = entropy_from_logits(logits.detach())
    return logp, ent


def run_phase(path: str, a: argparse.Namespace, out: Path) -> None:
    """One path, in this process: writes {"peak_bytes", "base_bytes"} to ``out`` and the log-probs beside it."""
    import torch

    torch.set_num_threads(1)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import trainer.loop as loop
    import trainer.update as upd
    from trainer.losses import LossConfig
    from trainer.rollout.base import RolloutBatch

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                      num_hidden_layers=a.layers, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=a.prompt + a.completion + 8, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg)
    model.eval()
    g = torch.Generator().manual_seed(1)
    p_ids = torch.randint(0, a.vocab, (a.rows, a.prompt), generator=g)
    c_ids = torch.randint(0, a.vocab, (a.rows, a.completion), generator=g)
    ones = torch.ones_like
    batch = RolloutBatch(p_ids, ones(p_ids), c_ids, ones(c_ids), torch.zeros(a.rows, dtype=torch.bool), [""] * a.rows)
    if path == "naive":
        upd.completion_logprobs = _naive_completion_logprobs  # the baseline: the former implementation
    with torch.no_grad():
        logp, _ = upd.completion_logprobs(model, p_ids, ones(p_ids), c_ids, a.temperature)
    torch.save(logp, out.with_suffix(".pt"))
    del logp
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    adv = torch.linspace(-1.0, 1.0, a.rows)
    inputs = upd.UpdateInputs(adv, ones(c_ids).float())
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM (peak RSS) to the current RSS
    base = _status_kib("VmRSS")
    loop.policy_update(model, opt, sched, batch, inputs, LossConfig("grpo"), temperature=a.temperature,
                      max_grad_norm=1.0)
    peak = _status_kib("VmHWM")
    out.write_text(json.dumps({"peak_bytes": (peak - base) * 1024, "base_bytes": base * 1024}))


def _spawn(path: str, a: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", path, "--out", str(out), "--rows", str(a.rows), "--completion",
           str(a.completion), "--prompt", str(a.prompt), "--vocab", str(a.vocab), "--hidden", str(a.hidden),
           "--layers", str(a.layers), "--temperature", str(a.temperature)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, env=env)
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--completion", type=int, default=1024)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--vocab", type=int, default=151_936)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--phase", choices=["naive", "chunked"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.phase:
        run_phase(a.phase, a, Path(a.out))
        return {}
    import torch

    with tempfile.TemporaryDirectory() as d:
        res = {k: _spawn(k, a, Path(d) / f"{k}.json") for k in ("naive", "chunked")}
        diff = float((torch.load(Path(d) / "naive.pt") - torch.load(Path(d) / "chunked.pt")).abs().max())
    mib = 2**20
    ratio = res["chunked"]["peak_bytes"] / res["naive"]["peak_bytes"]
    print(f"update_memory: random-init Qwen2 (vocab {a.vocab:,}, hidden {a.hidden}, {a.layers} layers), {a.rows} x "
          f"{a.completion} completion tokens after {a.prompt} prompt tokens, temperature {a.temperature}; one update "
          "(forward, grpo loss, backward, AdamW step), float32, 1 thread; peak RSS above the update's start")
    print(f"naive full-logits path : {res['naive']['peak_bytes'] / mib:9.1f} MiB")
    print(f"chunked log-probs path : {res['chunked']['peak_bytes'] / mib:9.1f} MiB")
    print(f"ratio chunked / naive  : {ratio:.3f} (goal <= 0.25)")
    print(f"max |log-prob difference| : {diff:.2e} (goal <= 1e-5)")
    result = {"args": {k: v for k, v in vars(a).items() if k not in ("phase", "out", "json")},
              "naive_peak_bytes": res["naive"]["peak_bytes"], "chunked_peak_bytes": res["chunked"]["peak_bytes"],
              "ratio": ratio, "max_abs_logp_diff": diff}
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
