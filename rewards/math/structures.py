"""Bracketed structures of the answer grammar: tuples vs intervals, unions, matrices (a mixin of the parser).

``(a, b)`` is a tuple (or an open interval, decided at comparison), ``[a, b)`` / ``(a, b]`` / ``[a, b]`` and
anything with an infinite end are intervals, ``\\cup`` joins intervals (and finite sets of points), and
``pmatrix``/``bmatrix``/``matrix``/``array`` environments are matrices (``vmatrix`` is a determinant).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import sympy as sp

from rewards.math.lexer import ParseError, Token
from rewards.math.values import Expr, Ivl, IvlUnion, Seq, Value

__all__ = ["StructureMixin"]


class _Parser(Protocol):
    """What the mixin's methods use of :class:`rewards.math.parse._Parser` (their ``self``)."""

    depth: int

    def peek(self, k: int = 0) -> Token: ...
    def next(self) -> Token: ...
    def parse_list(self, closers: tuple[str, ...]) -> Value: ...
    def parse_add(self) -> object: ...
    def _raw_arg(self) -> str: ...
    def _enter(self) -> None: ...
    def _need_scalar(self, *xs: object) -> None: ...


class StructureMixin:
    """Parser methods for bracketed structures; :class:`rewards.math.parse._Parser` supplies ``next``, ``peek``,
    ``parse_list``, ``parse_add``, ``_raw_arg``, ``_enter`` and ``_need_scalar``."""

    def _union(self, items: Sequence[object]) -> IvlUnion:
        parts: list[Ivl] = []
        for it in items:
            if isinstance(it, Ivl):
                parts.append(it)
            elif isinstance(it, IvlUnion):
                parts.extend(it.parts)
            elif isinstance(it, Seq) and it.kind == "tuple" and len(it.items) == 2:
                a, b = (x.e if isinstance(x, Expr) else x for x in it.items)
                parts.append(Ivl(a, b, False, False))
            elif isinstance(it, Seq) and it.kind == "set" and all(isinstance(x, Expr) for x in it.items):
                parts.extend(Ivl(x.e, x.e, True, True) for x in it.items if isinstance(x, Expr))
            else:
                raise ParseError("\\cup joins something that is not an interval")
        return IvlUnion(tuple(parts))

    def _minus(self, left: object, right: object) -> IvlUnion:
        """``I \\setminus \\{a, b\\}``: the interval (or union) ``I`` with the points removed."""
        parts = [left] if isinstance(left, Ivl) else list(left.parts) if isinstance(left, IvlUnion) else None
        points = right.items if isinstance(right, Seq) and right.kind == "set" else None
        if parts is None or points is None or not all(isinstance(p, Expr) and p.e.is_real for p in points):
            raise ParseError("\\setminus takes points out of an interval")
        for p in sorted({p.e for p in points if isinstance(p, Expr)}, key=lambda e: float(e)):
            out: list[Ivl] = []
            for iv in parts:
                above = bool(iv.lo < p) or (iv.lo == p and iv.lo_closed)
                if not (above and (bool(p < iv.hi) or (p == iv.hi and iv.hi_closed))):
                    out.append(iv)
                    continue
                if iv.lo != p:
                    out.append(Ivl(iv.lo, p, iv.lo_closed, False))
                if iv.hi != p:
                    out.append(Ivl(p, iv.hi, False, iv.hi_closed))
            parts = out
        return IvlUnion(tuple(parts))

    def _bracket(self: _Parser, opener: str) -> object:
        """``(...)``, ``[...]`` and the intervals they make; the French notation reverses a bracket to open that
        end (``]a, b[`` is ``(a, b)``, ``[a, b[`` is ``[a, b)``, ``]-\\infty, 2]`` is ``(-\\infty, 2]``)."""
        self._enter()
        v = self.parse_list(closers=(")", "]", "["))
        self.depth -= 1
        closer = self.next()
        if not closer.is_op(")", "]", "["):
            raise ParseError(f"unclosed {opener!r}")
        items = v.items if isinstance(v, Seq) and v.kind == "list" else None
        french = opener == "]" or closer.text == "["
        if items is None and not french:
            if opener == "(" and closer.text == ")":
                return v.e if isinstance(v, Expr) else v
            if opener == "[" and closer.text == "]" and isinstance(v, Expr):
                return v.e
            raise ParseError(f"{opener}...{closer.text} around a single value")
        ends = [i.e if isinstance(i, Expr) else None for i in items or ()]
        if french:
            if len(ends) != 2 or None in ends or opener == "(" or closer.text == ")":
                raise ParseError(f"{opener}...{closer.text} is not an interval")
            return Ivl(ends[0], ends[1], opener == "[", closer.text == "]")
        mixed = opener + closer.text in ("(]", "[)")
        inf = any(e is not None and e.has(sp.oo) for e in ends)
        if len(ends) == 2 and None not in ends and (mixed or inf or opener + closer.text == "[]"):
            return Ivl(ends[0], ends[1], opener == "[", closer.text == "]")
        return Seq("tuple", items or ())

    def _matrix(self: _Parser) -> sp.Basic:
        env = self._raw_arg()
        if env.rstrip("*") not in ("pmatrix", "bmatrix", "matrix", "Bmatrix", "vmatrix", "array"):
            raise ParseError(f"unsupported environment {env!r}")
        if env == "array" and self.peek().is_op("{"):
            self._raw_arg()
        rows: list[list[object]] = [[]]
        while True:
            if self.peek().is_cmd("end"):
                self.next()
                self._raw_arg()
                break
            if self.peek().kind == "end":
                raise ParseError(f"unclosed environment {env!r}")
            rows[-1].append(self.parse_add())
            t = self.next()
            if t.is_op("&"):
                continue
            if t.is_cmd("\\"):
                if self.peek().is_op("["):
                    raise ParseError("row spacing after \\\\ that is not a length")  # [2pt] is stripped before
                rows.append([])
                continue
            if t.is_cmd("end"):
                self._raw_arg()
                break
            raise ParseError(f"unexpected {t.text!r} in a matrix")
        rows = [r for r in rows if r]
        if not rows or len({len(r) for r in rows}) != 1:
            raise ParseError("matrix rows of different lengths")
        self._need_scalar(*(c for r in rows for c in r))
        if env == "vmatrix" and len(rows) > 4:
            raise ParseError("determinant larger than 4x4")
        m = sp.ImmutableMatrix(rows)
        return m.det(method="berkowitz") if env == "vmatrix" else m  # bareiss can hang on symbolic entries
