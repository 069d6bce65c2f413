"""harness.threads: the ``auto`` thread rule, the oversubscription warning, and the config fields that carry it.

The rule's branches are checked without timing (``measure=False`` or a model below the size gate), so nothing here
depends on the machine's load; the one test that runs the microbenchmark asserts only that it returns a count the
machine has.
"""

from __future__ import annotations

import logging

import pytest
import torch
from pydantic import ValidationError

from harness.cfg.eval import EvalSection
from harness.cfg.trainer import TrainerSection
from harness.threads import (
    MIN_HIDDEN_TO_SPLIT,
    apply_threads,
    choose_threads,
    model_hidden_size,
    usable_cpus,
)


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_usable_cpus_within_the_machine() -> None:
    import os

    n = usable_cpus()
    assert 1 <= n <= (os.cpu_count() or 1)


def test_auto_uses_one_thread_for_a_small_model() -> None:
    choice = choose_threads("auto", hidden_size=64, device="cpu", env={})
    assert choice.threads == 1
    assert "too small" in choice.reason


def test_auto_unknown_size_is_one_thread() -> None:
    assert choose_threads("auto", hidden_size=None, device="cpu", env={}).threads == 1


def test_auto_follows_omp_num_threads_when_set() -> None:
    torch.set_num_threads(1)
    choice = choose_threads("auto", hidden_size=4096, device="cpu", env={"OMP_NUM_THREADS": "1"})
    assert choice.threads == 1
    assert choice.reason == "OMP_NUM_THREADS=1"


def test_auto_leaves_torch_default_on_a_gpu() -> None:
    torch.set_num_threads(1)
    choice = choose_threads("auto", hidden_size=4096, device="cuda:0", env={})
    assert choice.threads == torch.get_num_threads()
    assert "cuda" in choice.reason


def test_auto_large_model_never_exceeds_usable_cpus() -> None:
    choice = choose_threads("auto", hidden_size=MIN_HIDDEN_TO_SPLIT, device="cpu", env={}, measure=False)
    assert 1 <= choice.threads <= usable_cpus()
    measured = choose_threads("auto", hidden_size=MIN_HIDDEN_TO_SPLIT, device="cpu", env={})
    assert 1 <= measured.threads <= usable_cpus()


def test_explicit_count_kept_and_oversubscription_warned() -> None:
    n = usable_cpus() + 3
    choice = choose_threads(n, hidden_size=64, device="cpu", env={})
    assert choice.threads == n
    assert choice.warning is not None and f"only {usable_cpus()} CPU(s) are usable" in choice.warning


def test_bad_setting_names_the_problem() -> None:
    with pytest.raises(ValueError, match="positive integer or 'auto'"):
        choose_threads(0, hidden_size=64)


def test_apply_sets_torch_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(
        Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    )  # random-init, tiny: below the size gate
    assert model_hidden_size(model) == 32
    torch.set_num_threads(2)
    with caplog.at_level(logging.INFO, logger="harness.threads"):
        choice = apply_threads("auto", model, "cpu", what="trainer.threads")
    if "OMP_NUM_THREADS" not in __import__("os").environ:
        assert choice.threads == 1
    assert torch.get_num_threads() == choice.threads
    assert "trainer.threads" in caplog.text


@pytest.mark.parametrize("section", [TrainerSection, EvalSection])
def test_config_field(section: type) -> None:
    assert section().threads == "auto"
    assert section(threads=2).threads == 2
    with pytest.raises(ValidationError):
        section(threads=0)
    with pytest.raises(ValidationError):
        section(threads="many")


def test_auto_bf16_needs_a_cpu_with_native_bf16_and_a_large_model() -> None:
    from harness.threads import auto_bf16, cpu_has_bf16_matmul

    assert auto_bf16("cpu", 64)[0] is False
    assert auto_bf16("cpu", None)[0] is False
    assert auto_bf16("cuda:0", 4096)[0] is False
    on, why = auto_bf16("cpu", 4096)
    assert on is cpu_has_bf16_matmul(), why
