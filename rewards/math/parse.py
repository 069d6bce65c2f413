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
:mod:`rewards.math.values`. Bracketed structures (tuples, intervals, matrices) are parsed by
:mod:`rewards.math.structures`, name tables live in :mod:`rewards.math.tables`. This module does not normalize raw
LaTeX (see :mod:`rewards.math.normalize`) and does not compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy as sp

from rewards.math.lexer import ParseError, Token, tokenize
from rewards.math.structures import StructureMixin
from rewards.math.tables import ATOM_CMDS, CONSTS, FRACS, FUNCS, GREEK, MUL_CMDS, RELOPS, TRIG
from rewards.math.values import (
    DEG,
    PCT,
    PM,
    Based,
    Expr,
    HugeValue,
    Ivl,
    Rel,
    Seq,
    Value,
    safe_binomial,
    safe_factorial,
    safe_pow,
    safe_root,
)

__all__ = ["ParseError", "parse_value", "MAX_DEPTH", "MAX_LITERAL_DIGITS", "MAX_TOKENS"]

MAX_DEPTH = 40
MAX_TOKENS = 500
MAX_LITERAL_DIGITS = 1000
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


class _Parser(StructureMixin):
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

    # -- atoms ---------------------------------------------------------------------------------------------
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
