"""Sets of reals: intervals, unions, inequalities and ``x \\in I`` as lists of :class:`~rewards.math.values.Ivl`.

``[2, 5)``, ``2 \\le x < 5``, ``x \\in [2, 5)`` and ``\\{x \\mid 2 \\le x < 5\\}`` (after normalization) all become
the same interval; ``x \\ne 1`` becomes two open rays; a one-variable quadratic inequality with small rational
coefficients, or a linear one with one ``|linear|`` (``x^2 > 4``, ``|x - 1| < 3``), is solved with sympy (larger
ones can take seconds and are refused); a bare pair ``(a, b)`` is an open interval only when the
other side of the comparison is a set. Endpoint equality is the caller's (passed in).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
import sympy.physics.units  # noqa: F401  # solveset imports it on its first call (0.3 s): paid at start-up, not by a pair

from rewards.math.labels import is_label
from rewards.math.values import Expr, Ivl, IvlUnion, Rel, Seq, Value

__all__ = ["as_intervals", "intervals_equal"]

_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def as_intervals(v: Value, other: Value, *, solve: bool = True) -> list[Ivl] | None:
    """``v`` as a list of intervals when it describes a set of reals (given what it is compared with), else None.

    With ``solve=False`` an inequality counts only in solved form (``x > 3``, ``1 < x \\le 5``, ``x \\ne 1``,
    ``x \\in I``): an answer that copies ``2x + 1 > 7`` has not solved it.
    """
    if isinstance(v, Ivl):
        return [v]
    if isinstance(v, IvlUnion):
        return list(v.parts)
    if isinstance(v, Seq) and v.kind == "tuple" and len(v.items) == 2 and isinstance(other, (Ivl, IvlUnion, Rel)):
        if isinstance(other, Rel) and not set(other.ops) & {*_FLIP, "in", "and"}:
            return None
        lo, hi = v.items
        if isinstance(lo, Expr) and isinstance(hi, Expr):
            return [Ivl(lo.e, hi.e, False, False)]
    if isinstance(v, Rel):
        return _rel_intervals(v, solve)
    if isinstance(v, Seq) and v.kind == "list" and any(isinstance(i, (Ivl, IvlUnion, Rel)) for i in v.items):
        parts: list[Ivl] = []
        for it in v.items:
            sub = as_intervals(it, other, solve=solve)
            if sub is None:
                return None
            parts.extend(sub)
        return parts
    return None


def _rel_intervals(r: Rel, solve: bool = True) -> list[Ivl] | None:
    if r.ops and set(r.ops) == {"and"}:
        return _intersection([_rel_intervals(t, solve) if isinstance(t, Rel) else None for t in r.terms])
    if r.ops == ("in",) and isinstance(r.terms[1], (Ivl, IvlUnion, Seq)):
        return as_intervals(r.terms[1], Ivl(sp.S.Zero, sp.S.One, False, False))
    if r.ops == ("!=",) and isinstance(r.terms[0], sp.Symbol) and isinstance(r.terms[1], sp.Basic):
        b = r.terms[1]
        return [Ivl(-sp.oo, b, False, False), Ivl(b, sp.oo, False, False)]
    if not r.ops or not all(o in _FLIP for o in r.ops) or len(r.ops) > 2:
        return None
    if any(not isinstance(t, sp.Basic) for t in r.terms):
        return None
    syms = [i for i, t in enumerate(r.terms) if _named(t)]
    if len(syms) != 1:
        if not solve:
            return None
        return _solved(r) if len(r.ops) == 1 else _solved_chain(r)
    k = syms[0]
    lo, hi, lc, hc = -sp.oo, sp.oo, False, False
    for i, op in enumerate(r.ops):
        left, right = r.terms[i], r.terms[i + 1]
        if i + 1 == k:
            bound, op = left, _FLIP[op]  # "bound op x" -> "x flip(op) bound"
        elif i == k:
            bound = right
        else:
            return None
        if op in ("<", "<="):
            hi, hc = bound, op == "<="
        else:
            lo, lc = bound, op == ">="
    return [Ivl(lo, hi, lc, hc)]


def _named(t: object) -> bool:
    """A variable or a named quantity (``x``, ``f(x)`` read as a product of letters): the side a set describes."""
    return isinstance(t, sp.Basic) and is_label(t) and not isinstance(t, sp.Abs)


_RELATIONS = {"<": sp.StrictLessThan, "<=": sp.LessThan, ">": sp.StrictGreaterThan, ">=": sp.GreaterThan}
_MAX_NODES = 60


def _solved(r: Rel) -> list[Ivl] | None:
    """``|x| < 3``, ``x^2 > 4``: a one-variable quadratic inequality, or a linear one with one ``|linear|``, solved.

    Anything else (trigonometric, several variables, large) is left alone: None.
    """
    if len(r.ops) != 1 or r.ops[0] not in _RELATIONS:
        return None
    d = r.terms[0] - r.terms[1]  # type: ignore[operator]  # sympy sides (as_intervals checked)
    syms = d.free_symbols
    if len(syms) != 1:
        return None
    if sum(1 for _ in zip(range(_MAX_NODES + 1), sp.preorder_traversal(d), strict=False)) > _MAX_NODES:
        return None
    x = next(iter(syms))
    absolutes = d.atoms(sp.Function)
    if len(absolutes) > 1 or any(not isinstance(f, sp.Abs) for f in absolutes):
        return None  # solveset on several |...| or other functions can take seconds
    placeholder = sp.Symbol("_abs_")
    for part in [d, *(f.args[0] for f in absolutes)]:
        poly = part.subs({f: placeholder for f in absolutes})
        if not poly.is_polynomial(x, placeholder):
            return None
        if sp.Poly(poly, x, placeholder).total_degree() > (1 if absolutes else 2):
            return None
        coeffs = [c for c in sp.Poly(poly, x).coeffs() if not c.has(sp.Symbol)]
        if not all(c.is_Rational and abs(c.p) <= 10**4 and c.q <= 10**4 for c in coeffs):
            return None  # irrational or large coefficients make solveset slow (it factors the discriminant)
    try:
        sol = sp.solveset(_RELATIONS[r.ops[0]](d, 0), x, sp.S.Reals)
    except (NotImplementedError, ValueError, TypeError):
        return None
    return _to_intervals(sol)


def _solved_chain(r: Rel) -> list[Ivl] | None:
    """``1 \\le |z| \\le 3/2``: a two-sided chain around one expression in one variable, as the intersection of
    its two halves (each solved as by :func:`_solved`)."""
    if len(r.ops) != 2 or not all(o in _RELATIONS for o in r.ops):
        return None
    a, mid, b = r.terms
    if not (isinstance(mid, sp.Basic) and len(mid.free_symbols) == 1):
        return None
    lower, upper = _solved(Rel((a, mid), (r.ops[0],))), _solved(Rel((mid, b), (r.ops[1],)))
    if lower is None or upper is None:
        return None
    sets = [sp.Union(*(_as_set(i) for i in h)) for h in (lower, upper)]
    return _to_intervals(sp.Intersection(*sets))


def _intersection(sets: list[list[Ivl] | None]) -> list[Ivl] | None:
    """Where every one of several conditions holds (``x > 1 \\wedge x < 3``); None when one is not a set."""
    if any(s is None for s in sets):
        return None
    return _to_intervals(sp.Intersection(*(sp.Union(*(_as_set(i) for i in s)) for s in sets if s is not None)))


def _as_set(i: Ivl) -> sp.Set:
    return sp.Interval(i.lo, i.hi, not i.lo_closed, not i.hi_closed)


def _to_intervals(sol: sp.Set) -> list[Ivl] | None:
    if sol is sp.S.EmptySet:
        return []
    if sol is sp.S.Reals:
        return [Ivl(-sp.oo, sp.oo, False, False)]
    if isinstance(sol, sp.Interval):
        return [Ivl(sol.start, sol.end, not sol.left_open, not sol.right_open)]
    if isinstance(sol, sp.FiniteSet):
        return [Ivl(p, p, True, True) for p in sol.args]
    if isinstance(sol, sp.Union):
        parts: list[Ivl] = []
        for a in sol.args:
            sub = _to_intervals(a)
            if sub is None:
                return None
            parts.extend(sub)
        return parts
    return None


def intervals_equal(gs: list[Ivl], as_: list[Ivl], same: Callable[[sp.Basic, sp.Basic], bool]) -> bool:
    """Equal unions of intervals: same count, endpoints equal by ``same``, same closedness at finite ends."""
    if len(gs) != len(as_):
        return False

    def key(v: Ivl) -> float:
        return float(sp.N(v.lo)) if v.lo.is_number else 0.0

    try:
        gs, as_ = sorted(gs, key=key), sorted(as_, key=key)
    except (TypeError, ValueError):
        pass
    for g, a in zip(gs, as_, strict=True):
        if not (same(g.lo, a.lo) and same(g.hi, a.hi)):
            return False
        if (g.lo.is_finite is not False and g.lo_closed != a.lo_closed) or (
            g.hi.is_finite is not False and g.hi_closed != a.hi_closed
        ):
            return False
    return True
