"""Our GRPO trainer against TRL's GRPOTrainer, side by side in one run, on the same tiny model and task.

Both train a random-init Qwen2-style model (2 layers, hidden 64, char-level tokenizer; built from a config, no
download) on the toy task (reward: count of "a" in the completion / 32), with G=8, 16 completions per step,
completion length 32, loss ``grpo`` with group std scaling, beta 0, the same optimizer settings, one torch thread.
Each trainer runs in its own child process (so peak RSS is its own), one after the other, ``--repeats`` times in
alternating order (``--concurrent`` runs the two at the same time, one core each). The parent prints median step time, median CPU seconds per step, peak RSS
and the reward curve for both, and the ratios (ours / TRL).

    OMP_NUM_THREADS=1 python benchmarks/trainer_vs_trl.py [--steps 100]

Goals: step time ratio <= 0.5, peak RSS ratio <= 1.0, final reward no worse. Wall-clock step times swing with
the machine's load; the CPU seconds per step (all threads of each process) are printed beside them because
they do not.
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

G, PROMPTS, LENGTH, LR, SEED = 8, 2, 32, 3e-3, 0


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _deltas(stamps: list[tuple[float, float]]) -> dict[str, list[float]]:
    """Per-step wall seconds and CPU seconds (all threads of the process) from step-end stamps."""
    pairs = list(zip(stamps[:-1], stamps[1:]))
    return {"step_s": [b[0] - a[0] for a, b in pairs], "cpu_s": [b[1] - a[1] for a, b in pairs]}


def run_ours(steps: int, out_dir: str) -> dict:
    import torch

    torch.set_num_threads(1)
    from harness.config import load_config
    from trainer import train

    cfg = load_config({
        "run": {"id": "bench", "output_dir": out_dir, "seed": SEED},
        "model": {"name_or_path": "toy:char"},
        "data": {"train": "toy:256", "chat_template": False},
        "rewards": {"char_count": {"weight": 1.0, "params": {"char": "a", "norm": float(LENGTH)}}},
        "trainer": {"loss": "grpo", "num_generations": G, "prompts_per_step": PROMPTS, "max_prompt_length": 16,
                    "max_completion_length": LENGTH, "lr": LR, "lr_scheduler": "linear", "max_steps": steps,
                    "max_grad_norm": 1.0, "beta": 0.0, "monitors": {"truncated_frac": 1.0}},
    })
    stamps = [_now()]
    res = train(cfg, progress=False, on_step=lambda s, m: stamps.append(_now()))
    return {**_deltas(stamps), "reward": [m["reward/total/mean"] for m in res.metrics], "peak_rss_mb": _peak_rss_mb()}


def run_trl(steps: int, out_dir: str) -> dict:
    import torch

    torch.set_num_threads(1)
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainer.toy import char_tokenizer, tiny_model, toy_samples

    tok = char_tokenizer()
    model = tiny_model(len(tok), seed=SEED)
    data = Dataset.from_list([{"prompt": s.prompt} for s in toy_samples(256, seed=SEED)])
    rewards: list[float] = []

    def count_a(completions, **kwargs):
        vals = [c.count("a") / LENGTH for c in completions]
        rewards.append(sum(vals) / len(vals))
        return vals

    class Stamp(TrainerCallback):
        def __init__(self) -> None:
            self.stamps = [_now()]

        def on_step_end(self, args, state, control, **kw):
            self.stamps.append(_now())

    args = GRPOConfig(
        output_dir=out_dir, per_device_train_batch_size=G * PROMPTS, num_generations=G, max_completion_length=LENGTH,
        learning_rate=LR, lr_scheduler_type="linear", max_steps=steps, max_grad_norm=1.0, beta=0.0, loss_type="grpo",
        scale_rewards="group", temperature=1.0, logging_steps=10_000, save_strategy="no", report_to="none",
        use_cpu=True, seed=SEED, bf16=False, disable_tqdm=True, log_level="error", disable_dropout=True, dataloader_num_workers=0,
    )
    stamp = Stamp()
    trainer = GRPOTrainer(model=model, reward_funcs=[count_a], args=args, train_dataset=data,
                          processing_class=tok, callbacks=[stamp])
    stamp.stamps = [_now()]
    trainer.train()
    return {**_deltas(stamp.stamps), "reward": rewards, "peak_rss_mb": _peak_rss_mb()}


def _children(steps: int, sequential: bool, order: tuple[str, str] = ("ours", "trl")) -> tuple[dict, dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as d:
        outs = {w: os.path.join(d, f"{w}.json") for w in order}
        procs = []
        for w, out in outs.items():
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", w, "--steps", str(steps), "--out", out],
                                          env=env))
            if sequential:
                procs[-1].wait()
        for pr in procs:
            if pr.wait() != 0:
                raise SystemExit(f"benchmark child failed: {pr.args}")
        return tuple(json.load(open(outs[w])) for w in order)  # type: ignore[return-value]


def _merge(runs: list[dict]) -> dict:
    """Several runs of one trainer: per-step times pooled, the peak RSS the largest, rewards of the first run."""
    return {"step_s": [x for r in runs for x in r["step_s"][1:]], "cpu_s": [x for r in runs for x in r["cpu_s"][1:]],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "reward": runs[0]["reward"]}


def _summary(r: dict) -> dict:
    rw = r["reward"]
    k = max(1, len(rw) // 10)
    return {"median_step_s": statistics.median(r["step_s"][1:] or r["step_s"]),
            "median_cpu_s": statistics.median(r["cpu_s"][1:] or r["cpu_s"]), "peak_rss_mb": r["peak_rss_mb"],
            "reward_first": statistics.mean(rw[:k]), "reward_final": statistics.mean(rw[-k:]),
            "curve": [round(statistics.mean(rw[i:i + k]), 3) for i in range(0, len(rw), k)]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--child", choices=["ours", "trl"])
    p.add_argument("--out")
    p.add_argument("--concurrent", action="store_true", help="run the two trainers at the same time")
    p.add_argument("--repeats", type=int, default=2,
                   help="runs of each trainer, in alternating order (ours-trl, trl-ours, ...) so a change in the "
                        "machine's load hits both; step times are pooled")
    a = p.parse_args()
    if a.child:
        with tempfile.TemporaryDirectory() as d:
            res = (run_ours if a.child == "ours" else run_trl)(a.steps, d)
        with open(a.out, "w") as f:
            json.dump(res, f)
        return
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for i in range(a.repeats):
        order = ("ours", "trl") if i % 2 == 0 else ("trl", "ours")
        for name, res in zip(order, _children(a.steps, not a.concurrent, order)):
            runs[name].append(res)
    ours, trl = _summary(_merge(runs["ours"])), _summary(_merge(runs["trl"]))
    print(f"{'':<8}{'median step s':>15}{'median CPU s':>14}{'peak RSS MB':>13}{'reward first':>14}{'reward final':>14}")
    for name, s in (("ours", ours), ("trl", trl)):
        print(f"{name:<8}{s['median_step_s']:>15.4f}{s['median_cpu_s']:>14.4f}{s['peak_rss_mb']:>13.0f}"
              f"{s['reward_first']:>14.3f}{s['reward_final']:>14.3f}")
    print(f"ratio   step time {ours['median_step_s'] / trl['median_step_s']:.2f} (goal <= 0.5)   "
          f"CPU time per step {ours['median_cpu_s'] / trl['median_cpu_s']:.2f}   "
          f"peak RSS {ours['peak_rss_mb'] / trl['peak_rss_mb']:.2f} (goal <= 1.0)   "
          f"final reward {ours['reward_final']:.3f} vs {trl['reward_final']:.3f}")
    print(f"reward curve (mean per tenth of the run)\n  ours {ours['curve']}\n  trl  {trl['curve']}")


if __name__ == "__main__":
    main()
