"""The `trainer` section of a run config (owned by the GRPO trainer).

Every field is documented once, here. Settings whose right value depends on the loss (``scale_rewards`` for
Dr. GRPO, clip-higher and dynamic sampling for DAPO, the tiny GSPO clip range) default to ``None`` and resolve
to the source paper's value for the chosen loss in :meth:`TrainerSection.resolved`, so a recipe cannot forget
one of them. Checks that need only numbers (groups that do not divide, G < 2, impossible lengths) run here,
before any model is loaded; checks that need a tokenizer run in the trainer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "TrainerSection",
    "VLLMSection",
    "LoraSection",
    "MonitorSection",
    "LossType",
    "ScaleRewards",
    "Packing",
    "LOSS_DEFAULTS",
    "LossSettings",
]

log = logging.getLogger(__name__)

LossType = Literal["grpo", "bnpo", "dr_grpo", "dapo", "gspo", "cispo"]
Packing = Literal["off", "auto", "on"]
ScaleRewards = Literal["group", "batch", "none"]

#: Per-loss defaults from the source papers, applied where a field is left as None.
LOSS_DEFAULTS: dict[str, dict[str, object]] = {
    "grpo": {
        "scale_rewards": "group",
        "epsilon": 0.2,
        "epsilon_high": None,
        "dynamic_sampling": False,
        "mask_truncated": False,
    },
    "bnpo": {
        "scale_rewards": "group",
        "epsilon": 0.2,
        "epsilon_high": None,
        "dynamic_sampling": False,
        "mask_truncated": False,
    },
    # Dr. GRPO (2503.20783): no std scaling and a constant normalizer; both or neither.
    "dr_grpo": {
        "scale_rewards": "none",
        "epsilon": 0.2,
        "epsilon_high": None,
        "dynamic_sampling": False,
        "mask_truncated": False,
    },
    # DAPO (2503.14476): clip-higher 0.2/0.28, dynamic sampling, overlong filtering, token-level loss.
    "dapo": {
        "scale_rewards": "group",
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "dynamic_sampling": True,
        "mask_truncated": True,
    },
    # GSPO (2507.18071): sequence-level ratio with a much smaller clip range (3e-4 / 4e-4).
    "gspo": {
        "scale_rewards": "group",
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "dynamic_sampling": False,
        "mask_truncated": False,
    },
    # CISPO (2506.13585): the IS weight is capped by cispo_cap, not by epsilon.
    "cispo": {
        "scale_rewards": "group",
        "epsilon": 0.2,
        "epsilon_high": None,
        "dynamic_sampling": False,
        "mask_truncated": False,
    },
}


@dataclass(frozen=True)
class LossSettings:
    """The per-loss settings in force (:meth:`TrainerSection.loss_settings`): the run's value, else the loss's paper
    default; none of them is None."""

    scale_rewards: ScaleRewards
    epsilon: float
    epsilon_high: float
    dynamic_sampling: bool
    mask_truncated: bool


_T = TypeVar("_T")


def _filled(value: _T | None, name: str, loss: str) -> _T:
    if value is None:  # LOSS_DEFAULTS names every field for every loss; a new loss without one lands here
        raise ValueError(f"trainer.{name}: no value given and loss {loss!r} has no default for it in LOSS_DEFAULTS")
    return value


class LoraSection(BaseModel):
    """Optional LoRA adapters through peft (the base weights stay frozen)."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] | str = "all-linear"


class MonitorSection(BaseModel):
    """Thresholds of the loud warnings (see trainer/monitors.py)."""

    model_config = ConfigDict(extra="forbid")

    window: int = Field(10, ge=2, description="steps a condition must hold before it warns")
    zero_variance_frac: float = Field(0.9, ge=0.0, le=1.0, description="variance collapse: this fraction of groups")
    kl_max: float = Field(1.0, gt=0.0, description="warn when the mean KL to the reference exceeds this")
    truncated_frac: float = Field(0.5, ge=0.0, le=1.0, description="warn when more completions are truncated")
    unscored_frac: float = Field(0.1, ge=0.0, le=1.0, description="warn when a reward leaves more unscored")


class VLLMSection(BaseModel):
    """The colocated vLLM engine of ``backend: vllm`` (see trainer/rollout/vllm.py)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_utilization: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="share of the GPU the engine may claim at start-up (vLLM checks it against "
        "free memory); default: what the weights and KV cache need, within the free memory",
    )
    kv_cache_bytes: int | None = Field(
        None, ge=1, description="KV cache size; default: one rollout call's sequences at full length, plus 25%"
    )
    enforce_eager: bool = Field(False, description="no CUDA graphs (faster start-up, slower decoding)")
    sleep: bool = Field(
        True,
        description="free the engine's GPU memory during the update (vLLM sleep mode; off where the platform "
        "has none, e.g. CPU)",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="engine dtype; auto: bfloat16 on CUDA, the trainer's compute precision on CPU"
    )
    sync_check: Literal["sampled", "full"] = Field(
        "sampled",
        description="check after each weight sync: sampled entries of the head, the embedding and two other "
        "layers; full: every layer (also on with debug logging)",
    )
    is_cap: float | None = Field(
        3.0,
        gt=1.0,
        description="cap of the truncated importance-sampling weight "
        "pi_trainer / pi_sampler per token; null turns the correction off",
    )


class TrainerSection(BaseModel):
    """GRPO trainer settings; see trainer/ for their meaning."""

    model_config = ConfigDict(extra="forbid")

    # what is optimized
    loss: LossType = Field("grpo", description="grpo | bnpo | dr_grpo | dapo | gspo | cispo")
    scale_rewards: ScaleRewards | None = Field(None, description="advantage scale: group std, batch std, none")
    epsilon: float | None = Field(None, gt=0.0, description="lower clip range (ratio >= 1 - epsilon)")
    epsilon_high: float | None = Field(None, gt=0.0, description="upper clip range (ratio <= 1 + epsilon_high)")
    cispo_cap: float = Field(5.0, gt=1.0, description="cispo: absolute cap on the stop-gradient IS weight")
    beta: float = Field(0.0, ge=0.0, description="k3 KL coefficient; 0 skips the reference model")
    # batch shape
    num_generations: int = Field(8, ge=2, description="G, completions per prompt")
    prompts_per_step: int = Field(2, ge=1, description="groups per optimizer step (all ranks together)")
    micro_batch_size: int | None = Field(None, ge=1, description="completions per forward/backward (accumulation)")
    micro_batch_tokens: int | None = Field(
        None,
        ge=1,
        description="padded tokens (rows x (prompt + completion)) "
        "per forward/backward; with micro_batch_size, both bound each one",
    )
    packing: Packing = Field(
        "auto",
        description="run the completions of one prompt as one sequence, the prompt computed once "
        "(trainer/packing.py); auto: where that costs fewer FLOPs (not with FSDP); on: wherever a prompt is "
        "shared; off: never. The former pack_prompts (true/false/null) is read as on/off/auto",
    )
    mu: int = Field(1, ge=1, description="optimizer passes over each generation batch")
    # sampling
    max_prompt_length: int = Field(256, ge=1)
    max_completion_length: int = Field(256, ge=1)
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="must be 1: the loss uses full-softmax log-probs")
    dynamic_sampling: bool | None = Field(None, description="drop zero-variance groups and refill (DAPO)")
    max_resample_rounds: int = Field(3, ge=0, description="bound on dynamic-sampling refills per step")
    mask_truncated: bool | None = Field(None, description="overlong filtering: no loss on truncated completions")
    rollout_chunks: int = Field(1, ge=1, description="generate in parts, scoring each while the next is generated")
    # optimization
    max_steps: int = Field(100, ge=1)
    lr: float = Field(1e-6, gt=0.0)
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    bf16: bool | None = Field(
        None,
        description="bf16 autocast over float32 weights (update and sampling); default: on with a CUDA GPU, "
        "model.dtype bfloat16, or a CPU with AVX512-BF16/AMX and hidden size >= 512 (harness/threads.py)",
    )
    gradient_checkpointing: bool | None = Field(
        None, description="recompute activations in backward; default: on with a CUDA GPU"
    )
    lora: LoraSection | None = None
    # machinery
    backend: Literal["hf", "vllm"] = "hf"
    vllm: VLLMSection = Field(default_factory=VLLMSection, description="the colocated vLLM engine")
    score_timeout: float | None = Field(None, gt=0.0, description="per-call reward time limit (scoring default)")
    score_workers: int | None = Field(None, ge=1)
    save_steps: int = Field(0, ge=0, description="checkpoint every N steps (0: only at the end)")
    monitors: MonitorSection = Field(default_factory=MonitorSection)
    # sharding over ranks (trainer/fsdp.py)
    parallel: Literal["auto", "ddp", "fsdp"] = Field(
        "auto",
        description="ddp: the whole model on every rank; fsdp: parameters, gradients and optimizer state "
        "sharded over ranks (FSDP2); auto: ddp on one node whose GPU holds the training state, fsdp otherwise",
    )
    fsdp_cpu_offload: bool = Field(False, description="fsdp: keep shards, gradients and optimizer state in host memory")
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="CPU threads for torch's matmuls; auto: OMP_NUM_THREADS when set, else one thread unless the "
        "model is large enough to split and a microbenchmark on idle CPUs shows a speed-up (harness/threads.py)",
    )

    @model_validator(mode="before")
    @classmethod
    def _pack_prompts_alias(cls, data: object) -> object:
        """The deprecated ``pack_prompts`` (true / false / null) as ``packing`` (on / off / auto)."""
        if not isinstance(data, dict) or "pack_prompts" not in data:
            return data
        data = dict(data)
        old = data.pop("pack_prompts")
        if old not in (True, False, None):
            raise ValueError(f"pack_prompts={old!r}: expected true, false or null (better: packing: on | off | auto)")
        new = {True: "on", False: "off", None: "auto"}[old]
        if "packing" in data and data["packing"] != new:
            raise ValueError(
                f"pack_prompts={old} and packing={data['packing']!r} disagree; keep only packing (off | auto | on)"
            )
        data["packing"] = new
        log.warning("trainer.pack_prompts is deprecated: read as packing: %s (write that instead)", new)
        return data

    @model_validator(mode="after")
    def _batch_shapes(self) -> TrainerSection:
        per_step = self.prompts_per_step * self.num_generations
        if self.micro_batch_size is not None and per_step % self.micro_batch_size:
            raise ValueError(
                f"micro_batch_size={self.micro_batch_size} does not divide prompts_per_step * num_generations = "
                f"{self.prompts_per_step} * {self.num_generations} = {per_step}; pick a divisor of {per_step}"
            )
        if self.top_p < 1.0:
            raise ValueError(
                f"top_p={self.top_p}: the trainer's log-probs are those of the full tempered softmax, so nucleus "
                "sampling would make every step off-policy in a way the loss does not see; use top_p: 1.0 "
                "(temperature still applies)"
            )
        if self.max_prompt_length + self.max_completion_length > 1_000_000:
            raise ValueError("max_prompt_length + max_completion_length is over a million tokens; lower them")
        if self.warmup_steps > self.max_steps:
            raise ValueError(f"warmup_steps={self.warmup_steps} exceeds max_steps={self.max_steps}")
        eps = self.resolved_value("epsilon")
        if isinstance(eps, (int, float)) and eps >= 1.0:
            raise ValueError(f"epsilon={eps} must be below 1 (the ratio is clipped at 1 - epsilon)")
        return self

    def resolved_value(self, name: str) -> object:
        """The field's value, or the chosen loss's paper default when it is None."""
        v = getattr(self, name)
        if v is None and name in LOSS_DEFAULTS[self.loss]:
            v = LOSS_DEFAULTS[self.loss][name]
        if v is None and name == "epsilon_high":  # symmetric clipping unless the loss says otherwise
            v = self.resolved_value("epsilon")
        return v

    def resolved(self) -> TrainerSection:
        """A copy with every per-loss ``None`` replaced by the loss's paper default."""
        return self.model_copy(update={k: self.resolved_value(k) for k in LOSS_DEFAULTS[self.loss]})

    def loss_settings(self) -> LossSettings:
        """The per-loss settings in force, typed without ``None`` (what :meth:`resolved` fills in)."""
        r = self.resolved()
        return LossSettings(
            scale_rewards=_filled(r.scale_rewards, "scale_rewards", self.loss),
            epsilon=_filled(r.epsilon, "epsilon", self.loss),
            epsilon_high=_filled(r.epsilon_high, "epsilon_high", self.loss),
            dynamic_sampling=_filled(r.dynamic_sampling, "dynamic_sampling", self.loss),
            mask_truncated=_filled(r.mask_truncated, "mask_truncated", self.loss),
        )
