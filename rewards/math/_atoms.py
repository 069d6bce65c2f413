"""The atoms of the answer grammar (a mixin of the parser): numbers, names, commands and their arguments.

An atom is what the arithmetic of :mod:`rewards.math.parse` combines: a number literal (decimals and scientific
notation become exact rationals), a name (a function applied to its argument, a constant, a symbol with its
subscript, the index of an enclosing sum), a ``{group}``, ``|x|``, or a command: ``\\frac``, ``\\sqrt[n]{x}``,
``\\binom``, ``\\lfloor``, ``\\operatorname{atan}``, ``\\{...\\}``, ``\\sum_{k=a}^{b}``/``\\prod`` (kept
unevaluated, the index renamed canonically), ``\\based``, ``\\mathbb{R}``. Commands take LaTeX arguments: a
group, else one character (``\\frac12``). ``|x|`` and odd roots of negative numbers are decided numerically, never
by sympy's assumption engine.

Every literal is capped (:data:`MAX_LITERAL_DIGITS`) and every power, root and binomial goes through the guards of
:mod:`rewards.math.values`. This module does not handle precedence, lists or relations (:mod:`rewards.math.parse`)
or bracketed structures (:mod:`rewards.math.structures`), and does not normalize or compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

from rewards.math.lexer import ParseError, Token
from rewards.math.tables import CONSTS, FRACS, FUNCS, GREEK, TRIG
from rewards.math.values import DEG, Based, Expr, Ivl, Seq, safe_binomial, safe_pow, safe_root

if TYPE_CHECKING:
    from rewards.math.values import Value

__all__ = ["AtomMixin", "MAX_LITERAL_DIGITS"]

MAX_LITERAL_DIGITS = 1000


class AtomMixin:
    """Parser methods for atoms; :class:`rewards.math.parse._Parser` supplies the token state and the methods
    declared below, :class:`~rewards.math.structures.StructureMixin` the bracketed structures."""

    toks: list[Token]
    pos: int
    depth: int
    abs_depth: int
    bound: list[sp.Symbol]  # the index variables of the sums being parsed

    if TYPE_CHECKING:

        def peek(self, k: int = 0) -> Token: ...
        def next(self) -> Token: ...
        def expect_op(self, op: str) -> None: ...
        def _enter(self) -> None: ...
        def _need_scalar(self, *xs: object) -> None: ...
        def parse_list(self, closers: tuple[str, ...]) -> Value: ...
        def parse_add(self) -> object: ...
        def parse_mul(self) -> object: ...
        def parse_power(self) -> object: ...
        def _group_or_unary(self) -> object: ...
        def _bracket(self, opener: str) -> object: ...
        def _matrix(self) -> sp.Basic: ...

    def parse_atom(self) -> object:
        self._enter()
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> object:
        t = self.next()
        if t.kind == "num":
            return self._number(t.text)
        if t.kind == "name":
            return self._name(t.text)
        if t.kind == "cmd":
            return self._command(t.text)
        if t.is_op("(", "[", "]"):
            return self._bracket(t.text)  # "]" opens a French interval: ]a, b[ is (a, b)
        if t.is_op("{"):
            self.pos -= 1
            return self._group()
        if t.is_op("|"):
            self.abs_depth += 1
            inner = self.parse_add()
            self.abs_depth -= 1
            self.expect_op("|")
            self._need_scalar(inner)
            return _abs(inner)
        raise ParseError(f"unexpected {t.text or 'end of answer'!r}")

    def _number(self, text: str) -> sp.Basic:
        if len(text) > MAX_LITERAL_DIGITS:
            raise ParseError(f"number literal longer than {MAX_LITERAL_DIGITS} digits")
        mant, _, ex = text.lower().partition("e")
        whole, _, frac = mant.partition(".")
        val = sp.Rational(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
        if ex:
            e = int(ex)
            if abs(e) > 400:
                raise ParseError("scientific exponent out of range")
            val = val * sp.Rational(10) ** e
        if self.peek().is_op("_") and self.peek(1).kind in ("num", "op"):
            raise ParseError("subscript on a number")  # bases are rewritten by normalize as \based
        return val

    def _name(self, name: str) -> object:
        if any(b.name == name for b in self.bound):
            return self._symbol(name)  # \sum_{i=1}^{n} i^2: the index, not the imaginary unit
        if name in FUNCS:
            return self._apply(name)
        if name in CONSTS:
            return CONSTS[name]
        if name in ("or", "and"):
            raise ParseError(f"unexpected {name!r}")
        return self._symbol(name)

    def _symbol(self, name: str) -> sp.Basic:
        if self.peek().is_op("_") and self.bound:
            indexed = self._indexed(name)
            if indexed is not None:
                return indexed
        if self.peek().is_op("_"):
            self.next()
            sub = self._raw_arg()
            return sp.Symbol(f"{name}_{sub}")
        return sp.Symbol(name)

    def _indexed(self, name: str) -> sp.Basic | None:
        """Inside a sum, ``F_{n-k-1}`` with the index ``k`` in its subscript is the term ``F(n - k - 1)``."""
        save = self.pos
        self.next()
        t = self.peek()
        sub: object = None
        if t.is_op("{"):
            sub = self._group()
        elif t.kind == "name" and len(t.text) == 1:
            self.next()
            sub = sp.Symbol(t.text)
        if isinstance(sub, sp.Basic) and sub.free_symbols & set(self.bound):
            return sp.Function(name)(sub)
        self.pos = save
        return None

    def _big_operator(self, name: str) -> sp.Basic:
        """``\\sum_{k=a}^{b} term`` (``\\prod`` alike), unevaluated; the term is one product, as LaTeX sets it."""
        if not self.peek().is_op("_"):
            raise ParseError(f"\\{name} without its index")
        self.next()
        self.expect_op("{")
        var = self.next()
        if var.kind != "name" or len(var.text) != 1 or not self.peek().is_op("="):
            raise ParseError(f"\\{name}: expected an index such as k=1")
        self.next()
        lo = self.parse_add()
        self.expect_op("}")
        if not self.peek().is_op("^"):
            raise ParseError(f"\\{name} without its upper limit")
        self.next()
        hi = self._arg(single=True)
        k = sp.Symbol(var.text)
        self.bound.append(k)
        try:
            term = self.parse_mul()
        finally:
            self.bound.pop()
        self._need_scalar(lo, hi, term)
        if not isinstance(term, sp.Basic):
            raise ParseError(f"\\{name} of a structure")
        index = sp.Symbol(f"_index{len(self.bound)}")  # the index's name is not part of the value
        return (sp.Sum if name == "sum" else sp.Product)(term.subs(k, index), (index, lo, hi))

    def _raw_arg(self) -> str:
        t = self.next()
        if t.is_op("{"):
            parts = []
            while not self.peek().is_op("}"):
                if self.peek().kind == "end":
                    raise ParseError("unclosed '{'")
                parts.append(self.next().text)
            self.next()
            return "".join(parts)
        if t.kind == "num" and len(t.text) > 1:
            self._split_num(t)
            return t.text[0]
        return t.text

    def _split_num(self, t: Token) -> None:
        """Leave the digits after the first in the stream (LaTeX ``\\frac12`` takes one character)."""
        self.toks.insert(self.pos, Token("num", t.text[1:]))

    def _arg(self, single: bool = False) -> object:
        """A command argument: a ``{group}``, else (LaTeX) one character when ``single``, else a power."""
        t = self.peek()
        if t.is_op("{"):
            return self._group()
        if single and t.kind == "num" and len(t.text) > 1 and t.text.isdigit():
            self.next()
            self._split_num(t)
            return sp.Integer(int(t.text[0]))
        if t.is_op("("):
            return self.parse_atom()
        return self.parse_power()

    def _group(self) -> object:
        self.expect_op("{")
        self._enter()
        v = self.parse_list(closers=("}",))
        self.depth -= 1
        self.expect_op("}")
        return v.e if isinstance(v, Expr) else v

    def _apply(self, name: str) -> sp.Basic:
        power = None
        if name not in ("sqrt", "exp", "abs", "cbrt") and self.peek().is_op("^"):  # \sin^2 x, \operatorname{atan}^2 x
            self.next()
            power = self._group_or_unary()
        base = None
        if name == "log" and self.peek().is_op("_"):
            self.next()
            base = self._arg()
        if name == "sqrt" and self.peek().is_op("["):
            self.next()
            n = self.parse_add()
            self.expect_op("]")
            arg = self._arg(single=True)
            self._need_scalar(n, arg)
            if isinstance(n, sp.Integer) and n % 2 == 1 and _negative_number(arg):
                return -safe_root(-arg, n)  # type: ignore[operator]  # \sqrt[3]{-8} = -2: the real odd root
            return safe_root(arg, n)
        if name in TRIG and power is not None and power == -1:
            name, power = "arc" + name if "arc" + name in FUNCS else name, None  # \tan^{-1} x is arctan x
        arg = self._arg(single=name == "sqrt")
        if name == "log" and isinstance(arg, Seq) and arg.kind == "tuple" and len(arg.items) == 2 and base is None:
            arg, base = (x.e if isinstance(x, Expr) else x for x in arg.items)  # sympy's log(x, b)
        self._need_scalar(arg) if base is None else self._need_scalar(arg, base)
        if isinstance(arg, sp.MatrixBase):
            raise ParseError(f"{name} of a matrix")
        if name in TRIG and isinstance(arg, sp.Basic) and DEG in arg.free_symbols:
            arg = arg.subs(DEG, sp.pi / 180)
        if name == "exp":
            out = safe_pow(sp.E, arg)
        elif name == "abs":
            out = _abs(arg)
        elif name == "sqrt":
            out = safe_root(arg, sp.Integer(2))
        elif name == "cbrt":  # the real cube root
            neg = bool(getattr(arg, "is_negative", False))
            out = safe_root(-arg if neg else arg, sp.Integer(3))  # type: ignore[operator]  # sympy (_need_scalar)
            out = -out if neg else out
        else:
            out = sp.log(arg, base) if base is not None else FUNCS[name](arg)
        return safe_pow(out, power) if power is not None else out

    def _command(self, name: str) -> object:
        if name in FRACS:
            num = self._arg(single=True)
            den = self._arg(single=True)
            self._need_scalar(num, den)
            return num / den  # type: ignore[operator]  # sympy values (_need_scalar)
        if name in FUNCS or name in ("pi", "infty", "infinity"):
            return self._name(name)
        if name in GREEK:
            return self._symbol(name)
        if name in ("binom", "dbinom", "tbinom"):
            n, k = self._arg(single=True), self._arg(single=True)
            self._need_scalar(n, k)
            return safe_binomial(n, k)
        if name in ("lfloor", "lceil"):
            inner = self.parse_add()
            closer = self.next()
            if not closer.is_cmd("rfloor", "rceil"):
                raise ParseError(f"unclosed \\{name}")
            self._need_scalar(inner)
            return sp.floor(inner) if name == "lfloor" else sp.ceiling(inner)
        if name == "operatorname" and self.peek().is_op("{") and self.peek(2).is_op("}"):
            inner = self.peek(1)
            if inner.kind == "name" and inner.text in FUNCS:
                self.pos += 3
                return self._apply(inner.text)  # \operatorname{atan}(x), as sympy prints it
        if name in ("mathrm", "operatorname", "mathbf", "boldsymbol"):
            return self._arg()
        if name == "{":
            v = self.parse_list(closers=("}",))
            if not self.next().is_cmd("}"):
                raise ParseError("unclosed '\\{'")
            items = v.items if isinstance(v, Seq) else (v,)
            return Seq("set", tuple(items))
        if name in ("emptyset", "varnothing"):
            return Seq("set", ())
        if name == "begin":
            return self._matrix()
        if name in ("sum", "prod"):
            return self._big_operator(name)
        if name == "based":
            digits, base = self._raw_arg(), self._raw_arg()
            return Based(digits.upper(), int(base))
        if name == "mathbb" and self._raw_arg() == "R":
            return Ivl(-sp.oo, sp.oo, False, False)
        raise ParseError(f"unsupported command \\{name}")


def _negative_number(x: object) -> bool:
    """A number without variables whose 30-digit value is negative (decided numerically, not by assumptions)."""
    if not isinstance(x, sp.Basic) or x.free_symbols or not x.is_number:
        return False
    try:
        v = sp.N(x, 30)
    except (TypeError, ValueError, ArithmeticError):
        return False
    return bool(v.is_real and v < 0)


def _abs(x: sp.Basic) -> sp.Basic:
    """``|x|`` without sympy's assumption engine where it is slow.

    A rational is done directly (``Abs`` of a 12000-bit integer ran a primality test for seconds); with variables it
    stays unevaluated (the sign analysis of ``2^{a^{300}}`` took seconds).
    """
    if isinstance(x, sp.Rational):
        return sp.Rational(abs(int(x.p)), int(x.q))
    if x.free_symbols or not x.is_number:
        return sp.Abs(x, evaluate=False)
    re_, im = (sp.N(p, 30) for p in x.as_real_imag()) if _gaussian(x) else (sp.N(x, 30), sp.S.Zero)
    if im == 0 and re_.is_real and abs(re_) > 1e-25:
        return x if re_ > 0 else -x  # the sign from a 30-digit value, not from sympy's assumptions
    if _gaussian(x):
        a, b = x.as_real_imag()
        return safe_root(a**2 + b**2, sp.Integer(2))  # |3 + 4i| = 5
    return sp.Abs(x, evaluate=False)


def _gaussian(x: sp.Basic) -> bool:
    """Rationals and ``i`` under + and * only."""
    if x.is_Rational or x is sp.I:
        return True
    return isinstance(x, (sp.Add, sp.Mul)) and all(_gaussian(a) for a in x.args)
