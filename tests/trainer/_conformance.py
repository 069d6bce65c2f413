"""The trainer's log-probs against each architecture's own forward: the measurements behind the conformance matrix.

Every model here is random-init from a tiny config (no download). Random init leaves the next-token distribution
nearly uniform, where positions and masks hardly change a log-prob and a broken layout could pass; so every weight
matrix is multiplied by ``Arch.weight_scale`` (8) after init, and the controls (:func:`controls`) measure how far
a corrupted position or mask moves the log-probs: nats, where the tolerances are 1e-4.

The reference is each row's own forward, ``model(input_ids).logits`` on ``[prompt, completion]`` without padding,
log-softmaxed in float32: the function a user of the model means. The trainer's paths get the same rows as a
rollout lays them out (prompts left-padded, completions right-padded, two prompts shared by three rows each).

Run as a script to print the matrix (architecture x mode: max |d log-prob|, max relative d grad, packed or plain).
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from trainer import packing
from trainer.config import Packing
from trainer.head import PolicyForward, probe_logit_map
from trainer.logprobs import sequence_logprobs
from trainer.rollout.base import left_pad, right_pad
from trainer.setup import disable_dropout, enable_checkpointing
from trainer.update import completion_logprobs

VOCAB = 128
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=512,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


@dataclass(frozen=True)
class Arch:
    """One architecture family: its transformers ``model_type``, config overrides and attention implementation."""

    name: str
    model_type: str
    extra: dict = field(default_factory=dict)
    attn: str = "sdpa"
    weight_scale: float = 8.0


# Each family a GRPO user plausibly loads; overrides keep it tiny or exercise what the family does around its head
# (scales, caps) and its windows (small enough that the packed sequences here exceed them).
ARCHS = [
    Arch("llama", "llama"),
    Arch("qwen2", "qwen2"),
    Arch("qwen3", "qwen3"),
    Arch("qwen3_moe", "qwen3_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    Arch("mistral", "mistral"),
    Arch("mistral_window8", "mistral", {"sliding_window": 8}),
    Arch("mixtral", "mixtral", {"num_local_experts": 4}),
    Arch("phi3", "phi3"),
    Arch("phi", "phi"),
    Arch("gpt2", "gpt2"),
    Arch("gpt_neox", "gpt_neox"),
    Arch("gpt_neo", "gpt_neo", {"attention_types": [[["global", "local"], 1]], "window_size": 256}, "eager"),
    Arch("gpt_neo_window16", "gpt_neo", {"attention_types": [[["global", "local"], 1]], "window_size": 16}, "eager"),
    Arch("gptj", "gptj", {"rotary_dim": 8}),
    Arch("olmo", "olmo"),
    Arch("olmo2", "olmo2"),
    Arch("stablelm", "stablelm"),
    Arch("falcon", "falcon"),
    Arch("bloom", "bloom", {}, "eager"),
    Arch("opt", "opt", {"ffn_dim": 128, "word_embed_proj_dim": 64}),
    Arch("starcoder2", "starcoder2"),
    Arch("granite", "granite", {"logits_scaling": 0.5}),
    Arch("granitemoe", "granitemoe", {"logits_scaling": 0.5, "num_local_experts": 4}),
    Arch("cohere", "cohere", {"logit_scale": 2.0}),
    Arch("cohere2", "cohere2", {"logit_scale": 2.0}),
    Arch("gemma", "gemma"),
    Arch("gemma2", "gemma2", {"final_logit_softcapping": 3.0}, "eager"),
    Arch("gemma3_text", "gemma3_text", {"final_logit_softcapping": 3.0, "sliding_window": 32}),
    Arch("llama4_text", "llama4_text", {"attention_chunk_size": 32}),
    # MiniCPM3's latent attention is float32-noisy at weight scale 8 (its own batched forward differs from its
    # per-row forward by 3e-5): at 4 its controls still move nats
    Arch("minicpm3", "minicpm3", {"num_key_value_heads": 4, "dim_model_base": 16, "scale_emb": 1.0}, weight_scale=4.0),
    Arch("smollm3", "smollm3"),
    Arch("glm4", "glm4"),
    Arch("exaone4", "exaone4"),
    Arch("nanochat", "nanochat"),
]
BY_NAME = {a.name: a for a in ARCHS}
#: families without position ids (ALiBi): only the mask controls apply
NO_POSITION_IDS = {"bloom"}


def build(arch: Arch, seed: int = 0) -> Any:
    """The tiny random-init model of ``arch``, float32, dropout off, eval mode, weights scaled."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(arch.model_type, **{**COMMON, **arch.extra})
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation=arch.attn)
    finally:
        torch.random.set_rng_state(state)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.mul_(arch.weight_scale)
    disable_dropout(model)
    return model.eval()


@dataclass
class Rows:
    """Two prompts (7 and 4 tokens) x 3 completions of ragged lengths (1-6 tokens): packed lengths 21 and 15."""

    prompts: list[list[int]]
    completions: list[list[int]]
    p_ids: torch.Tensor
    p_mask: torch.Tensor
    c_ids: torch.Tensor
    c_mask: torch.Tensor
    weights: torch.Tensor  # (B, T) the weights of sum(w * logp), whose gradient is compared


def rows(seed: int = 5, prompt_lens: tuple[int, int] = (7, 4), comp_lens: tuple[int, ...] = (6, 3, 5, 1, 6, 4)) -> Rows:
    g = torch.Generator().manual_seed(seed)
    pa, pb = (torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in prompt_lens)
    comps = [torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in comp_lens]
    half = len(comps) // 2
    prompts = [pa] * half + [pb] * (len(comps) - half)
    p_ids, p_mask = left_pad([torch.tensor(p) for p in prompts], 0)
    c_ids, c_mask = right_pad([torch.tensor(c) for c in comps], 0)
    w = torch.linspace(-1.0, 1.0, c_ids.numel(), dtype=torch.float32).reshape(c_ids.shape) * c_mask
    return Rows(prompts, comps, p_ids, p_mask, c_ids, c_mask, w)


def reference(model: Any, r: Rows) -> torch.Tensor:
    """(B, T) float32 log-probs from each row's own ``model(input_ids).logits`` (0 past a completion's end)."""
    out = []
    for p, c in zip(r.prompts, r.completions, strict=True):
        logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        out.append(torch.cat([lp, lp.new_zeros(r.c_ids.shape[1] - len(c))]))
    return torch.stack(out)


def grad_rel(a: Any, b: Any) -> float:
    """Largest ||grad_a - grad_b|| / ||grad_b|| over the trainable parameters of two copies of a model.

    A parameter whose true gradient is 0 (a key bias: softmax ignores a constant added to every score of a query)
    has a gradient of rounding noise in both; its denominator is floored at 1e-3 of the largest parameter's."""
    pairs = [
        (n, p.grad, q.grad)
        for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True)
        if p.requires_grad
    ]
    for name, g, h in pairs:
        assert g is not None and h is not None, name
    floor = 1e-3 * max(float(h.norm()) for _, _, h in pairs)
    return max(float((g - h).norm()) / max(float(h.norm()), floor) for _, g, h in pairs)


@dataclass
class Cell:
    """One (architecture, mode) measurement."""

    dlogp: float  # max |trainer log-prob - the model's own| over real completion tokens
    dgrad: float | None  # max relative gradient difference (None: not measured)
    packed: bool  # the trainer packed this micro-batch
    tol: float = 1e-4  # what dlogp must be within


def _mode(model: Any, r: Rows, pack: Packing, *, grads: bool = True) -> Cell:
    """The trainer's log-probs (and gradients) of ``model`` against its own forward on a twin copy."""
    twin = copy.deepcopy(model)
    fwd = PolicyForward.of(model)
    got, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing=pack)
    want = reference(twin, r)
    real = r.c_mask.bool()
    cell = Cell(float((got - want).detach()[real].abs().max()), None, bool(fwd.packing.checked.get("float32")))
    if grads:
        (got * r.weights).sum().backward()
        (want * r.weights).sum().backward()
        cell.dgrad = grad_rel(model, twin)
    return cell


def _lora(model: Any) -> Any:
    """LoRA (rank 4) on every plain linear layer but the head, with B drawn at random (B = 0 would make the
    adapters invisible). MoE routers (Llama4's is a Linear that returns a tuple) are left out."""
    from peft import LoraConfig, get_peft_model
    from transformers.pytorch_utils import Conv1D

    head = model.get_output_embeddings()
    linear = (torch.nn.Linear, Conv1D)
    names = [n for n, m in model.named_modules() if isinstance(m, linear) and m is not head and "router" not in n]
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=names, task_type="CAUSAL_LM")
    state = torch.random.get_rng_state()
    torch.manual_seed(1)  # lora_A's init draws from the global generator: seeded, so every run measures the same
    try:
        peft_model = get_peft_model(model, cfg)
    finally:
        torch.random.set_rng_state(state)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(std=0.5, generator=g)
    return peft_model


def _bf16(model: Any, r: Rows) -> Cell:
    """Plain and packed log-probs under bf16 autocast against the float32 reference; the tolerance is twice the
    model's own bf16 forward's distance to it (plus 1e-3)."""
    want = reference(model, r)
    real = r.c_mask.bool()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        own = reference(model, r)
        fwd = PolicyForward.of(model)
        plain, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing="off")
        packed, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing="on")
    tol = 2.0 * float((own - want).detach()[real].abs().max()) + 1e-3
    d = max(float((plain - want).detach()[real].abs().max()), float((packed - want).detach()[real].abs().max()))
    return Cell(d, None, bool(fwd.packing.checked.get("bfloat16")), tol)


def controls(model: Any, r: Rows) -> dict[str, float]:
    """How far corrupted positions or masks move the log-probs from the model's own (max |d|, nats): the plain
    layout with every position 0 or the prompt's first two tokens masked out, the packed layout with every
    position 0 or completions that see each other (left out where the packed pass cannot run at all). A test whose
    controls move nothing could not fail."""
    fwd = PolicyForward.of(model)
    real = r.c_mask.bool()
    with torch.no_grad():
        want = reference(model, r)
        ids = torch.cat([r.p_ids, r.c_ids], 1)
        attn = torch.cat([r.p_mask, torch.ones_like(r.c_ids)], 1)
        pos = (attn.cumsum(1) - 1).clamp_min(0)
        hidden = attn.clone()
        first = attn.argmax(1)
        for i, f in enumerate(first.tolist()):
            hidden[i, f : f + 2] = 0

        def plain(a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            return sequence_logprobs(model, ids, a, p, r.c_ids, logit_map=fwd.logit_map)[0]

        pk = packing.layout(r.p_ids, r.p_mask, r.c_ids, r.c_mask.sum(1))
        causal = torch.ones(pk.allowed.shape[-2:], dtype=torch.bool).tril().expand_as(pk.allowed)

        def packed(allowed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            lp, _ = sequence_logprobs(
                model,
                pk.input_ids,
                packing.attention_mask_for(model, allowed),
                positions,
                pk.targets,
                predict=pk.predict,
                logit_map=fwd.logit_map,
            )
            return torch.zeros_like(want).index_put((pk.rows, pk.cols), lp)

        out = {
            "plain_positions": plain(attn, torch.zeros_like(pos)),
            "plain_mask": plain(hidden, pos),
        }
        try:
            out["packed_positions"] = packed(pk.allowed, torch.zeros_like(pk.position_ids))
            out["packed_mask"] = packed(causal, pk.position_ids)
        except Exception:  # noqa: BLE001 - an architecture whose attention takes no 4D mask (Bloom's ALiBi)
            pass
    return {k: float((v - want)[real].abs().max()) for k, v in out.items()}


def measure(arch: Arch, *, lora: bool = True, bf16: bool = True) -> dict[str, Cell]:
    """Every mode of ``arch``: plain, packed, checkpointed (packed where it packs), LoRA (packed), bf16."""
    r = rows()
    base = build(arch)
    probe_logit_map(base)  # raises for an architecture we cannot match
    cells = {"plain": _mode(copy.deepcopy(base), r, "off"), "packed": _mode(copy.deepcopy(base), r, "on")}
    ckpt = copy.deepcopy(base)
    enable_checkpointing(ckpt)
    ckpt.train()
    cells["checkpointed"] = _mode(ckpt, r, "on")
    if lora:
        cells["lora"] = _mode(_lora(copy.deepcopy(base)), r, "on")
    if bf16:
        cells["bf16"] = _bf16(base, r)
    return cells


def _main() -> None:
    """Print the matrix as a Markdown table (docs/ARCHITECTURES.md): per mode, max |d log-prob| / max relative d
    grad and whether it packed; for bf16, |d log-prob| against its tolerance."""
    torch.set_num_threads(1)
    modes = ["plain", "packed", "checkpointed", "lora"]
    print("| architecture | head map | " + " | ".join(modes) + " | bf16 (tolerance) | controls, min nats | s |")
    print("|---" * (len(modes) + 5) + "|")
    for arch in ARCHS:
        t = time.perf_counter()
        head = probe_logit_map(build(arch))
        cells = measure(arch)
        moved = controls(build(arch), rows())
        ctl = min(v for k, v in moved.items() if not (arch.name in NO_POSITION_IDS and "positions" in k))
        line = [f"{c.dlogp:.1e} / {c.dgrad:.1e} {'packed' if c.packed else 'plain'}" for c in (cells[m] for m in modes)]
        b = cells["bf16"]
        line.append(f"{b.dlogp:.3f} ({b.tol:.3f}) {'packed' if b.packed else 'plain'}")
        mapped = ", ".join(f"{k} {v:g}" for k, v in head.__dict__.items() if v not in (None, 1.0)) or "identity"
        print(f"| {arch.name} | {mapped} | " + " | ".join(line) + f" | {ctl:.2f} | {time.perf_counter() - t:.1f} |")


if __name__ == "__main__":
    _main()


def fsdp_rank(rank: int, out: str, arch_name: str) -> None:
    """On each of the ranks (``_dist_helpers.run_ranks``): ``arch_name`` probed, then sharded with FSDP2 as the
    loop does; plain and packed (forced: a sharded model is not checked) log-probs and whole gradients of the same
    rows on every rank (summed over ranks, so divided by the world size here). Rank 0 saves them to ``out``."""
    from trainer.dist import init_distributed
    from trainer.fsdp import shard_model

    info = init_distributed()
    model = build(BY_NAME[arch_name])
    logit_map = probe_logit_map(model)  # before sharding, as the loop does
    shard_model(model, info)
    fwd = PolicyForward(model, logit_map)
    r = rows()
    real_layout = packing.layout
    res: dict[str, Any] = {}
    for pack in ("off", "on"):
        calls: list[int] = []
        packing.layout = lambda *a, c=calls: c.append(1) or real_layout(*a)  # type: ignore[assignment]
        try:
            got, _ = completion_logprobs(fwd, r.p_ids, r.p_mask, r.c_ids, 1.0, lengths=r.c_mask.sum(1), packing=pack)
        finally:
            packing.layout = real_layout  # type: ignore[assignment]
        (got * r.weights).sum().backward()
        grads = {n: p.grad.full_tensor() / info.world_size for n, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        res["packed" if pack == "on" else "plain"] = {"logp": got.detach(), "grads": grads, "packed": bool(calls)}
    if rank == 0:
        torch.save(res, out)
