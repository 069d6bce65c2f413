"""Parsed answer values and the guarded arithmetic the parser builds them with.

An answer is one of a few shapes: an expression (:class:`Expr`, a sympy object, possibly a matrix), a relation
chain (``x = 3``, ``2 \\le x < 5``), a sequence (an unordered list, a tuple, a set), an interval or a union of
intervals, a number in another base, a piece of text, or :class:`Huge` (a value too large to evaluate, kept as its
normalized source text). Markers ride inside sympy expressions as reserved symbols: ``PCT`` for a percent sign,
``DEG`` for a degree sign and ``PM`` for a ``\\pm`` sign; :mod:`rewards.math.compare` substitutes them.

The guards here are what keep every pair cheap: integer powers, factorials and binomials are evaluated only when
their result stays under :data:`MAX_BITS`; otherwise :class:`HugeValue` is raised and the whole answer becomes
:class:`Huge`. This module does not parse or compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

__all__ = [
    "Expr",
    "Rel",
    "Seq",
    "Ivl",
    "IvlUnion",
    "Based",
    "Text",
    "Huge",
    "Value",
    "HugeValue",
    "PCT",
    "DEG",
    "PM",
    "MARKERS",
    "MAX_BITS",
    "safe_pow",
    "safe_root",
    "safe_factorial",
    "safe_binomial",
    "show",
]

#: Largest integer (in bits) the parser will materialize from a power, factorial or binomial.
MAX_BITS = 60_000
#: Largest integer exponent applied to a non-trivial base.
MAX_EXPONENT = 20_000
MAX_FACTORIAL = 3_000
#: Largest integer exponent on an expression with variables.
MAX_SYMBOLIC_EXPONENT = 200
#: Largest integer (in bits) a root is taken of: sympy extracts perfect-power factors, which takes seconds above this.
MAX_ROOT_BITS = 1000

PCT = sp.Symbol("_pct_")
DEG = sp.Symbol("_deg_")
PM = sp.Symbol("_pm_")
MARKERS = frozenset({PCT, DEG, PM})


class HugeValue(ArithmeticError):
    """A value would be too large to evaluate (a tower of powers, a giant factorial)."""


@dataclass(frozen=True)
class Expr:
    """A scalar expression or a matrix (a sympy ``ImmutableMatrix``)."""

    e: sp.Basic


@dataclass(frozen=True)
class Rel:
    """A relation chain ``terms[0] ops[0] terms[1] ...``; ops among ``= < > <= >= != in``."""

    terms: tuple[sp.Basic | Value, ...]  # sympy expressions, or parsed values such as tuples and intervals
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Seq:
    """Several answers: ``kind`` is ``list`` (bare commas, "or"), ``tuple`` (parenthesized), or ``set``."""

    kind: str
    items: tuple[Value, ...]


@dataclass(frozen=True)
class Ivl:
    """An interval with sympy endpoints (``-oo``/``oo`` allowed)."""

    lo: sp.Basic
    hi: sp.Basic
    lo_closed: bool
    hi_closed: bool


@dataclass(frozen=True)
class IvlUnion:
    """A union of intervals (and isolated points as degenerate closed intervals)."""

    parts: tuple[Ivl, ...]


@dataclass(frozen=True)
class Based:
    """A numeral with an explicit base subscript, e.g. ``1011_2``."""

    digits: str
    base: int

    @property
    def value(self) -> int | None:
        try:
            return int(self.digits, self.base)
        except ValueError:
            return None


@dataclass(frozen=True)
class Text:
    """A text answer after normalization (lower case, no punctuation): ``monday``, ``c`` for a choice letter."""

    s: str
    choice: bool = False
    raw: bool = False  # a gold the grammar cannot read (``\\overline{AB}``, ``3:2``), compared as a string


@dataclass(frozen=True)
class Huge:
    """A value too large to evaluate; compared by its normalized source only."""

    src: str


Value = Expr | Rel | Seq | Ivl | IvlUnion | Based | Text | Huge


def _int_bits(x: sp.Basic) -> int | None:
    if isinstance(x, sp.Rational):
        return max(int(x.p).bit_length(), int(x.q).bit_length())
    return None


def safe_pow(base: sp.Basic, exp: sp.Basic) -> sp.Basic:
    """``base ** exp`` unless the result would be huge (then :class:`HugeValue`)."""
    if isinstance(base, sp.MatrixBase):
        numeric = not base.free_symbols and max(base.shape) <= 6
        rational = numeric and all(isinstance(x, sp.Rational) and (_int_bits(x) or 0) <= 64 for x in base)
        top = 16 if rational else 4 if numeric else 3  # radical entries swell: a 6x6 to the 16th took minutes
        if isinstance(exp, sp.Integer) and (0 <= int(exp) <= top or (numeric and int(exp) == -1)):
            return base**exp
        raise HugeValue("matrix power too large to evaluate (large, symbolic or negative exponent)")
    if isinstance(exp, sp.MatrixBase):
        raise HugeValue("matrix exponent")
    _no_markers(exp)
    trivial = base in (sp.S.Zero, sp.S.One, sp.S.NegativeOne, sp.I, -sp.I)
    if isinstance(exp, sp.Rational) and not trivial:
        if abs(int(exp.p)) > (MAX_SYMBOLIC_EXPONENT if base.free_symbols else MAX_EXPONENT):
            raise HugeValue(f"exponent {exp} too large")
        bits = _int_bits(base)
        if bits is not None and bits * abs(int(exp.p)) > MAX_BITS * max(1, int(exp.q)):
            raise HugeValue("power too large to evaluate")
        if int(exp.q) != 1 and _root_too_big(base):
            raise HugeValue("root of a number too large to factor")
        if bits is None and base.is_number and abs(int(exp.p)) > 400:
            raise HugeValue("power of an irrational number with a large exponent")
    elif not isinstance(exp, sp.Rational) and exp.is_number and not trivial:
        est = _magnitude(exp)
        if est is None or est > 1e4:
            raise HugeValue("exponent too large to evaluate")
    return sp.Pow(base, exp)


def _root_too_big(base: sp.Basic) -> bool:
    """A root of an expression holding a rational over :data:`MAX_ROOT_BITS` bits (``\\sqrt{10^{10000}+1}``)."""
    return any((_int_bits(r) or 0) > MAX_ROOT_BITS for r in base.atoms(sp.Rational))


def safe_root(base: sp.Basic, n: sp.Basic) -> sp.Basic:
    """The principal ``n``-th root of ``base`` (``\\sqrt``, ``\\sqrt[n]``), guarded like :func:`safe_pow`."""
    if isinstance(n, sp.Integer) and n > 0:
        return safe_pow(base, sp.Rational(1, int(n)))
    _no_markers(n)
    if _root_too_big(base):
        raise HugeValue("root of a number too large to factor")
    return sp.root(base, n)


def _magnitude(x: sp.Basic) -> float | None:
    try:
        v = complex(sp.N(x, 15))
    except (TypeError, ValueError, OverflowError):
        return None
    return abs(v)


def _no_markers(*xs: sp.Basic) -> None:
    """A marker (``\\pm``, %, °) under a power, factorial or binomial would be evaluated unguarded later."""
    if any(x.free_symbols & MARKERS for x in xs if isinstance(x, sp.Basic)):
        raise HugeValue("a sign, percent or degree marker inside a power, factorial or binomial")


def safe_factorial(n: sp.Basic) -> sp.Basic:
    """``n!`` for integers up to :data:`MAX_FACTORIAL`; symbolic factorials stay symbolic."""
    _no_markers(n)
    if isinstance(n, sp.Integer):
        if n < 0:
            return sp.zoo
        if n > MAX_FACTORIAL:
            raise HugeValue(f"factorial of {n} too large")
        return sp.factorial(n)
    if n.is_number:
        raise HugeValue("factorial of a non-integer")
    return sp.factorial(n)


def safe_binomial(n: sp.Basic, k: sp.Basic) -> sp.Basic:
    """``C(n, k)`` for integers up to ``4 * MAX_FACTORIAL``, or a non-integer ``n`` with a small integer ``k``."""
    cap = MAX_FACTORIAL * 4
    _no_markers(n, k)
    for x in (n, k):
        if x.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or any(abs(a) > cap for a in x.atoms(sp.Rational)):
            raise HugeValue("binomial of an infinite or very large argument")
    if isinstance(k, sp.Integer):
        if abs(int(k)) > cap or (not isinstance(n, sp.Integer) and n.is_number and abs(int(k)) > 64):
            raise HugeValue("binomial too large to evaluate")
    elif k.is_number:
        raise HugeValue("binomial with a non-integer lower argument")
    if isinstance(n, sp.Integer) and abs(int(n)) > cap:
        raise HugeValue("binomial too large to evaluate")
    return sp.binomial(n, k)


def show(v: Value | None) -> str | None:
    """A short printable form of a parsed value for ``Score.info``."""
    try:
        return _show(v)
    except ValueError:  # an integer too long for str()
        return "<value with a very long number>"


def _show(v: Value | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, Expr):
        return _sstr(v.e)
    if isinstance(v, Rel):
        parts = [show(t) if not isinstance(t, sp.Basic) else _sstr(t) for t in v.terms]
        out = str(parts[0])
        for op, p in zip(v.ops, parts[1:], strict=True):
            out += f" {op} {p}"
        return _short(out)
    if isinstance(v, Seq):
        inner = ", ".join(str(show(i)) for i in v.items)
        return _short({"tuple": f"({inner})", "set": f"{{{inner}}}"}.get(v.kind, f"[{inner}]"))
    if isinstance(v, Ivl):
        return _short(f"{'[' if v.lo_closed else '('}{v.lo}, {v.hi}{']' if v.hi_closed else ')'}")
    if isinstance(v, IvlUnion):
        return _short(" U ".join(str(show(p)) for p in v.parts))
    if isinstance(v, Based):
        return f"{v.digits}_{v.base}"
    if isinstance(v, Text):
        return f"choice:{v.s}" if v.choice else f"{'raw' if v.raw else 'text'}:{v.s}"
    return _short(f"huge:{v.src}")


#: Largest expression (in tree nodes) printed for ``Score.info``: sympy's printer sorts the terms of every sum by
#: evaluating them, which took 16 s for a 4x4 matrix of radicals to the 10th power.
MAX_SHOWN_NODES = 400


def _sstr(e: object) -> str:
    if isinstance(e, sp.Basic) and _nodes_over(e, MAX_SHOWN_NODES):
        shape = "x".join(map(str, e.shape)) + " matrix" if isinstance(e, sp.MatrixBase) else "expression"
        return f"<{shape} of more than {MAX_SHOWN_NODES} nodes>"
    try:
        return _short(sp.sstr(e, order="none"))
    except ValueError:  # an integer too long to print
        return "<very long number>"


def _nodes_over(e: sp.Basic, cap: int) -> bool:
    """More than ``cap`` nodes in the tree (counted lazily: a huge tree costs only the cap)."""
    return any(n > cap for n, _ in enumerate(sp.preorder_traversal(e)))


def _short(s: str, n: int = 300) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."
