"""SmolLM2-135M-Instruct on this CPU: one GRPO-sized forward+backward in float32 vs bfloat16 autocast, 1 vs 2 threads.

The batch is what one step of ``harness demo --model smollm2`` trains on: 16 sequences of ``--tokens`` tokens
(prompt and completion). Each configuration runs ``--repeats`` times, interleaved so a change in the machine's load
hits all of them; the median wall time and CPU time per forward+backward are printed, with the ratios against
float32 on one thread. bfloat16 autocast on a CPU is only fast where the CPU has native bf16 instructions
(AVX512-BF16 or AMX); elsewhere it is slower than float32.

    python benchmarks/smollm2_cpu_precision.py [--tokens 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cache", default="runs/.cache", help="where the float32 copy of the model is kept")
    a = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch
    from transformers import AutoModelForCausalLM

    from harness.demo.run import _smollm2_float32

    model = AutoModelForCausalLM.from_pretrained(_smollm2_float32(Path(a.cache)), dtype=torch.float32)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.tokens), generator=torch.Generator().manual_seed(0))
    configs = [(t, bf16) for t in (1, 2) for bf16 in (False, True)]
    wall: dict[tuple[int, bool], list[float]] = {c: [] for c in configs}
    cpu: dict[tuple[int, bool], list[float]] = {c: [] for c in configs}
    for _ in range(a.repeats):
        for threads, bf16 in configs:
            torch.set_num_threads(threads)
            ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()
            model.zero_grad(set_to_none=True)
            w0, c0 = time.perf_counter(), time.process_time()
            with ctx:
                logits = model(input_ids=ids).logits  # (B, T, V)
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
            loss.backward()
            wall[(threads, bf16)].append(time.perf_counter() - w0)
            cpu[(threads, bf16)].append(time.process_time() - c0)
    base = statistics.median(wall[(1, False)])
    print(f"forward+backward of {a.batch} x {a.tokens} tokens, median of {a.repeats}")
    for c in configs:
        w, cp = statistics.median(wall[c]), statistics.median(cpu[c])
        print(f"threads {c[0]}  {'bf16 autocast' if c[1] else 'float32      '}  wall {w:6.2f} s  CPU {cp:6.2f} s  "
              f"wall ratio vs float32/1 thread {w / base:.2f}")


if __name__ == "__main__":
    main()
