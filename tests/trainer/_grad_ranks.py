"""The rank body of the FSDP gradient test (spawned processes import it by module name; see ``_dist_ranks``)."""

from __future__ import annotations

import warnings

import torch


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A seeded batch of 4 rows: input ids (4, 12), the last 6 of them as targets, and per-token weights."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, 40, (4, 12), generator=g)
    weights = torch.randn(4, 6, generator=g)
    return ids, ids[:, -6:], weights


def loss_of(model, ids: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """A weighted sum of the trainer's chunked log-probs (chunk 5 < 12 positions: several checkpointed chunks)."""
    from trainer.logprobs import sequence_logprobs

    logp, _ = sequence_logprobs(model, ids, torch.ones_like(ids), None, targets, temperature=0.7, chunk=5)
    return (logp * weights).sum()


def grad_rank(rank: int, out: str) -> None:
    """Rank ``r`` of 2 backpropagates rows ``2r, 2r+1`` through the sharded model; rank 0 saves the full gradients
    (summed over ranks by FSDP), every warning the ranks' forward and backward raised, and the functions left in
    the model's instance dict (the chunked forward is wrapped by FSDP's hooks per call, never left on the model)."""
    from trainer.dist import init_distributed
    from trainer.fsdp import ensure_process_group, shard_model
    from trainer.toy import char_tokenizer, tiny_model

    info = ensure_process_group(init_distributed(prefer_cuda=False))
    model = tiny_model(len(char_tokenizer()), seed=0).train()
    shard_model(model, info)
    ids, targets, weights = batch()
    rows = slice(2 * rank, 2 * rank + 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_of(model, ids[rows], targets[rows], weights[rows]).backward()
    grads = {n: p.grad.full_tensor() for n, p in model.named_parameters()}  # every rank joins the all-gathers
    if rank == 0:
        left = [k for k, v in vars(model).items() if callable(v) and not isinstance(v, torch.nn.Module)]
        torch.save({"grads": grads, "warnings": [str(w.message) for w in caught], "left": left}, f"{out}/grads.pt")
