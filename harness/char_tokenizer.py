"""A character-level tokenizer for tiny random-init models: the trainer's toy task, the demo, tests and benchmarks.

It lives in harness/ because both the trainer (:mod:`trainer.toy`) and the demo (:mod:`harness.demo`) build one,
and they may not import each other's packages. It says nothing about language: one token per character.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHARS", "char_tokenizer"]

#: The vocabulary: special tokens first, then these characters.
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 .,:?!+-*=()\n"
_SPECIAL = ["<pad>", "<eos>", "<unk>"]


def char_tokenizer(vocab_size: int | None = None, chars: str = CHARS) -> Any:
    """A character-level tokenizer with ``<pad>``, ``<eos>`` and ``<unk>``; decode joins characters back.

    Args:
        vocab_size: pad the vocabulary with filler tokens (``<f0>``, ``<f1>``...) up to this size, for models
            with a realistic embedding size; encoding never produces them, sampling may.
        chars: the characters after the three special tokens, in id order.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens = _SPECIAL + list(chars)
    tokens += [f"<f{i}>" for i in range(max(0, (vocab_size or 0) - len(tokens)))]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        clean_up_tokenization_spaces=False,
    )
