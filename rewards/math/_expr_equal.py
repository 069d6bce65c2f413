"""Value equality of two sympy expressions (matrices included), the numeric core of :mod:`rewards.math.compare`.

* Exact rationals compare exactly, unless a decimal gold or an asked approximation brings its rounding window
  (:mod:`rewards.math.exact`); rationals and ``i`` under + and * compare exactly too.
* Closed forms without free symbols compare at 50 digits with a relative bound of 1e-30 (a decimal gold's
  ``tolerance`` widens it), and a match is confirmed by evaluating the difference with adaptive precision.
* Expressions with variables compare at deterministic random points, negative ones included (``|x|`` is not
  ``x``) except where a root or logarithm would leave the reals, and a match is confirmed at one exact point.
* Percent and degree markers get one reading per pair; ``\\pm`` stands for both signs.

Numeric evaluation is refused where it could need astronomically many digits (huge trigonometric, factorial or
exponent arguments), sums and products are never evaluated, and the caller's deadline is checked between points.
This module compares two expressions only: lists, sets, tuples, intervals, relations and labels are
:mod:`rewards.math.compare`'s, which also owns :class:`~rewards.math.compare.Options`; nothing here parses.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import sympy as sp
from sympy.functions.elementary.trigonometric import TrigonometricFunction

from rewards.math.exact import Rounding, confirmed_zero, decimal_matches, same_at_places
from rewards.math.values import DEG, MARKERS, PCT, PM

if TYPE_CHECKING:
    from rewards.math.compare import Options

__all__ = ["expr_equal", "numeric_value", "num", "points"]

_EXACT_REL = sp.Float("1e-30", 60)
_MAX_OPS = 400


def expr_equal(g: sp.Basic, a: sp.Basic, opt: Options) -> bool:
    """Value equality of two sympy expressions (matrices included) under one reading of the markers.

    ``\\pm`` stands for both signs, so both must agree. A percent or degree sign is read literally (``25\\%`` is
    1/4, ``30°`` is pi/6); with ``percent_optional`` (percent) and always (degrees) it may also be dropped (``25\\%``
    = 25) but only when every side that carries it is a multiple of it, so that the two readings are the same
    quantity in two units. An expression whose value depends on the reading (``(100\\% - 1)/99``) gets the literal
    reading only: one answer never matches two golds by picking a reading for each.
    """
    if g == a:
        return True
    markers = (g.free_symbols | a.free_symbols) & MARKERS if hasattr(g, "free_symbols") else set()
    if not markers:
        return _plain_equal(g, a, opt)
    if PM in markers:
        return all(expr_equal(g.subs(PM, s), a.subs(PM, s), opt) for s in (1, -1))
    readings: list[dict[sp.Symbol, sp.Basic]] = [{PCT: sp.Rational(1, 100), DEG: sp.pi / 180}]
    for marker, on in ((PCT, opt.percent_optional), (DEG, True)):
        if on and marker in markers and all(_multiple_of(x, marker) for x in (g, a)):
            readings += [{**r, marker: sp.Integer(1)} for r in readings]
    return any(_plain_equal(g.subs(r), a.subs(r), opt) for r in readings)


def _multiple_of(e: sp.Basic, marker: sp.Symbol) -> bool:
    """``e`` is ``marker`` times something free of it (or does not hold the marker at all)."""
    if marker not in e.free_symbols:
        return True
    if isinstance(e, sp.MatrixBase) or _too_big(e):
        return False
    try:
        return marker not in sp.expand(e / marker).free_symbols
    except (TypeError, ValueError, ArithmeticError):
        return False


def _plain_equal(g: sp.Basic, a: sp.Basic, opt: Options) -> bool:
    if _value_equal(g, a, opt):
        return True
    return opt.precision is not None and _alike_at_places(g, a, opt)


def _alike_at_places(g: sp.Basic, a: sp.Basic, opt: Options) -> bool:
    """The caller's ``precision``: two real numbers without variables, one a decimal, that round alike at that many
    places (:func:`~rewards.math.exact.same_at_places`); never expressions with variables, matrices or infinities."""
    if isinstance(g, sp.MatrixBase) or isinstance(a, sp.MatrixBase) or opt.precision is None:
        return False  # a matrix is compared entry by entry (each entry comes back here)
    if g.free_symbols or a.free_symbols or g.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or a.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return False
    if g.has(sp.Sum, sp.Product) or a.has(sp.Sum, sp.Product) or _too_big(g) or _too_big(a):
        return False
    if not (_evaluable(g, None) and _evaluable(a, None)):
        return False
    opt.check_time()
    return same_at_places(g, a, opt.precision)


def _value_equal(g: sp.Basic, a: sp.Basic, opt: Options) -> bool:
    if g == a:
        return True
    gm, am = isinstance(g, sp.MatrixBase), isinstance(a, sp.MatrixBase)
    if gm or am:
        if not (gm and am) or g.shape != a.shape:
            return False
        return all(_plain_equal(x, y, opt) for x, y in zip(g, a, strict=True))
    if g.has(sp.Sum, sp.Product) or a.has(sp.Sum, sp.Product):
        return False  # never evaluated (a sum to 10^9 would run for hours): equal only as written, up to order
    if isinstance(g, sp.Rational) and isinstance(a, sp.Rational):
        if _rounding(opt).window(g) is not None:
            return _rounding(opt).holds(g, a)
        return decimal_matches(g, None, a) or _rounding(opt).rounds_exact(g, a)  # 0.0833333333333333 = 1/12
    if g.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or a.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return False
    if _too_big(g) or _too_big(a):
        return False
    opt.check_time()
    syms = g.free_symbols | a.free_symbols
    if not syms:
        d = g - a
        if _gaussian_rational(d) and not (opt.gold_inexact and (opt.tolerance > 0 or opt.approximate)):
            return d == 0  # exact: rationals and i only
        gx, ax = num(g), num(a)
        if _close(gx, ax, None):
            return confirmed_zero(d)  # 10^{40} + sqrt(2) is not 10^{40}, and 7 + 10^{-40} pi is not 7.0
        if isinstance(g, sp.Rational) and _rounding(opt).window(g) is not None:
            return ax is not None and ax.is_real and _rounding(opt).holds(g, ax)  # sqrt(2) = 1.414213562
        if opt.gold_inexact and not isinstance(g, sp.Rational):
            return _close(gx, ax, opt)  # a gold with decimals inside (2.5 pi): its relative tolerance
        return isinstance(a, sp.Rational) and (decimal_matches(g, gx, a) or _rounding(opt).rounds_exact(gx, a))
    checked, tight = 0, True
    branches = _branch_nodes(g) | _branch_nodes(a)
    for k, point in enumerate(points(sorted(syms, key=str), 5)):
        opt.check_time()
        if k >= 3:
            point = {s: -v if (k == 3 or i % 2) else v for i, (s, v) in enumerate(point.items())}  # |x| is not x
            if branches and not _on_real_branches(branches, point):
                continue  # sqrt(x)sqrt(y) = sqrt(xy) where every root is real; negative points leave the domain
        x, y = num(g, point), num(a, point)
        if x is None or y is None:
            continue
        if not _close(x, y, opt):
            return False
        tight = tight and _close(x, y, None)
        checked += 1
    if checked < 2:
        return False
    if not tight:
        return True  # within the tolerance of a decimal gold, and not a perturbation far below it
    return confirmed_zero(g - a, points(sorted(syms, key=str), 1, exact=True)[0])


def _rounding(opt: Options) -> Rounding:
    return Rounding(opt.gold_inexact, opt.approximate, opt.tolerance, opt.places, opt.gold_places)


def _gaussian_rational(e: sp.Basic) -> bool:
    """Built from rationals and ``i`` with + and * only (so ``== 0`` is exact)."""
    if e.is_Rational or e is sp.I:
        return True
    return isinstance(e, (sp.Add, sp.Mul)) and all(_gaussian_rational(x) for x in e.args)


def _too_big(e: sp.Basic) -> bool:
    """More than ``_MAX_OPS`` nodes (counted lazily, so a huge tree costs only the cap)."""
    for n, _ in enumerate(sp.preorder_traversal(e)):
        if n > _MAX_OPS:
            return True
    return False


def _branch_nodes(e: sp.Basic) -> set[sp.Basic]:
    """Roots, fractional powers and logarithms: where a value leaves the reals for some signs of the variables."""
    if isinstance(e, sp.MatrixBase):
        return set()
    return {p for p in e.atoms(sp.Pow) if not p.exp.is_integer} | set(e.atoms(sp.log))


def _on_real_branches(nodes: set[sp.Basic], point: dict[sp.Symbol, sp.Basic]) -> bool:
    """Every root and logarithm is real at ``point`` (a root of a positive number, a log of one), so a difference
    there is a difference of values: ``\\sqrt{x^2}`` is ``|x|``, not ``x``, at ``x = -3``."""
    for node in nodes:
        inner = node.base if isinstance(node, sp.Pow) else node.args[0]
        v = num(inner, point)
        if v is None or not v.is_real or v <= 0:
            return False
    return True


def points(syms: list[sp.Symbol], n: int, exact: bool = False) -> list[dict[sp.Symbol, sp.Basic]]:
    """``n`` deterministic points; 60-digit floats unless ``exact`` (for evalf's ``subs``, which stays numeric):
    substituting exact values with ``.subs`` makes sympy expand binomials and powers symbolically."""
    rng = random.Random(1234567)
    out: list[dict[sp.Symbol, sp.Basic]] = []
    for _ in range(n):
        point = {s: sp.Rational(rng.randint(11, 97), rng.randint(7, 31)) for s in syms}
        out.append(point if exact else {s: sp.Float(v, 60) for s, v in point.items()})
    return out


def numeric_value(x: sp.Basic) -> sp.Basic | None:
    """``x`` (without variables) as a 50-digit number, or None when it cannot be evaluated safely."""
    return num(x)


def num(x: sp.Basic, point: dict | None = None) -> sp.Basic | None:
    """``x`` (at ``point``, substituted numerically, never exactly) as a 50-digit complex number, or None."""
    try:
        if not _evaluable(x, point):
            return None
        v = sp.N(x, 50, subs=point, maxn=200) if point else sp.N(x, 50, maxn=200)
        if not v.is_number:
            return None
        re_, im = v.as_real_imag()
        re_, im = sp.Float(re_, 50), sp.Float(im, 50)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not (re_.is_finite and im.is_finite):
        return None
    return re_ + sp.I * im if im != 0 else re_


def _evaluable(x: sp.Basic, point: dict | None) -> bool:
    """False when numeric evaluation could need astronomically many digits or a giant exponent.

    Checked innermost first at 15 digits (cheap even for ``e^{e^{13}}``): a trigonometric argument above 1e6 (its
    reduction needs that many digits), a factorial/gamma/binomial argument above 1e5, a power whose exponent is
    above 1e6.
    """
    for node in sp.postorder_traversal(x):
        if isinstance(node, (sp.Sum, sp.Product)):
            return False  # a sum is compared as written, never evaluated
        if isinstance(node, TrigonometricFunction):
            args, bound = node.args[:1], 1e6
        elif isinstance(node, (sp.factorial, sp.gamma, sp.binomial)):
            args, bound = node.args, 1e5
        elif isinstance(node, sp.Pow) and not node.exp.is_Number:
            args, bound = (node.exp,), 1e6
        elif isinstance(node, sp.exp):  # e^x is exp(x), not a Pow: e^{10^{200}} at a point is as bad
            args, bound = node.args, 1e6
        else:
            continue
        for arg in args:
            if arg.is_Number:
                if abs(arg) > bound:
                    return False
                continue
            v = sp.N(arg, 15, subs=point) if point else sp.N(arg, 15)
            if not v.is_number or not v.is_finite or abs(v) > bound:
                return False
    return True


def _close(x: sp.Basic | None, y: sp.Basic | None, opt: Options | None) -> bool:
    """Within the relative bound: 1e-30, or a decimal gold's ``tolerance`` when wider (``opt`` None: 1e-30 only)."""
    if x is None or y is None:
        return False
    diff = abs(x - y)
    scale = max(abs(x), abs(y))
    if scale < sp.Float("1e-45"):
        return True
    rel = diff / scale
    bound = max(_EXACT_REL, sp.Float(opt.tolerance)) if opt is not None and opt.gold_inexact else _EXACT_REL
    return bool(rel <= bound)
