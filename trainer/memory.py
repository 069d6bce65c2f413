"""Host memory of a training step on the CPU: free heap memory handed back to the system where a phase frees it.

On a CPU, torch allocates every tensor with the C library's ``malloc``. glibc serves allocations below its mmap
threshold (which rises to 32 MiB once large blocks have been freed) from heaps that it keeps: memory freed there
stays in the process's resident set and is reused only by allocations that fit the holes. A GRPO step frees and
reallocates a lot of such memory in different shapes: the sampler's bfloat16 weight copies, one gradient per
weight tensor (freed after every optimizer step), the activations recomputed under gradient checkpointing. The
holes grow the peak resident set by a few hundred MB over what is live (``benchmarks/step_memory.py`` measures
each phase; docs/PERFORMANCE.md has the table). :func:`trim_heap` returns the free pages (``malloc_trim``); the
rollout calls it after sampling and :func:`trimmed_backward` around the update's backward. No number computed
changes.

Not done here: anything on a GPU (torch's caching allocator there is its own), and other C libraries (everything
here does nothing without glibc). A fixed mmap threshold (``mallopt``) also removes the holes, but measured 27-55%
more CPU time per step (page faults on every large allocation), so it is not used.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
from collections.abc import Iterable, Iterator
from typing import Any

import torch

__all__ = ["cap_kernel_cache", "trimmed_backward", "trim_heap"]

#: Inside a backward, the heap is trimmed when the parameters still waiting for their gradient fall to 1/4, 1/16,
#: 1/64, ... of them, and before the last one (SmolLM2-135M's 272: after 204, 255, 268 and 271 gradients).
SPACING = 4


@functools.cache
def _libc() -> Any | None:
    """glibc, when this process runs on it (``malloc_trim`` is glibc's own)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.malloc_trim.argtypes = [ctypes.c_size_t]
        lib.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return lib


def trim_heap() -> bool:
    """Return glibc's free heap memory to the system (``malloc_trim(0)``); False where there is no glibc."""
    lib = _libc()
    if lib is None:
        return False
    lib.malloc_trim(0)
    return True


def trim_points(n: int, spacing: int = SPACING) -> set[int]:
    """Gradient counts after which :func:`trimmed_backward` trims, for ``n`` parameters: where ``n // spacing``,
    ``n // spacing**2``, ... and 1 of them are still to come.

    >>> sorted(trim_points(272))
    [204, 255, 268, 271]
    """
    left, out = n // spacing, {n - 1} if n > 1 else set()
    while left >= 1:
        out.add(n - left)
        left //= spacing
    return out


@contextlib.contextmanager
def trimmed_backward(params: Iterable[torch.nn.Parameter], *, every: int | None = None) -> Iterator[None]:
    """Around a backward on the CPU: hand the heap's free memory back first (what the forward freed), and again
    as the gradients accumulate (what the recomputed layers freed), so that what the backward's temporaries left
    free is not counted in the resident set when it peaks. The gradients only grow during a backward, so its peak
    comes at the end: the trims come at :func:`trim_points`, closer together toward the end (``every``: after
    every ``every`` gradients instead; 0: only before). Does nothing on a GPU or without glibc; the gradients are
    the same either way."""
    ps = [p for p in params if p.requires_grad and p.device.type == "cpu"]
    if not ps or not trim_heap():
        yield
        return
    done = [0]
    points = trim_points(len(ps)) if every is None else set()

    def hook(_: torch.Tensor) -> None:
        done[0] += 1
        if (every and done[0] % every == 0) or done[0] in points:
            trim_heap()

    handles = [p.register_post_accumulate_grad_hook(hook) for p in ps] if every != 0 else []
    try:
        yield
    finally:
        for h in handles:
            h.remove()


#: Kernels oneDNN keeps compiled (its default is 1024). Each new matmul shape (bfloat16 on the CPU: every packed
#: length, every KV length of the sampler) adds one with its scratch memory: SmolLM2 grew by about 13 MB per step.
KERNEL_CACHE = 32


def cap_kernel_cache(capacity: int = KERNEL_CACHE) -> None:
    """Cap oneDNN's cache of compiled kernels (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``) unless the user set it; it takes
    effect where oneDNN has not created a kernel yet in this process. Results are the same; an evicted shape is
    compiled again when it recurs."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))
