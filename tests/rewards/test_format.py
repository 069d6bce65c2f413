"""Format and length rewards: their docstring examples, their verdicts, their parameter checks, and that a user
regex which backtracks catastrophically is killed by the scoring path while the rest of the batch is scored."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import rewards.format
import rewards.length
from harness import get_reward, score_batch
from harness.errors import RewardParameterError
from harness.registry import get_entry

FORMAT_REWARDS = ["format_regex", "think_answer_format", "boxed_present", "tag_count", "repetition"]


@pytest.mark.parametrize("module", [rewards.format, rewards.length], ids=lambda m: m.__name__)
def test_docstring_examples_run(module) -> None:
    result = doctest.testmod(module, verbose=False)
    assert result.failed == 0
    assert result.attempted >= 5


@pytest.mark.parametrize("name", FORMAT_REWARDS + ["overlong"])
def test_every_reward_is_registered_with_a_docstring_example(name: str) -> None:
    entry = get_entry(name)
    assert entry.origin.startswith("built-in")
    assert entry.reads == ()  # format rewards read only the completion: the cache keys on it alone
    assert ">>> " in (entry.factory.__doc__ or "")
    # only the user-pattern reward needs a killable worker; the others scan linearly and may run inline
    assert entry.isolation == ("process" if name == "format_regex" else "inline")


# --- format_regex -------------------------------------------------------------------------------------------


def test_format_regex_modes() -> None:
    text = "Reasoning.\nAnswer: 12"
    assert get_reward("format_regex", pattern=r"Answer: \d+")({}, text).value == 1.0
    assert get_reward("format_regex", pattern=r"Answer: \d+", mode="match")({}, text).value == 0.0
    assert get_reward("format_regex", pattern=r"Reasoning\..*", mode="fullmatch")({}, text).value == 0.0
    assert get_reward("format_regex", pattern=r"Reasoning\..*", mode="fullmatch", flags="s")({}, text).value == 1.0
    hit = get_reward("format_regex", pattern=r"answer: (\d+)", flags="IGNORECASE")({}, text)
    assert (hit.value, hit.answer, hit.info["span"]) == (1.0, "Answer: 12", [11, 21])


def test_format_regex_flag_forms() -> None:
    fn = get_reward("format_regex", pattern=r"^x$", flags="MULTILINE|IGNORECASE")
    assert fn({}, "a\nX\nb").value == 1.0
    assert get_reward("format_regex", pattern=r"^x$", flags="mi")({}, "a\nX\nb").value == 1.0
    assert get_reward("format_regex", pattern=r"^x$")({}, "a\nX\nb").value == 0.0


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"pattern": "(unclosed"}, "does not compile"),
        ({"pattern": "x", "flags": "q"}, "unknown flag 'q'"),
        ({"pattern": "x", "mode": "findall"}, "parameter 'mode' got 'findall'"),
        ({"pattern": "x", "max_chars": 0}, "max_chars"),
        ({}, "needs parameter(s) 'pattern'"),
        ({"pattern": "x", "patern": "y"}, "accepted parameters"),
    ],
)
def test_format_regex_rejects_bad_parameters_at_load(params: dict, fragment: str) -> None:
    with pytest.raises(RewardParameterError, match="format_regex") as err:
        get_reward("format_regex", **params)
    assert fragment in str(err.value)


def test_regex_flags_refuse_a_bool_by_name() -> None:
    from rewards.format import parse_regex_flags

    with pytest.raises(RewardParameterError, match="flags must be letters, names or an int, got True"):
        parse_regex_flags(True)


def test_format_regex_caps_input_length() -> None:
    fn = get_reward("format_regex", pattern="a", max_chars=100)
    assert fn({}, "a" * 100).value == 1.0
    long = fn({}, "a" * 101)
    assert (long.value, long.status) == (0.0, "parse_error")
    assert "101 chars, over max_chars=100" in long.info["reason"]


@pytest.mark.slow
def test_catastrophic_backtracking_is_killed_and_the_batch_survives() -> None:
    # (a+)+$ on "aaaa...!" takes exponential time in Python's backtracking engine: 2**40 steps never finish.
    # One worker, warmed first with a generous limit, so the short limit below times the regex alone and not a
    # cold worker's imports; the hanging completion comes last so no task waits for the replacement worker.
    warm = {"name": "format_regex", "params": {"pattern": "warm"}}
    assert score_batch([{"id": "w"}], ["warm"], [warm], timeout=120.0, workers=1, cache=False).values(
        "format_regex"
    ) == [1.0]
    spec = {"name": "format_regex", "params": {"pattern": r"^(a+)+$"}}
    completions = ["aaa", "b", "aaaa", "a" * 40 + "!"]
    result = score_batch([{"id": str(i)} for i in range(4)], completions, [spec], timeout=5.0, workers=1, cache=False)
    scores = result.scores["format_regex"]
    assert [s.value for s in scores] == [1.0, 0.0, 1.0, None]
    assert [s.status for s in scores] == ["ok", "ok", "ok", "timeout"]
    assert "wall-clock limit" in scores[3].info["reason"]


# --- think_answer_format ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, value, status",
    [
        ("<think>\nstep\n</think>\n<answer>\n7\n</answer>\n", 1.0, "ok"),
        ("  <think>s</think><answer>7</answer>", 1.0, "ok"),
        ("<think>s</think>\n7", 0.0, "no_answer"),
        ("<think>s</think><answer> </answer>", 0.0, "no_answer"),
        ("<think>s</think><answer>7</answer> trailing", 0.0, "parse_error"),
        ("preamble <think>s</think><answer>7</answer>", 0.0, "parse_error"),
        ("<think>a</think><think>b</think><answer>7</answer>", 0.0, "parse_error"),
        ("<think>s<answer>7</answer>", 0.0, "parse_error"),
        ("<think>s</think><answer>7</answer><answer>8</answer>", 0.0, "parse_error"),
        ("", 0.0, "parse_error"),
    ],
)
def test_think_answer_format(completion: str, value: float, status: str) -> None:
    s = get_reward("think_answer_format")({}, completion)
    assert (s.value, s.status) == (value, status)
    assert (s.answer == "7") == (value == 1.0)
    if value == 0.0:
        assert s.info["reason"]


def test_think_answer_format_options() -> None:
    prefilled = get_reward("think_answer_format", think_prefilled=True)
    assert prefilled({}, "reasoning</think><answer>3</answer>").value == 1.0
    assert prefilled({}, "<think>reasoning</think><answer>3</answer>").value == 0.0
    free = get_reward("think_answer_format", answer_tag=None)
    s = free({}, "<think>r</think> The answer is 3.")
    assert (s.value, s.answer, s.info["answer_block"]) == (1.0, "3", "The answer is 3.")  # the final answer
    assert free({}, "<think>r</think>  ").status == "no_answer"
    custom = get_reward("think_answer_format", think_tag="reasoning", answer_tag="final")
    assert custom({}, "<reasoning>r</reasoning><final>3</final>").value == 1.0
    assert custom({}, "<think>r</think><answer>3</answer>").value == 0.0
    with pytest.raises(RewardParameterError, match="bare tag name"):
        get_reward("think_answer_format", think_tag="<think>")


# --- boxed_present ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, value, status, answer",
    [
        (r"so \boxed{\frac{1}{2}}.", 1.0, "ok", r"\frac{1}{2}"),
        (r"\boxed{1} then corrected: \boxed{ {2} }", 1.0, "ok", "{2}"),
        (r"\fbox{x}", 1.0, "ok", "x"),
        ("no box here", 0.0, "no_answer", None),
        (r"\boxed{}", 0.0, "no_answer", None),
        (r"\boxed{1} and \boxed{2", 0.0, "parse_error", None),
    ],
)
def test_boxed_present(completion: str, value: float, status: str, answer: str | None) -> None:
    s = get_reward("boxed_present")({}, completion)
    assert (s.value, s.status, s.answer) == (value, status, answer)


def test_boxed_present_commands() -> None:
    assert get_reward("boxed_present", commands=["boxed"])({}, r"\fbox{x}").status == "no_answer"
    with pytest.raises(RewardParameterError, match="commands"):
        get_reward("boxed_present", commands=["\\boxed"])


# --- tag_count ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, value",
    [
        ("<think>a</think><answer>b</answer>", 1.0),
        ("<think>a</think>", 0.5),
        ("<think>a<answer>b</answer>", 0.5),  # the answer pair sits inside reasoning never closed: half credit
        ("</think>a<think>", 0.0),  # a closing tag before the opening earns nothing, nor an opening around nothing
        ("</think><think>a", 0.25),
        ("<think>a</think><think>b</think>", 0.0),
        ("plain text", 0.0),
    ],
)
def test_tag_count_partial_credit(completion: str, value: float) -> None:
    assert get_reward("tag_count")({}, completion).value == value


def test_tag_count_custom_tags() -> None:
    fn = get_reward("tag_count", tags=["a", "b", "c", "d"])
    s = fn({}, "<a>1</a><b>2</b><c>3")
    assert s.value == pytest.approx(2.5 / 4)
    assert s.info["tags"] == {"a": 1.0, "b": 1.0, "c": 0.5, "d": 0.0}
    assert fn({}, "<a>1</a><b>2</b><c>").info["tags"]["c"] == 0.0  # an opening tag with nothing after it
    with pytest.raises(RewardParameterError, match="tags"):
        get_reward("tag_count", tags=[])


# --- repetition ---------------------------------------------------------------------------------------------


def test_repetition_penalty() -> None:
    fn = get_reward("repetition")  # 3-grams, down to -1
    assert fn({}, "one two three four five").value == 0.0
    assert fn({}, "too short").value == 0.0
    s = fn({}, "la la la la la la")  # 4 trigrams, 1 distinct
    assert s.value == pytest.approx(-0.75)
    assert s.info == {"repeated_fraction": pytest.approx(0.75), "ngrams": 4, "loop_coverage": 0.0, "penalty": "ngram"}
    assert get_reward("repetition", max_penalty=-0.5)({}, "La la LA la la la").value == pytest.approx(-0.375)


@pytest.mark.parametrize("params", [{"ngram_size": 0}, {"ngram_size": 2.5}, {"max_penalty": 0.5}])
def test_repetition_rejects_bad_parameters(params: dict) -> None:
    with pytest.raises(RewardParameterError, match="repetition"):
        get_reward("repetition", **params)


# --- overlong -----------------------------------------------------------------------------------------------


def test_overlong_in_characters_follows_dapo() -> None:
    fn = get_reward("overlong", max_length=100, cache_length=20)
    got = [fn({}, "x" * n).value for n in (0, 80, 81, 90, 100, 101, 5000)]
    assert got == pytest.approx([0.0, 0.0, -0.05, -0.5, -1.0, -1.0, -1.0])
    assert fn({}, "x" * 90).info["unit"] == "chars"


def test_overlong_defaults_are_the_papers() -> None:
    fn = get_reward("overlong")
    assert fn({}, "x" * 16384).value == 0.0
    assert fn({}, "x" * 20481).value == -1.0


@pytest.mark.parametrize("params", [{"max_length": 10, "cache_length": 11}, {"cache_length": 0}, {"max_length": "9"}])
def test_overlong_rejects_bad_lengths(params: dict) -> None:
    with pytest.raises(RewardParameterError, match="overlong"):
        get_reward("overlong", **params)


def _word_tokenizer_dir(path: Path) -> Path:
    """A real transformers fast tokenizer (word-level, whitespace split), saved to ``path``: no download."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "alpha": 1, "beta": 2, "gamma": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(path))
    return path


@pytest.mark.slow
def test_overlong_counts_tokens_with_a_local_tokenizer(tmp_path: Path) -> None:
    tok_dir = _word_tokenizer_dir(tmp_path / "tok")
    fn = get_reward("overlong", max_length=4, cache_length=2, tokenizer=str(tok_dir))
    s = fn({}, "alpha beta gamma")  # 3 tokens, 16 chars
    assert (s.value, s.info["unit"], s.info["length"]) == (-0.5, "tokens", 3)
    assert fn({}, "alpha beta").value == 0.0
    assert fn({}, "alpha beta gamma alpha beta").value == -1.0


def test_overlong_missing_tokenizer_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tokenizer"
    with pytest.raises(RewardParameterError, match="no-such-tokenizer"):
        get_reward("overlong", tokenizer=str(missing))


# --- empty shells and tag order (placeholder content is not a format) ----------------------------------------
# Regression: before placeholders and tag order were checked, 21 of the cases below failed (an empty shell scored
# 1.0 on think_answer_format, tag_count, boxed_present and a matching format_regex).

SHELL = "<think></think><answer>\\boxed{.}</answer>"
REAL = "<think>3 + 4 = 7</think><answer>\\boxed{7}</answer>"


@pytest.mark.parametrize(
    "name, params",
    [
        ("think_answer_format", {}),
        ("tag_count", {}),
        ("boxed_present", {}),
        ("format_regex", {"pattern": r"^<think>.*?</think>\s*<answer>.*?</answer>$", "flags": "s"}),
    ],
)
def test_an_empty_shell_never_gets_full_credit_and_the_real_thing_does(name: str, params: dict) -> None:
    fn = get_reward(name, **params)
    assert fn({}, REAL).value == 1.0
    for shell in (SHELL, "<think>\u200b</think><answer>\\boxed{\\phantom{}}</answer>"):
        value = fn({}, shell).value
        assert value is not None and value < 1.0, shell


@pytest.mark.parametrize(
    "content, value",
    [
        ("\\boxed{.}", 0.0),
        ("\\boxed{\\,}", 0.0),
        ("\\boxed{\\phantom{}}", 0.0),
        ("\\boxed{\u200b}", 0.0),
        ("\\boxed{\\text{ }}", 0.0),
        ("\\boxed{\\quad ~}", 0.0),
        ("\\boxed{0}", 1.0),
        ("\\boxed{\\infty}", 1.0),
        ("\\boxed{\\emptyset}", 1.0),
        ("\\boxed{\u2205}", 1.0),
        ("\\boxed{x}", 1.0),
        ("\\boxed{\\text{no}}", 1.0),
    ],
)
def test_boxed_present_rejects_placeholders_but_not_short_real_answers(content: str, value: float) -> None:
    s = get_reward("boxed_present")({}, "so " + content)
    assert s.value == value
    if value == 0.0:
        assert s.status == "no_answer" and "placeholder" in s.info["reason"]


@pytest.mark.parametrize(
    "completion, value",
    [
        ("<think>a</think><answer>b</answer>", 1.0),
        ("<think>a<answer>b</think>c</answer>", 0.5),  # interleaved: neither pair is well formed
        ("<answer>b</answer><think>a</think>", 0.75),  # reversed: the answer comes before the reasoning
        ("<think>a<answer>b</answer></think>", 0.75),  # the answer inside the reasoning
        ("<think> </think><answer>b</answer>", 0.5),  # empty reasoning: tags around nothing earn nothing
        ("<think>a</think><answer>\\boxed{\\,}</answer>", 0.5),  # placeholder answer
    ],
)
def test_tag_count_wants_ordered_pairs_around_real_content(completion: str, value: float) -> None:
    assert get_reward("tag_count")({}, completion).value == value


@pytest.mark.parametrize(
    "completion, ok",
    [
        ("<think>work</think><answer>\\boxed{5}</answer>", True),
        ("<think>work</think><answer>5</answer>", True),
        ("<think></think><answer>5</answer>", False),
        ("<think>\\quad</think><answer>5</answer>", False),
        ("<think>work</think><answer>\\boxed{.}</answer>", False),
        ("<think>work</think><answer>\u200b</answer>", False),
    ],
)
def test_think_answer_format_needs_content_in_both_blocks(completion: str, ok: bool) -> None:
    s = get_reward("think_answer_format")({}, completion)
    assert (s.value == 1.0) == ok, s.info


def test_format_regex_keeps_plain_matches_and_refuses_empty_blocks() -> None:
    fn = get_reward("format_regex", pattern=r"<answer>.*?</answer>", flags="s")
    assert fn({}, "x <answer>12</answer>").value == 1.0
    s = fn({}, "x <answer> </answer>")
    assert (s.value, s.status) == (0.0, "no_answer") and "empty shell" in s.info["reason"]
    assert get_reward("format_regex", pattern=r"</think>")({}, "a</think>b").value == 1.0  # no block: no check


def test_format_checks_stay_linear_on_hostile_tag_floods() -> None:
    # 10k nested opening tags with their closings: every block is checked in O(1) after one pass
    fn = get_reward("format_regex", pattern=r".*", flags="s", max_chars=10**6)
    s = fn({}, "<a>" * 10_000 + "</a>" * 10_000)
    assert (s.value, s.status) == (0.0, "no_answer")
