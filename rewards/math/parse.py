"""Recursive-descent parser from answer tokens to :mod:`rewards.math.values`.

One grammar serves LaTeX (``\\frac{1}{2}``, ``\\sqrt[3]{x}``, ``\\begin{pmatrix}``) and plain text (``sqrt(2)/2``,
``pi/2``, ``exp(16)``, ``2^10``). Precedence, loosest first: separators (``,`` ``;`` "or" "and" ``\\cup``),
relations (``= < \\le \\in`` ...), ratios (``a : b``), ``+ - \\pm``, ``* / \\cdot`` and implicit products, unary
signs, powers, then postfix ``!``, ``%`` and ``°``. A bare integer directly followed by a numeric ``\\frac`` is a
mixed number (MATH convention: ``2\\frac{1}{2}`` = 5/2). Decimals and scientific notation become exact rationals.
Several labelled solutions (``x = 1, y = 2; x = 3, y = 4``) become a list of tuples. ``\\sum_{k=a}^{b}`` and
``\\prod`` take one product as their term and stay unevaluated (the index gets a canonical name, and inside the
term ``F_{n-k}`` is the term ``F(n - k)``); they are compared as written, never summed.

Every step is bounded: a token cap, a nesting cap, a literal-length cap, and the guarded power/factorial of
:mod:`rewards.math.values`. Atoms (numbers, names, commands) are parsed by :mod:`rewards.math._atoms`, bracketed
structures (tuples, intervals, matrices) by :mod:`rewards.math.structures`; name tables live in
:mod:`rewards.math.tables`. This module holds precedence: lists, relations, ratios and arithmetic. It does not
normalize raw LaTeX (see :mod:`rewards.math.normalize`) and does not compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy as sp

from rewards.math._atoms import MAX_LITERAL_DIGITS, AtomMixin
from rewards.math.lexer import ParseError, Token, tokenize
from rewards.math.structures import StructureMixin
from rewards.math.tables import ATOM_CMDS, FRACS, MUL_CMDS, RELOPS
from rewards.math.values import (
    DEG,
    PCT,
    PM,
    Expr,
    HugeValue,
    Rel,
    Seq,
    Value,
    safe_factorial,
    safe_pow,
)

__all__ = ["ParseError", "parse_value", "MAX_DEPTH", "MAX_LITERAL_DIGITS", "MAX_TOKENS"]

MAX_DEPTH = 40
MAX_TOKENS = 500
MAX_MATRIX_NODES = 3000


def parse_value(text: str) -> Value:
    """Parse a normalized answer string into a value.

    Raises:
        ParseError: when the answer is malformed, too deep or too long (message names the problem).
        HugeValue: when the answer is too large to evaluate (the caller keeps its source text).
    """
    toks = tokenize(text)
    if len(toks) > MAX_TOKENS:
        raise ParseError(f"answer longer than {MAX_TOKENS} tokens ({len(toks)})")
    p = _Parser(toks)
    v = p.parse_list(closers=())
    if p.peek().kind != "end":
        raise ParseError(f"unexpected {p.peek().text!r} after the answer")
    return v


def _is_sym(x: object) -> bool:
    return isinstance(x, sp.Basic)


class _Parser(AtomMixin, StructureMixin):
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.pos = 0
        self.depth = 0
        self.abs_depth = 0
        self.bound: list[sp.Symbol] = []  # the index variables of the sums being parsed

    # -- token helpers -------------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.peek()
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return t

    def expect_op(self, op: str) -> None:
        t = self.next()
        if not t.is_op(op):
            raise ParseError(f"expected {op!r}, got {t.text or 'end of answer'!r}")

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError(f"nesting deeper than {MAX_DEPTH}")

    # -- lists, relations ----------------------------------------------------------------------------------
    def parse_list(self, closers: tuple[str, ...]) -> Value:
        items = [self.parse_rel()]
        union = False
        groups: list[int] = []  # where each ";" / "or" group starts, for x = 1, y = 2; x = 3, y = 4
        joins: list[str] = []
        while True:
            t = self.peek()
            if t.is_cmd("setminus"):
                self.next()
                items[-1] = self._minus(items[-1], self.parse_rel())  # \mathbb{R} \setminus \{1\}
                continue
            if t.is_op(",", ";") or (t.kind == "name" and t.text in ("or", "and")) or t.is_cmd(*_CONNECTIVES):
                self.next()
                if not t.is_op(","):
                    groups.append(len(items))
                joins.append(_CONNECTIVES.get(t.text, t.text))
            elif t.is_cmd("cup"):
                self.next()
                union = True
            else:
                break
            if self.peek().kind == "end" or (self.peek().kind == "op" and self.peek().text in closers):
                break  # a trailing separator
            items.append(self.parse_rel())
        if len(items) == 1:
            return items[0]
        if union:
            head = items[0]
            if isinstance(head, Rel) and head.ops == ("in",):  # z \in [a, b] \cup [c, d]: \cup binds tighter
                return Rel((head.terms[0], self._union([head.terms[1], *items[1:]])), ("in",))
            return self._union(items)
        if joins and set(joins) == {"and"} and all(_inequality(i) for i in items):
            return Rel(tuple(items), ("and",) * (len(items) - 1))  # x > 1 and x < 3: both hold (an intersection)
        solutions = _solution_groups(items, groups)
        if solutions is not None:
            return solutions
        return Seq("list", tuple(self._as_value(i) for i in items))

    @staticmethod
    def _as_value(x: object) -> Value:
        return Expr(x) if _is_sym(x) else x  # type: ignore[return-value]  # what is not sympy is a parsed Value

    def parse_rel(self) -> Value:
        first = self.parse_ratio()
        terms: list[object] = [first]
        ops: list[str] = []
        while True:
            op = self._relop()
            if op is None:
                break
            terms.append(self.parse_ratio())
            ops.append(op)
        if not ops:
            return self._as_value(first)
        return Rel(tuple(terms), tuple(ops))

    def parse_ratio(self) -> object:
        """``a : b`` is the quotient a/b (a ratio equals its quotient: ``7:32`` = ``14:64`` = ``\\frac{7}{32}``);
        ``a : b : c`` is the tuple ``(1, b/a, c/a)``, so equal ratios of three parts compare equal. A pair with a
        zero part (a time, ``1:00``; ``0 : 3``) has no quotient: it is the tuple of its parts, so ``1:00`` is not
        ``12:00``."""
        parts = [self.parse_add()]
        while self.peek().is_op(":"):
            self.next()
            parts.append(self.parse_add())
        if len(parts) == 1:
            return parts[0]
        self._need_scalar(*parts)
        if len(parts) == 2 and any(p == 0 for p in parts):
            return Seq("tuple", tuple(Expr(p) for p in parts))  # 1:00 is no quotient
        if len(parts) == 2:
            return parts[0] / parts[1]  # type: ignore[operator]  # sympy values (_need_scalar)
        if parts[0] == 0:
            raise ParseError("a ratio whose first part is 0")
        return Seq("tuple", tuple(Expr(p / parts[0]) for p in parts))  # type: ignore[operator]  # sympy (_need_scalar)

    def _relop(self) -> str | None:
        t = self.peek()
        if t.kind == "op" and t.text in "=<>":
            self.next()
            if t.text in "<>" and self.peek().is_op("="):
                self.next()
                return t.text + "="
            return t.text
        if t.is_op("!") and self.peek(1).is_op("="):
            self.pos += 2
            return "!="
        if t.kind == "cmd" and t.text in RELOPS:
            self.next()
            return RELOPS[t.text]
        return None

    # -- arithmetic ----------------------------------------------------------------------------------------
    def parse_add(self) -> object:
        left = self.parse_mul()
        while True:
            t = self.peek()
            if t.is_op("+", "-") or t.is_cmd("pm", "mp"):
                self.next()
                right = self.parse_mul()
                self._need_scalar(left, right)
                if t.text == "+":
                    left = left + right  # type: ignore[operator]  # sympy values (_need_scalar)
                elif t.text == "-":
                    left = left - right  # type: ignore[operator]  # sympy values (_need_scalar)
                else:
                    left = left + (PM if t.text == "pm" else -PM) * right
            else:
                return left

    def _need_scalar(self, *xs: object) -> None:
        for x in xs:
            if not _is_sym(x):
                raise ParseError("arithmetic on an interval, tuple or set")

    def parse_mul(self) -> object:
        start = self.pos
        left = self.parse_unary()
        int_literal = self._only(start, lambda t: t.kind == "num" and t.text.isdigit() or t.is_op("-"))
        while True:
            t = self.peek()
            if t.is_op("*") or t.is_cmd(*MUL_CMDS):
                self.next()
                right = self.parse_unary()
                self._need_scalar(left, right)
                left = _product(left, right)
            elif t.is_op("/") or t.is_cmd("div"):
                self.next()
                right = self.parse_unary()
                self._need_scalar(left, right)
                left = left / right  # type: ignore[operator]  # sympy values (_need_scalar)
            elif self._starts_atom(t):
                at = self.pos
                right = self.parse_power()
                self._need_scalar(left, right)
                if int_literal and t.is_cmd(*FRACS) and self._only(at, _frac_token) and isinstance(right, sp.Rational):
                    # (left is a sympy value, _need_scalar checked it, and sympy is untyped)
                    left = left - right if left.is_negative else left + right  # type: ignore[attr-defined]
                else:
                    left = _product(left, right)
                int_literal = False
            else:
                return left

    def _only(self, start: int, pred: Callable[[Token], bool]) -> bool:
        return self.pos > start and all(pred(t) for t in self.toks[start : self.pos])

    def _starts_atom(self, t: Token) -> bool:
        if t.kind == "num":
            return True
        if t.kind == "name":
            return t.text not in ("or", "and")
        if t.kind == "cmd":
            return t.text in ATOM_CMDS or t.text == "{"
        if t.kind == "op":
            return t.text in ("(", "{") or (t.text == "|" and self.abs_depth == 0)
        return False

    def parse_unary(self) -> object:
        t = self.peek()
        if t.is_op("-", "+") or t.is_cmd("pm", "mp"):
            self.next()
            self._enter()
            v = self.parse_unary()
            self.depth -= 1
            self._need_scalar(v)
            if t.text == "-":
                return -v  # type: ignore[operator]  # sympy values (_need_scalar)
            if t.text == "+":
                return v
            return (PM if t.text == "pm" else -PM) * v
        return self.parse_power()

    def parse_power(self) -> object:
        base = self.parse_atom()
        base = self._postfix(base)
        if self.peek().is_op("^"):
            self.next()
            self._enter()
            exp = self._group_or_unary()
            self.depth -= 1
            self._need_scalar(base, exp)
            base = self._postfix(safe_pow(base, exp))
        return base

    def _group_or_unary(self) -> object:
        if self.peek().is_op("{"):
            return self._group()
        return self.parse_unary()

    def _postfix(self, v: object) -> object:
        while True:
            t = self.peek()
            if t.is_op("!") and not self.peek(1).is_op("="):
                self.next()
                self._need_scalar(v)
                v = safe_factorial(v)
            elif t.is_op("%"):
                self.next()
                self._need_scalar(v)
                v = v * PCT
            elif t.is_op("°"):
                self.next()
                self._need_scalar(v)
                v = v * DEG
            elif t.is_op("'"):
                self.next()
            else:
                return v


#: Logical connectives written as commands: ``\vee`` is "or", ``\wedge`` is "and" (as sympy prints them).
_CONNECTIVES = {"vee": "or", "lor": "or", "wedge": "and", "land": "and"}


def _inequality(v: object) -> bool:
    return isinstance(v, Rel) and bool(v.ops) and set(v.ops) <= {"<", ">", "<=", ">="}


def _solution_groups(items: Sequence[object], starts: list[int]) -> Seq | None:
    """``x = 1, y = 2; x = 3, y = 4`` (groups split by ``;`` or "or", each assigning the same two or more
    variables) -> the list of tuples ``(1, 2), (3, 4)``, in the variables' alphabetical order; else None."""
    bounds = [0, *(s for s in starts if 0 < s < len(items)), len(items)]
    groups = [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    if len(groups) < 2:
        return None
    names: set[tuple[str, ...]] = set()
    tuples = []
    for g in groups:
        if len(g) < 2 or not all(
            isinstance(r, Rel)
            and r.ops == ("=",)
            and isinstance(r.terms[0], sp.Symbol)
            and isinstance(r.terms[1], sp.Basic)
            for r in g
        ):
            return None
        # each r is a Rel (checked above): hence the ignore
        pairs = sorted(((str(r.terms[0]), r.terms[1]) for r in g), key=lambda p: p[0])  # type: ignore[attr-defined]
        names.add(tuple(n for n, _ in pairs))
        tuples.append(Seq("tuple", tuple(Expr(v) for _, v in pairs)))
    return Seq("list", tuple(tuples)) if len(names) == 1 else None


def _product(left: object, right: object) -> object:
    """``left * right``; a product of symbolic matrices that swells past a size cap is :class:`HugeValue`."""
    out = left * right  # type: ignore[operator]  # sympy values: every caller ran _need_scalar
    if isinstance(out, sp.MatrixBase) and out.free_symbols:
        nodes = sum(1 for _ in zip(range(MAX_MATRIX_NODES + 1), sp.preorder_traversal(out), strict=False))
        if nodes > MAX_MATRIX_NODES:
            raise HugeValue("product of symbolic matrices too large")
    return out


def _frac_token(t: Token) -> bool:
    return (t.kind == "num" and t.text.isdigit()) or t.is_op("{", "}") or t.is_cmd(*FRACS)
