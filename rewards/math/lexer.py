"""Tokenizer for math answers written in LaTeX or plain sympy-style text.

It turns a normalized answer string (see :mod:`rewards.math.normalize`) into a flat token list the parser reads.
Letter runs are split into known names (``sqrt``, ``pi``, ``sin`` ...) and single-letter symbols, so ``3ab`` is
``3 a b`` (a product of variables, never a unit) and ``2pi`` is ``2 pi``.

It does not interpret anything: numbers stay digit strings, commands stay names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Token", "tokenize", "LexError", "ParseError", "KNOWN_NAMES"]

Kind = Literal["num", "name", "cmd", "op", "end"]

#: Plain-text names recognised inside letter runs (longest match first).
KNOWN_NAMES: tuple[str, ...] = tuple(
    sorted(
        {
            "sqrt",
            "cbrt",
            "exp",
            "log",
            "ln",
            "lg",
            "sin",
            "cos",
            "tan",
            "sec",
            "csc",
            "cot",
            "arcsin",
            "arccos",
            "arctan",
            "asin",
            "acos",
            "atan",
            "acot",
            "asec",
            "acsc",
            "arccot",
            "arcsec",
            "arccsc",
            "asinh",
            "acosh",
            "atanh",
            "arsinh",
            "arcosh",
            "artanh",
            "coth",
            "sech",
            "csch",
            "sinh",
            "cosh",
            "tanh",
            "pi",
            "oo",
            "inf",
            "infinity",
            "infty",
            "abs",
            "or",
            "and",
            "sgn",
        },
        key=len,
        reverse=True,
    )
)

_DIGITS = frozenset("0123456789")
_NUM = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+(?![A-Za-z]))?|\.\d+", re.ASCII)
_CMD = re.compile(r"\\([A-Za-z]+|.)")
_ALPHA = re.compile(r"[A-Za-z]+", re.ASCII)
_OPS = set("+-*/^_!=<>()[]{},;|&%°:'")


class ParseError(ValueError):
    """The text is not an answer the grammar understands (the message says where and what)."""


class LexError(ParseError):
    """The answer contains a character the parser does not know."""


@dataclass
class Token:
    """One token: ``kind`` and its text (``cmd`` tokens hold the command name without the backslash)."""

    kind: Kind
    text: str

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.text in ops

    def is_cmd(self, *names: str) -> bool:
        return self.kind == "cmd" and self.text in names


def _split_letters(run: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    low = run.lower()
    while i < len(run):
        for name in KNOWN_NAMES:
            if low.startswith(name, i) and (len(name) > 2 or run[i : i + len(name)].islower()):
                out.append(Token("name", name))
                i += len(name)
                break
        else:
            out.append(Token("name", run[i]))
            i += 1
    return out


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``end`` token.

    Raises:
        LexError: on a character outside the answer alphabet (naming it and its position), including digits that
            are not ASCII (superscripts, circled digits), and on two numbers side by side (``7 2``: not a product).
    """
    toks: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            m = _NUM.match(text, i)
            if m is None:  # cannot happen for an ASCII digit; never an AssertionError on model output
                raise LexError(f"unreadable number at position {i}")
            if toks and toks[-1].kind == "num" and not (len(toks) > 1 and toks[-2].is_op("_", "^")):
                raise LexError(f"two numbers side by side at position {i} ({toks[-1].text!r} and {m.group(0)!r})")
            toks.append(Token("num", m.group(0)))
            i = m.end()
            continue
        if c == "\\":
            m = _CMD.match(text, i)
            if m is None:
                raise LexError(f"dangling backslash at position {i}")
            toks.append(Token("cmd", m.group(1)))
            i = m.end()
            continue
        if c.isascii() and c.isalpha():
            m = _ALPHA.match(text, i)
            if m is None:
                raise LexError(f"unreadable letters at position {i}")
            toks.extend(_split_letters(m.group(0)))
            i = m.end()
            continue
        if c in _OPS:
            toks.append(Token("op", c))
            i += 1
            continue
        raise LexError(f"unexpected character {c!r} at position {i}")
    toks.append(Token("end", ""))
    return toks
