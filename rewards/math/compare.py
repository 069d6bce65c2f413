"""Value equivalence of a parsed answer against a parsed gold (gold first; the relation is not symmetric).

Rules, cheapest first:

* Exact rationals compare exactly; a decimal is the rational it writes, so ``0.33`` is not ``1/3`` and
  ``3.14159`` is not pi, except for printed values (at least 10 significant digits, within a unit of the last
  digit: see :mod:`rewards.math.exact`). Closed forms without free symbols compare numerically at 50 digits with a
  relative bound of 1e-30, and a match is confirmed by evaluating the difference with adaptive precision, so
  ``10^{40} + \\sqrt2`` is not ``10^{40}``. A decimal gold accepts values within half a unit of its last place,
  and within ``tolerance`` (relative) too unless the problem asks for an approximation; with an approximation
  asked, a decimal answer may also round an exact gold to its own last place (at least the places asked for).
* A caller's stated ``precision`` (N decimal places, off by default) adds one rule: two real numbers without
  variables, one of them a decimal, are equal when they round alike at N places (``0.33`` = ``\\frac13`` at 2;
  ``3.14`` is not ``3.15``; two exact values such as ``\\frac13`` and ``\\frac{\\sqrt{11}}{10}`` are compared
  exactly, and expressions with variables keep their own rule). It applies to matrix entries, tuple items and
  interval ends one by one; the sides of a chain are still compared exactly.
* Expressions with variables compare at deterministic random points, confirmed the same way at one exact point;
  the points include negative values (``|x|`` is not ``x``), skipped only where a root or logarithm would leave
  the reals (``\\sqrt{x}\\sqrt{y} = \\sqrt{xy}`` where both roots are real, while ``\\sqrt{x^2}`` is not ``x``).
* ``x = 3`` equals ``3`` (labels, chains: :mod:`rewards.math.labels`); equations are equal when their difference
  forms are proportional (same solution set). An answer's equation is never solved: ``3x + 4 = 19`` states no
  value (a gold's equation may be solved: it is trusted), and against a solved one-variable gold (``x = 5``) an
  unsolved answer equation is wrong. Equations of several variables (lines, curves) stay equations.
* Intervals, inequalities and unions compare as sets of reals (an answer's inequality only in solved form,
  ``x > 3``, unless the gold is itself unsolved); ``(a, b)`` is a tuple or an open interval,
  whichever the gold is; a set is never a tuple, and ``[a, b]`` is a list only against a bare list.
* Bare lists and sets compare unordered, tuples ordered; ``\\pm`` expands to both signs (inside a matrix or an
  expression both signs must match).
* Percent and degree markers get one reading per pair: literal (``25%`` = 1/4, ``30°`` = pi/6), or dropped when
  every side is a multiple of the marker (``25%`` = 25); never whichever reading happens to match.

Every numeric step is bounded by the guards of :mod:`rewards.math.values` and a deadline checked between steps
(cooperative; the scoring path's process kill is the hard limit). This module compares structures (text, bases,
labels, lists, sets, tuples, intervals, relations) and owns the settings; the value equality of two expressions,
numeric evaluation included, is :mod:`rewards.math._expr_equal`. This module does not parse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import sympy as sp

from rewards.math._expr_equal import expr_equal, num, numeric_value, points
from rewards.math.labels import unassign
from rewards.math.sets import as_intervals, intervals_equal
from rewards.math.values import MARKERS, PM, Based, Expr, Huge, Ivl, Rel, Seq, Text, Value

__all__ = ["Options", "equivalent", "OutOfTime", "expand_values", "numeric_value"]

#: Exact comparison for the sides of a chain (no tolerance: a chain is true or not).
_MAX_ITEMS = 64


class OutOfTime(TimeoutError):
    """The cooperative per-pair deadline passed."""


@dataclass(frozen=True)
class Options:
    """Comparison settings; ``gold_inexact`` is set when the gold is a (possibly rounded) decimal."""

    percent_optional: bool = True
    tolerance: float = 1e-9
    deadline: float = float("inf")
    gold_inexact: bool = False
    #: the problem asks for an approximation ("round", "nearest", "approximately", ``\\approx`` in the gold)
    approximate: bool = False
    #: the decimal places it asks for, when it says ("to two decimal places", "nearest tenth"), else None
    places: int | None = None
    #: the decimal places a gold that is one plain decimal writes (``12.50``: 2, where its value has 1)
    gold_places: int | None = None
    #: the caller's stated precision: numbers, one of them a decimal, that round alike at this many places are equal
    precision: int | None = None

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise OutOfTime("comparison ran past its time limit")


_EXACT = Options()


def equivalent(gold: Value, ans: Value, opt: Options) -> tuple[bool, str]:
    """Whether ``ans`` states the same value as ``gold``, and a short reason."""
    if isinstance(gold, Huge) or isinstance(ans, Huge):
        same = isinstance(gold, Huge) and isinstance(ans, Huge) and gold.src == ans.src
        return same, "same unevaluated huge value" if same else "value too large to evaluate"
    gold, ans = _vector_as_tuple(gold, ans), _vector_as_tuple(ans, gold)
    if isinstance(gold, Text) or isinstance(ans, Text):
        return _text_equal(gold, ans)
    if isinstance(gold, Based) or isinstance(ans, Based):
        return _based_equal(gold, ans)
    if isinstance(gold, Rel) and isinstance(ans, Rel) and gold.ops == ans.ops == ("=",):
        gv, av = _unassign(gold), _unassign(ans)
        if isinstance(av, Rel) and not isinstance(gv, Rel) and len(_variables(ans)) <= 1:
            return False, "an unsolved equation does not state the value"  # x = 5 against 3x + 4 = 19
        same, why = _rel_equal(gold, ans, opt)
        if same or isinstance(gv, Rel) or isinstance(av, Rel) or not _same_label(gold.terms[0], ans.terms[0]):
            return same, why  # x = 5 is not y = 5
        return equivalent(gv, av, opt)  # the same label: (a, b) = (3, -2) and (a, b) = (3, -2.0)
    by_label = _by_label(gold, ans, opt)
    if by_label is not None:
        return by_label
    if isinstance(ans, Ivl) and isinstance(gold, Seq) and gold.kind == "list" and ans.lo_closed and ans.hi_closed:
        ans = Seq("list", (Expr(ans.lo), Expr(ans.hi)))  # [1, 2] written as a list
    gsol = _solutions(gold) if not isinstance(ans, Rel) else None  # the gold may be an equation to solve ...
    gold = Seq("list", tuple(gsol)) if gsol is not None else gold  # ... an answer must state its solutions
    solve = _unsolved(gold)  # an answer's inequality is solved only against an unsolved gold inequality
    gset, aset = as_intervals(gold, ans), as_intervals(ans, gold, solve=solve)
    if gset is not None and aset is not None:
        return intervals_equal(gset, aset, lambda x, y: _end_equal(x, y, opt)), "compared as sets of reals"
    gs, as_ = _expand(gold), _expand(ans)
    if len(gs) > 1 or len(as_) > 1 or (isinstance(gold, Seq) and isinstance(ans, Seq)):
        return _seq_equal(gold, ans, gs, as_, opt)
    g, a = gs[0], as_[0]
    gset, aset = as_intervals(g, a), as_intervals(a, g, solve=solve)
    if gset is not None or aset is not None:
        if gset is None or aset is None:
            return False, "a set of reals against a value"
        return intervals_equal(gset, aset, lambda x, y: _end_equal(x, y, opt)), "compared as sets of reals"
    if isinstance(g, Rel) or isinstance(a, Rel):
        return _rel_equal(g, a, opt)
    if isinstance(g, Expr) and isinstance(a, Expr):
        ok = expr_equal(g.e, a.e, opt)
        if ok and opt.precision is not None and not expr_equal(g.e, a.e, replace(opt, precision=None)):
            return True, f"equal when rounded to {opt.precision} decimal places"
        return ok, "equal values" if ok else "different values"
    if isinstance(g, Seq) and isinstance(a, Seq):
        return _seq_equal(g, a, _expand(g), _expand(a), opt)  # labelled tuples: (a, b) = (3, -2)
    return False, f"{type(a).__name__} answer against {type(g).__name__} gold"


def _variables(v: Rel) -> set[sp.Symbol]:
    """The variables of a relation's sympy sides (markers are not variables)."""
    out: set[sp.Symbol] = set()
    for t in v.terms:
        if isinstance(t, sp.Basic):
            out |= t.free_symbols - MARKERS
    return out


def _unsolved(v: Value) -> bool:
    """An inequality that is not in solved form (``2x + 1 > 7``, ``|x| < 3``; not ``x > 3`` or ``1 < x < 5``)."""
    return isinstance(v, Rel) and as_intervals(v, v, solve=False) is None and as_intervals(v, v) is not None


def _same_label(a: object, b: object) -> bool:
    """The same label, a tuple of variables in any order included: ``(a, b)`` and ``(b, a)``."""
    if isinstance(a, Seq) and isinstance(b, Seq):
        return sorted(map(str, a.items)) == sorted(map(str, b.items)) and len(a.items) == len(b.items)
    return a == b


def _vector_as_tuple(v: Value, other: Value) -> Value:
    if isinstance(v, Expr) and isinstance(v.e, sp.MatrixBase) and 1 in v.e.shape and isinstance(other, Seq):
        return Seq("tuple", tuple(Expr(x) for x in v.e))
    return v


# -- text and bases ----------------------------------------------------------------------------------------
def _text_equal(g: Value, a: Value) -> tuple[bool, str]:
    empty = Seq("set", ())
    if isinstance(g, Text) and isinstance(a, Text):
        if g.raw:
            return g.s == a.s, "gold outside the grammar: compared as normalized strings"
        return g.s == a.s, "text answers compared after normalization"
    nosol = Text("nosolution")
    if (g == nosol and a == empty) or (a == nosol and g == empty):
        return True, "no solution = empty set"
    return False, "text against math"


def _based_equal(g: Value, a: Value) -> tuple[bool, str]:
    if isinstance(g, Based) and isinstance(a, Based):
        return g.value == a.value and g.value is not None, "numerals with bases compared by value"
    if isinstance(g, Based) and isinstance(a, Expr) and isinstance(a.e, sp.Integer):
        return str(a.e) == g.digits, "digits compared in the gold's base"
    if isinstance(a, Based) and isinstance(g, Expr) and isinstance(g.e, sp.Integer):
        return a.value == int(g.e), "numeral with a base compared by value"
    return False, "numeral with a base against another kind of value"


# -- sequences ---------------------------------------------------------------------------------------------
def _unassign(v: Value) -> Value:
    """``x = 3`` -> 3; a true chain ``x = 3 + 4 = 7`` or ``3 + 4 = 7`` -> its last value (see :mod:`labels`)."""
    return unassign(v, _sides_equal)


def _sides_equal(x: object, y: object) -> bool:
    def wrap(t: object) -> Value:
        return t if isinstance(t, Seq) else Expr(t)

    try:
        return equivalent(wrap(x), wrap(y), _EXACT)[0]
    except OutOfTime:
        return False


def _expand(v: Value) -> list[Value]:
    """Items of a list/set, with ``\\pm`` expanded and assignments ``x = 3`` reduced to their values."""
    if isinstance(v, Seq) and v.kind != "tuple":
        items: list[Value] = []
        for it in v.items:
            items.extend(_expand(it))
        return items
    if isinstance(v, Rel) and v.ops == ("in",) and isinstance(v.terms[0], sp.Symbol) and isinstance(v.terms[1], Seq):
        if v.terms[1].kind == "set":
            return _expand(Seq("list", v.terms[1].items))  # x \in \{2, 3\}: the values 2 and 3
    if isinstance(v, Rel) and v.ops == ("=",) and any(isinstance(t, sp.Basic) and t.has(PM) for t in v.terms):
        signs = (Rel(tuple(t.subs(PM, s) if isinstance(t, sp.Basic) else t for t in v.terms), v.ops) for s in (1, -1))
        return [_unassign(r) for r in signs]
    v = _unassign(v)
    if isinstance(v, Expr) and not isinstance(v.e, sp.MatrixBase) and v.e.has(PM):
        return list(dict.fromkeys(Expr(v.e.subs(PM, s)) for s in (1, -1)))
    return [v]


def expand_values(v: Value) -> list[Value]:
    """The separate values an answer states (list items, both signs of ``\\pm``)."""
    return _expand(v)


def _seq_equal(gold: Value, ans: Value, gs: list[Value], as_: list[Value], opt: Options) -> tuple[bool, str]:
    if isinstance(gold, Seq) and isinstance(ans, Seq) and {gold.kind, ans.kind} == {"tuple", "set"}:
        return False, "a set is not an ordered tuple"
    if isinstance(ans, Seq) and ans.kind == "tuple" and _assignments(gold):
        gold = Seq("tuple", tuple(_ordered_items(gold) or ()))  # gold x = 1, y = 2 against (1, 2)
    if isinstance(gold, Seq) and gold.kind == "tuple":
        a_items = _ordered_items(ans)
        if a_items is None or len(a_items) != len(gold.items):
            return False, "tuple of a different length"
        ok = all(equivalent(g, a, opt)[0] for g, a in zip(gold.items, a_items, strict=True))
        return ok, "tuples compared in order"
    if isinstance(ans, Seq) and ans.kind == "tuple" and len(gs) == 1:
        return equivalent(gs[0], ans, opt) if not isinstance(gs[0], Seq) else (False, "tuple against a list")
    if len(gs) > _MAX_ITEMS or len(as_) > _MAX_ITEMS:
        return False, f"more than {_MAX_ITEMS} items"
    gs, as_ = _dedupe(gs, opt), _dedupe(as_, opt)
    if len(gs) != len(as_):
        return False, f"{len(as_)} distinct answers for {len(gs)} gold values (subset, superset or hedging)"
    free = list(as_)
    for g in gs:
        for i, a in enumerate(free):
            if equivalent(g, a, opt)[0]:
                free.pop(i)
                break
        else:
            return False, "answer set differs from the gold set"
    return True, "compared as unordered sets"


def _assignments(v: Value) -> bool:
    """A list of two or more ``variable = value`` items (``x = 1, y = 2``)."""
    return (
        isinstance(v, Seq)
        and v.kind == "list"
        and len(v.items) >= 2
        and all(isinstance(i, Rel) and i.ops == ("=",) and isinstance(i.terms[0], sp.Symbol) for i in v.items)
    )


def _by_label(gold: Value, ans: Value, opt: Options) -> tuple[bool, str] | None:
    """Two lists of assignments to distinct variables (``a = 1, b = 2``) compare value by variable, never as the
    unordered set of their values (``a = 2, b = 1`` is another answer); None when either side is not one."""
    if not (_assignments(gold) and _assignments(ans)):
        return None
    gl = {str(r.terms[0]): r for r in gold.items}  # type: ignore[union-attr]
    al = {str(r.terms[0]): r for r in ans.items}  # type: ignore[union-attr]
    if len(gl) != len(gold.items) or len(al) != len(ans.items):  # type: ignore[union-attr]
        return None  # x = 1, x = 2: the roots of one variable, an unordered list
    if set(gl) != set(al):
        return False, "assignments to other variables"
    ok = all(equivalent(_unassign(gl[k]), _unassign(al[k]), opt)[0] for k in gl)
    return ok, "assignments compared variable by variable"


def _ordered_items(v: Value) -> list[Value] | None:
    """The items of a tuple-like answer in order; assignments sorted by variable name (``y = 2, x = 1``)."""
    if isinstance(v, Seq):
        items = list(v.items)
        if all(isinstance(i, Rel) and i.ops == ("=",) and isinstance(i.terms[0], sp.Symbol) for i in items):
            items = sorted(items, key=lambda r: str(r.terms[0]))  # type: ignore[union-attr]  # Rels (checked above)
        return [_unassign(i) for i in items]
    if isinstance(v, Expr) and isinstance(v.e, sp.MatrixBase) and 1 in v.e.shape:
        return [Expr(x) for x in v.e]
    if isinstance(v, Ivl):
        return [Expr(v.lo), Expr(v.hi)] if not (v.lo_closed or v.hi_closed) else None
    return None


def _dedupe(items: list[Value], opt: Options) -> list[Value]:
    out: list[Value] = []
    for it in items:
        if not any(equivalent(o, it, opt)[0] for o in out):
            out.append(it)
    return out


def _solutions(v: Value) -> list[Value] | None:
    """Roots of a one-variable polynomial equation (degree <= 4 with small rational coefficients, else <= 2)."""
    if not (isinstance(v, Rel) and v.ops == ("=",) and all(isinstance(t, sp.Basic) for t in v.terms)):
        return None
    d = v.terms[0] - v.terms[1]  # type: ignore[operator]  # sympy sides (checked above)
    syms = d.free_symbols - MARKERS
    if len(syms) != 1 or d.free_symbols & MARKERS:
        return None
    x = syms.pop()
    try:
        poly = sp.Poly(d, x)
    except (sp.PolynomialError, sp.GeneratorsNeeded):
        return None
    small = all(c.is_Rational and abs(c.p) <= 10**4 and c.q <= 10**4 for c in poly.coeffs())
    if not 1 <= poly.degree() <= (4 if small else 2):
        return None  # radicals of big or irrational quartics take a long time
    roots = sp.roots(poly, cubics=False, quartics=False)  # factorable ones only: the general formulas are slow
    if sum(roots.values()) != poly.degree():
        return None
    return [Expr(r) for r in roots]


def _end_equal(g: sp.Basic, a: sp.Basic, opt: Options) -> bool:
    if g.is_infinite or a.is_infinite:
        return g == a
    return expr_equal(g, a, opt)


# -- relations ---------------------------------------------------------------------------------------------
def _rel_equal(g: Value, a: Value, opt: Options) -> tuple[bool, str]:
    if not (isinstance(g, Rel) and isinstance(a, Rel)):
        return False, "an equation against a value"
    if g.ops != a.ops or len(g.terms) != 2 or not all(isinstance(t, sp.Basic) for t in g.terms + a.terms):
        return False, "different relations"
    if g.ops == ("=",):
        dg = g.terms[0] - g.terms[1]  # type: ignore[operator]  # sympy sides (checked above)
        da = a.terms[0] - a.terms[1]  # type: ignore[operator]  # sympy sides (checked above)
        ok = _proportional(dg, da, opt)
        return ok, "equations with the same solution set" if ok else "equations with different solution sets"
    ok = all(expr_equal(x, y, opt) for x, y in zip(g.terms, a.terms, strict=True))
    return ok, "relations compared side by side"


def _proportional(dg: sp.Basic, da: sp.Basic, opt: Options) -> bool:
    syms = sorted(dg.free_symbols | da.free_symbols, key=str)
    if dg.free_symbols != da.free_symbols or not syms:
        return expr_equal(dg, da, opt)
    ratio = None
    for point in points(syms, 5):
        opt.check_time()
        x, y = num(dg, point), num(da, point)
        if x is None or y is None:
            continue
        if abs(y) < 1e-40:
            if abs(x) > 1e-40:
                return False
            continue
        r = x / y
        if ratio is None:
            ratio = r
        elif abs(r - ratio) > 1e-20 * max(abs(ratio), 1e-30):
            return False
    return ratio is not None and abs(ratio) > 1e-40
