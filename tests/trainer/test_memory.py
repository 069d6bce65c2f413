"""Host memory handed back on the CPU (trainer/memory.py): the heap's free pages really leave the resident set, the
gradients of a backward with trims are the very same numbers, and no hook is left on the parameters.

The model is a random-init tiny transformers model built from a config (nothing is downloaded)."""

from __future__ import annotations

import copy
import os
import re
import sys
from pathlib import Path

import pytest
import torch

import trainer.memory
from trainer.memory import cap_kernel_cache, trim_heap, trim_points, trimmed_backward
from trainer.toy import char_tokenizer, tiny_model

linux_glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not trim_heap(), reason="malloc_trim and /proc are glibc/Linux only"
)


def _rss_mb() -> float:
    text = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+)", text, re.M).group(1)) / 1024  # type: ignore[union-attr]


@linux_glibc
def test_trim_heap_returns_freed_heap_memory_to_the_system():
    # 96 KiB tensors sit below glibc's initial mmap threshold (128 KiB): they come from the heap. Every other one is
    # kept, so the freed ones are holes that glibc keeps resident (nothing is at the heap's top to shrink it).
    tensors = [torch.ones(24 * 1024) for _ in range(2400)]  # 2400 x 96 KiB = 225 MiB
    keep = tensors[1::2]
    del tensors
    before = _rss_mb()
    assert trim_heap()
    after = _rss_mb()
    assert before - after > 50, (before, after)  # about 112 MiB of holes; glibc may have reused some already
    assert all(float(t[0]) == 1.0 for t in keep[:: len(keep) // 10])  # what is live is untouched


def _loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids).logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


@pytest.mark.parametrize("every", [None, 0, 1, 3])
def test_trimmed_backward_gives_the_same_gradients_and_leaves_no_hook(every):
    model = tiny_model(len(char_tokenizer()), seed=3)
    twin = copy.deepcopy(model)
    ids = torch.randint(0, len(char_tokenizer()), (4, 12), generator=torch.Generator().manual_seed(0))
    for k in range(2):  # two micro-batches: the second accumulates into existing gradients
        _loss(model, ids[2 * k : 2 * k + 2]).backward()
        with trimmed_backward(twin.parameters(), every=every):
            _loss(twin, ids[2 * k : 2 * k + 2]).backward()
    for (name, a), b in zip(model.named_parameters(), twin.parameters(), strict=True):
        assert a.grad is not None and torch.equal(a.grad, b.grad), name
        assert not getattr(b, "_post_accumulate_grad_hooks", None), name


def test_trim_points_get_denser_toward_the_end_of_the_backward():
    assert sorted(trim_points(272)) == [204, 255, 268, 271]
    assert sorted(trim_points(30)) == [23, 29] and trim_points(1) == set()
    assert all(0 < k < n for n in range(2, 400) for k in trim_points(n))


@linux_glibc
def test_trimmed_backward_by_default_trims_before_and_at_the_trim_points(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(trainer.memory, "trim_heap", lambda: calls.append(1) or True)
    model = tiny_model(len(char_tokenizer()), seed=3)
    ids = torch.randint(0, len(char_tokenizer()), (2, 8), generator=torch.Generator().manual_seed(0))
    with trimmed_backward(model.parameters()):
        _loss(model, ids).backward()
    n = sum(1 for p in model.parameters() if p.requires_grad)
    assert len(calls) == 1 + len(trim_points(n))


def test_trimmed_backward_does_nothing_to_parameters_that_do_not_train():
    model = tiny_model(len(char_tokenizer()), seed=4)
    frozen = next(model.parameters())
    frozen.requires_grad_(False)
    ids = torch.randint(0, len(char_tokenizer()), (2, 8), generator=torch.Generator().manual_seed(1))
    with trimmed_backward(model.parameters(), every=1):
        _loss(model, ids).backward()
    assert frozen.grad is None
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_cap_kernel_cache_sets_onednn_capacity_unless_the_user_did(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    cap_kernel_cache(64)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "7")
    cap_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "7"
