"""A synthetic run for the telemetry tests: RunTelemetry driven with real RewardStats, no model.

Training reward of ``math`` climbs every step while its held-out score rises then falls (reward hacking);
``format`` stays flat. Checkpoints every ``every`` steps, each evaluated with its saved context read back from
JSON, as the evaluator does from ``<checkpoint>/telemetry.json``.
"""

from __future__ import annotations

import json

from harness.telemetry import RewardStats, RunTelemetry

HELDOUT = {3: 0.30, 6: 0.40, 9: 0.38, 12: 0.35}
#: the description the evaluator writes as ``harness.eval.*`` attributes (the run's own evaluation)
EVALUATION = {
    "id": "0123456789ab",
    "own": True,
    "data": "heldout.jsonl",
    "fingerprint": "f" * 64,
    "prompts": 40,
    "k": 8,
    "temperature": 0.6,
    "top_p": 0.95,
    "max_new_tokens": 64,
    "seed": 0,
    "rewards": ["math", "format"],
}


def synthetic_run(tel: RunTelemetry, steps: int = 12, every: int = 3, group: int = 4) -> dict[int, dict]:
    """Drive ``tel`` through ``steps`` training steps; returns the checkpoint context per checkpoint step."""
    contexts = {}
    for step in range(1, steps + 1):
        with tel.train_step(step) as st:
            st.set_metrics({"loss": 1.0 / step, "kl": 0.001 * step})
            vals = [min(1.0, step / steps + d) for d in (0.0, 0.05, 0.0, -0.05)] * 2
            st.record_reward("math", RewardStats.from_values(vals, group_size=group))
            st.record_reward("format", RewardStats.from_values([0.9] * 8, group_size=group, weight=0.2))
        if step % every == 0:
            contexts[step] = json.loads(json.dumps(tel.checkpoint_context(step)))
    for step, ctx in contexts.items():
        with tel.eval_checkpoint(step, ctx, EVALUATION) as ev:
            ev.set_metrics({"pass@1": HELDOUT.get(step, 0.5)})
            ev.record_reward("math", HELDOUT.get(step, 0.5), {"pass@1": HELDOUT.get(step, 0.5)})
            ev.record_reward("format", 0.9)
    return contexts


def expected_span_count(steps: int = 12, every: int = 3) -> int:
    """train.step + 2 reward spans per step; eval.checkpoint + 2 eval reward spans per checkpoint."""
    return steps * 3 + (steps // every) * 3
