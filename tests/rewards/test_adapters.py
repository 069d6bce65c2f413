"""The TRL and verl adapters: their contracts called directly, and 2 steps of TRL's real GRPOTrainer.

The TRL test trains a tiny random-init Qwen2-style model built from a config (2 layers, hidden 64) with a
character-level tokenizer built in the test; no weights are downloaded. The rewards it uses are the built-in ones
plus two registered below, which check what reaches a reward (the conversational prompt, the ``answer`` column,
the completion as text) and that a reward raising on some samples leaves them ``None`` instead of stopping TRL.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import pytest

import rewards.adapters.trl as trl_adapter
from harness import Sample, Score, reward
from harness.errors import RewardParameterError, UnknownRewardError
from rewards.adapters import (
    as_trl_reward_funcs,
    as_verl_batch_compute_score,
    as_verl_compute_score,
    completion_text,
    trl_reward_weights,
)


@reward("test_adapters_answer_len", isolation="inline")
def answer_len():
    """len(answer) when the prompt is a chat list and the completion text; unscored otherwise."""

    def score(sample: Sample, completion: str) -> Score:
        if not isinstance(sample.prompt, list) or not isinstance(completion, str) or sample.answer is None:
            return Score.unscored("bad_input", f"prompt {type(sample.prompt).__name__}, answer {sample.answer!r}")
        return Score(value=float(len(str(sample.answer))), info={"level": (sample.model_extra or {}).get("level")})

    return score


@reward("test_adapters_odd_ids_raise", isolation="inline")
def odd_ids_raise():
    """Raises for samples with an odd id: a plugin bug that must not abort a TRL run."""

    def score(sample: Sample, completion: str) -> Score:
        if int(sample.id) % 2:
            raise ZeroDivisionError("simulated plugin bug")
        return Score(value=1.0)

    return score


@reward("test_adapters_char_mix", isolation="inline", reads=())
def char_mix():
    """A value in [0, 1] that differs between almost any two texts, so GRPO groups have reward variance."""

    def score(sample: Sample, completion: str) -> Score:
        return Score(value=(sum(map(ord, completion)) % 7) / 6)

    return score


# --- completion_text and spec validation --------------------------------------------------------------------


def test_completion_text_forms() -> None:
    chat = [
        {"role": "assistant", "content": "first"},
        {"role": "tool", "content": "result"},
        {"role": "assistant", "content": "final \\boxed{2}"},
    ]
    assert completion_text(chat) == "final \\boxed{2}"
    assert completion_text({"role": "assistant", "content": "one"}) == "one"
    assert completion_text(42) == 42  # left for the scoring path to mark bad_input


def test_specs_are_validated_when_the_adapter_is_built() -> None:
    with pytest.raises(UnknownRewardError, match="no_such_reward"):
        as_trl_reward_funcs(["no_such_reward"])
    with pytest.raises(RewardParameterError, match="accepted parameters"):
        as_trl_reward_funcs([{"name": "tag_count", "params": {"tagz": ["a"]}}])
    with pytest.raises(RewardParameterError, match="pattern"):
        as_verl_compute_score("format_regex")
    with pytest.raises(RewardParameterError, match="does not compile"):  # a bad value, not only a bad name
        as_trl_reward_funcs([{"name": "format_regex", "params": {"pattern": "(unclosed"}}])
    assert trl_reward_weights([{"name": "boxed_present", "weight": 0.0}, "tag_count"]) == [0.0, 1.0]


# --- TRL contract, called directly ----------------------------------------------------------------------------


def _trl_kwargs(n: int) -> dict[str, Any]:
    """What TRL passes besides prompts and completions: columns plus its own non-column keywords."""
    logged: list[tuple[str, float]] = []
    return {
        "answer": ["144"] * n,
        "level": [f"L{i}" for i in range(n)],
        "trainer_state": object(),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: logged.append((name, value)),
        "_logged": logged,
    }


def test_trl_funcs_follow_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = trl_adapter.score_batch

    def counting_score_batch(*args: Any, **kwargs: Any):  # a spy around the real scoring path
        calls.append(len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(trl_adapter, "score_batch", counting_score_batch)
    funcs = as_trl_reward_funcs(["test_adapters_answer_len", "test_adapters_odd_ids_raise", "boxed_present"])
    assert [f.__name__ for f in funcs] == ["test_adapters_answer_len", "test_adapters_odd_ids_raise", "boxed_present"]

    prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(4)]
    completions = [[{"role": "assistant", "content": c}] for c in ["\\boxed{1}", "x", "\\boxed{3}", ""]]
    kwargs = _trl_kwargs(4)
    logged = kwargs.pop("_logged")
    out = [f(prompts=prompts, completions=completions, completion_ids=[[1]] * 4, **kwargs) for f in funcs]
    assert out[0] == [3.0, 3.0, 3.0, 3.0]  # the answer column arrived; chat prompt kept; completion is text
    assert out[1] == [1.0, None, 1.0, None]  # the raising samples are None, the others scored, in order
    assert out[2] == [1.0, 0.0, 1.0, 0.0]
    assert calls == [4]  # one score_batch for all three rewards: the others read the shared memo
    assert ("rewards/test_adapters_odd_ids_raise/unscored_frac", 0.5) in logged

    out_plain = funcs[2](prompts=["p"] * 2, completions=["\\boxed{9}", "none"])  # plain-text form, no columns
    assert out_plain == [1.0, 0.0]
    assert calls == [4, 2]


def test_trl_funcs_keep_extra_columns_as_sample_fields() -> None:
    (fn,) = as_trl_reward_funcs(["test_adapters_answer_len"])
    result = fn._shared.score([[{"role": "user", "content": "q"}]] * 2, ["a", "b"], _trl_kwargs(2))
    assert [s.info["level"] for s in result.scores["test_adapters_answer_len"]] == ["L0", "L1"]


def test_trl_func_bad_completion_is_unscored_not_raised() -> None:
    (fn,) = as_trl_reward_funcs(["boxed_present"])
    assert fn(prompts=["p", "p"], completions=["\\boxed{1}", 12345]) == [1.0, None]


def test_trl_funcs_survive_pickling() -> None:  # e.g. handed to a spawned data-loader or a Ray actor
    (fn,) = as_trl_reward_funcs(["boxed_present"])
    fn(prompts=["p"], completions=["\\boxed{1}"])  # fill the memo; it is dropped on pickling
    copy = pickle.loads(pickle.dumps(fn))
    assert copy.__name__ == "boxed_present"
    assert copy(prompts=["p", "p"], completions=["none", "\\boxed{2}"]) == [0.0, 1.0]


# --- verl contract, called directly ---------------------------------------------------------------------------


def test_verl_compute_score_per_response() -> None:
    compute_score = as_verl_compute_score("test_adapters_odd_ids_raise")
    assert compute_score("gsm8k", "text", "4", {"index": 2}) == {"score": 1.0, "scored": 1.0}
    # verl needs a number: an unscored sample gets unscored_value and says so
    assert compute_score("gsm8k", "text", "4", {"index": 3}) == {"score": 0.0, "scored": 0.0}
    as_float = as_verl_compute_score("test_adapters_odd_ids_raise", return_dict=False, unscored_value=-1.0)
    assert as_float("gsm8k", "text", "4", {"index": 3}) == -1.0
    assert as_float.__name__ == "test_adapters_odd_ids_raise"


def test_verl_ground_truth_and_extra_info_become_sample_fields() -> None:
    import numpy as np

    fn = as_verl_batch_compute_score("test_adapters_answer_len", return_dict=False)
    chat = [{"role": "user", "content": "q"}]
    # ground_truth wins over extra_info["answer"] (verl's gsm8k preprocessing stores the raw solution there)
    got = fn(
        np.array(["gsm8k", "gsm8k"], dtype=object),
        ["a", "b"],
        np.array(["12345", "1"], dtype=object),
        [{"index": 0, "prompt": chat, "answer": "long raw solution"}, {"index": 1, "prompt": chat}],
    )
    assert got == [5.0, 1.0]
    # no chat prompt in extra_info: this reward declines (unscored) and verl gets unscored_value
    assert fn(["d"], ["a"], ["12345"]) == [0.0]


def test_verl_tests_field() -> None:
    fn = as_verl_batch_compute_score("test_adapters_answer_len", ground_truth_field="tests")
    chat = [{"role": "user", "content": "q"}]
    assert fn(["code"], ["x"], ["assert f() == 1"], [{"prompt": chat}]) == [{"score": 0.0, "scored": 0.0}]
    with pytest.raises(ValueError, match="ground_truth_field"):
        as_verl_batch_compute_score("boxed_present", ground_truth_field="gold")  # type: ignore[arg-type]


# --- the real TRL GRPOTrainer ---------------------------------------------------------------------------------


def _char_tokenizer(path: Path):
    """A real character-level fast tokenizer with a chat template, saved to ``path``."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    fast.save_pretrained(str(path))
    return fast


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_trl_grpo_trainer_runs_two_steps_with_our_rewards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    import torch
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tok = _char_tokenizer(tmp_path / "tok")
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)  # random init: nothing downloaded
    rows = [{"prompt": [{"role": "user", "content": f"{i}+{i}?"}], "answer": "144", "level": f"L{i}"} for i in range(8)]
    specs = [
        {"name": "test_adapters_answer_len", "weight": 1.0},
        {"name": "test_adapters_odd_ids_raise", "weight": 0.0},
        {"name": "tag_count", "weight": 1.0, "params": {"tags": ["answer"]}},
        {"name": "overlong", "weight": 1.0, "params": {"max_length": 12, "cache_length": 4}},
        {"name": "format_regex", "weight": 0.0, "params": {"pattern": "[a-m]"}},  # runs in worker processes
        {"name": "test_adapters_char_mix", "weight": 1.0},  # guarantees non-zero advantages, so weights move
    ]
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        reward_weights=trl_reward_weights(specs),
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=list[Any](as_trl_reward_funcs(specs, timeout=60)),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
    )
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()

    logs = [h for h in trainer.state.log_history if "rewards/test_adapters_answer_len/mean" in h]
    assert len(logs) == 2  # one log row per step, with our reward names
    for h in logs:
        assert h["rewards/test_adapters_answer_len/mean"] == pytest.approx(3.0)  # column + chat prompt arrived
        assert math.isfinite(h["rewards/test_adapters_odd_ids_raise/mean"])  # raising samples skipped, not fatal
        assert -1.0 <= h["rewards/overlong/mean"] <= 0.0
        assert 0.0 <= h["rewards/tag_count/mean"] <= 1.0
        assert 0.0 <= h["rewards/format_regex/mean"] <= 1.0
    assert trainer.state.global_step == 2
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))
    assert changed, "two optimizer steps left every weight unchanged"
