"""Where a GRPO step's CPU time goes: CPU seconds of each phase of our trainer, step by step.

Runs our trainer on SmolLM2-135M-Instruct in the configuration of ``benchmarks/real_model_vs_trl.py`` (2 prompts x
G=8, 24 tokens, beta 0, gradient checkpointing, bf16 autocast where the CPU has it, shared-prompt packing, one
thread) and wraps the step's parts with ``time.process_time`` (this process's user + system CPU, so other load on
the machine changes the numbers less than wall time): the rollout, and inside it the lean decoder's set-up (the
bfloat16 weight copies), its prefill, its one-token steps and the sampling of each token; the packing check; the
update's forward with grad, its backward (gradient checkpointing's recomputation and the heap trims included); the
optimizer step (clip, AdamW); the heap trims themselves (``trainer.memory.trim_heap``, inside the phases above).
Each phase also counts its minor page faults (``getrusage``): every fresh 4 KiB page a tensor touches for the first
time costs the kernel a fault and a zeroing, a few microseconds each, in the phase that touches it.

    python benchmarks/step_phases.py [--steps 4] [--bf16 auto|on|off] [--profile STEP]

``--profile STEP`` also prints torch.profiler's operator table of that step (the profiler's own overhead inflates
short operators). Not measured: memory (``benchmarks/step_memory.py``), TRL (``real_model_vs_trl.py``).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

G, PROMPTS, LENGTH, LR, TEMP, SEED, SYSTEM = 8, 2, 24, 1e-5, 0.8, 0, "Answer briefly."

SECONDS: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
FAULTS: dict[str, int] = defaultdict(int)
LABELS: list[str] = []  # in the order they were wrapped (sub-phases after their phase)


def _timed(owner: Any, attr: str, label: str) -> None:
    fn: Callable[..., Any] = getattr(owner, attr)
    LABELS.append(label)

    def wrapped(*args: Any, **kw: Any) -> Any:
        t, f = time.process_time(), _faults()
        try:
            return fn(*args, **kw)
        finally:
            SECONDS[label] += time.process_time() - t
            FAULTS[label] += _faults() - f
            CALLS[label] += 1

    setattr(owner, attr, wrapped)


def _faults() -> int:
    """Minor page faults of this process so far (each a fresh page of memory touched for the first time)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _instrument() -> None:
    import torch

    import trainer.loop as loop
    import trainer.memory as memory
    import trainer.rollout.fast_decode as fd
    import trainer.rollout.hf as hf
    import trainer.update as update

    _timed(loop, "collect", "rollout")
    _timed(fd.LeanDecoder, "__init__", "  decoder set-up (bf16 weight copies)")
    _timed(fd.LeanDecoder, "prefill", "  prefill (once per group)")
    _timed(fd.LeanDecoder, "step", "  decode steps (one token, all rows)")
    _timed(hf, "sample_next", "  sampling a token")
    _timed(update, "_packing_gap", "packing check (new packed lengths only)")
    _timed(update.UpdateBatch, "logprobs", "forward with grad")
    _timed(torch.Tensor, "backward", "backward (recomputation, trims included)")
    _timed(loop, "optimizer_step", "optimizer step")
    _timed(torch.nn.utils, "clip_grad_norm_", "  clip")
    _timed(torch.optim.AdamW, "step", "  AdamW")
    _timed(memory, "trim_heap", "heap trims (inside the phases above)")
    hf.trim_heap = memory.trim_heap  # imported by name there
    _timed(loop, "_save", "checkpoint save")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--profile", type=int, default=0, help="print torch.profiler's operator table of this step")
    a = p.parse_args()
    import torch

    torch.set_num_threads(1)
    import trainer.loop as loop
    from harness.config import load_config
    from harness.demo.run import smollm2_float32
    from harness.demo.word_problems import write_word_problems

    _instrument()
    rows: list[tuple[int, float, int, dict[str, float], dict[str, int], dict[str, int]]] = []
    with tempfile.TemporaryDirectory(prefix="step-phases-") as tmp:
        model = smollm2_float32(Path(tempfile.gettempdir()) / "harness-smollm2-cache")
        data = Path(tmp) / "data"
        write_word_problems(data, 64, 8, seed=SEED)
        cfg = load_config(
            {
                "run": {"id": "phases", "output_dir": tmp, "seed": SEED},
                "model": {"name_or_path": model},
                "data": {"train": str(data / "train.jsonl"), "chat_template": True, "system_prompt": SYSTEM},
                "rewards": {"math": {"weight": 1.0}, "boxed_present": {"weight": 0.2}},
                "trainer": {
                    "loss": "grpo",
                    "num_generations": G,
                    "prompts_per_step": PROMPTS,
                    "max_prompt_length": 128,
                    "max_completion_length": LENGTH,
                    "lr": LR,
                    "max_steps": a.steps,
                    "temperature": TEMP,
                    "beta": 0.0,
                    "max_grad_norm": 1.0,
                    "save_steps": a.steps,
                    "score_workers": 2,
                    "gradient_checkpointing": True,
                    "packing": "auto",
                    "bf16": {"auto": None, "on": True, "off": False}[a.bf16],
                    "threads": 1,
                },
            }
        )
        mark = {"cpu": time.process_time(), "flt": _faults(), "secs": dict(SECONDS), "calls": dict(CALLS)}
        mark["faults"] = dict(FAULTS)
        prof: list[Any] = []

        def on_step(s: int, m: dict[str, Any]) -> None:
            secs = {k: v - mark["secs"].get(k, 0.0) for k, v in SECONDS.items()}
            calls = {k: v - mark["calls"].get(k, 0) for k, v in CALLS.items()}
            faults = {k: v - mark["faults"].get(k, 0) for k, v in FAULTS.items()}
            rows.append((s, time.process_time() - mark["cpu"], _faults() - mark["flt"], secs, calls, faults))
            if prof and s == a.profile:
                prof[0].__exit__(None, None, None)
                table = prof[0].key_averages(group_by_input_shape=True)
                print(table.table(sort_by="self_cpu_time_total", row_limit=40))
            if a.profile and s == a.profile - 1:
                cpu = [torch.profiler.ProfilerActivity.CPU]
                prof.append(torch.profiler.profile(activities=cpu, record_shapes=True))
                prof[0].__enter__()
            mark.update(cpu=time.process_time(), flt=_faults(), secs=dict(SECONDS), calls=dict(CALLS))
            mark["faults"] = dict(FAULTS)

        loop.train(cfg, progress=False, on_step=on_step)
    for s, total, flt, secs, calls, faults in rows:
        print(f"step {s}: {total:.2f} CPU s, {flt / 1000:.0f}k page faults (the first step also pays for warm-up)")
        for k in LABELS:
            if calls.get(k):
                print(f"  {k:<46}{secs[k]:8.2f} s  ({calls[k]} calls, {faults[k] / 1000:.0f}k faults)")


if __name__ == "__main__":
    main()
