r"""When two numbers that agree to many digits are the same value: the decimal rule and the exact-zero check.

* **Decimals.** A decimal answer is the rational it writes, so ``0.33`` is not ``1/3`` and ``1.9999999`` is not 2.
  One exception, for values a program printed: a decimal with at least :data:`MIN_DECIMAL_DIGITS` significant
  digits equals an exact gold that cannot be written with that many decimals when it matches the gold to within
  one unit of its last digit (rounded or truncated), and has a fractional part: ``0.0833333333333333`` = ``1/12``,
  ``1.414213562`` = ``\sqrt2``; but ``0.3333`` is not ``1/3`` (too few digits), ``2.0000000001`` is not 2 (2 is
  written exactly with those decimals), ``0.3333333336`` is not ``1/3`` (off by more than a unit).
* **Decimal golds.** :class:`Rounding` is the window of a gold written with decimals: half a unit of its last
  place, and within a relative tolerance too unless the problem asks for an approximation.
* **Stated precision.** :func:`same_at_places` is the comparison a caller asks for with ``precision=N``: two real
  numbers, one of them a decimal (a value whose decimal expansion ends, whatever its notation: ``\frac{33}{100}``
  is 0.33), are the same when they round to the same number at ``N`` decimal places. A value exactly halfway
  (``0.125`` at two places) rounds to either neighbour, as the conventions differ (half up, half to even).
* **Exact zero.** Two closed forms whose 50-digit values agree to a relative 1e-30 are confirmed by evaluating
  their *difference* to 15 significant digits with adaptive precision (up to :data:`MAX_DIGITS` digits): a
  difference that evaluates to a nonzero number (``10^{40} + \sqrt2`` against ``10^{40}``, ``7 + 10^{-40}\pi``
  against 7) is a different value; one that stays zero to that precision is the same value, and so is one
  whose value shrinks when evaluated to 45 digits (a residue of complex cancellation, ``1e-21 i`` at 15 digits).

This module does not parse or decide which values are compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp
from sympy.core.evalf import PrecisionExhausted

__all__ = [
    "MIN_DECIMAL_DIGITS",
    "MAX_DIGITS",
    "MAX_PLACES",
    "Rounding",
    "decimal_digits",
    "decimal_matches",
    "confirmed_zero",
    "same_at_places",
]

MIN_DECIMAL_DIGITS = 10
MAX_DIGITS = 1200
#: The most decimal places a caller may state (``precision``): values are evaluated to 50 significant digits.
MAX_PLACES = 30


def decimal_digits(a: sp.Basic) -> tuple[int, int] | None:
    """(decimals, significant digits) of the shortest decimal that writes the rational ``a``, or None."""
    if not isinstance(a, sp.Rational) or a == 0:
        return None
    q = int(a.q)
    if pow(10, 400, q) != 0:
        return None  # not a decimal of at most 400 places (one modular power, even for 1/2006!)
    twos = (q & -q).bit_length() - 1
    q >>= twos
    fives = 0
    while q % 5 == 0:
        q //= 5
        fives += 1
    k = max(twos, fives)
    digits = abs(int(a.p)) * 10**k // int(a.q)
    if digits.bit_length() > 1400:
        return k, 400  # over 400 digits (str() of it would be refused): certainly "many digits"
    return k, len(str(digits))


def decimal_matches(gold: sp.Basic, value: sp.Basic | None, a: sp.Basic) -> bool:
    """The decimal rule of the module docstring: ``a`` (a rational) stands for the exact ``gold``.

    ``value`` is the gold's numeric value (a Float) when it is not rational.
    """
    dd = decimal_digits(a)
    if dd is None or dd[0] == 0 or dd[1] < MIN_DECIMAL_DIGITS:
        return False  # an integer is never a printed approximation
    k = dd[0]
    if isinstance(gold, sp.Rational):
        if (gold * 10**k).is_integer:
            return False  # the gold is written exactly with that many decimals: the answer is another number
        return bool(abs(gold - a) <= sp.Rational(1, 10**k))
    if value is None or not value.is_real:
        return False
    scaled = value * sp.Float(10, 60) ** k
    if abs(scaled - sp.Integer(round(scaled))) < sp.Float("1e-20"):
        return False  # (1 + i)^8 is 16: a value written exactly with those decimals is never their rounding
    return bool(abs(value - a) <= sp.Float(10, 60) ** (-k))


_PERTURBATION = sp.Rational(1, 10**30)


@dataclass(frozen=True)
class Rounding:
    """The window of a decimal gold (see :mod:`rewards.math.compare`): half a unit of its last place, and within the
    relative ``tolerance`` too unless the problem asks for an approximation.

    Attributes:
        inexact: the gold is written with decimals.
        approximate: the problem asks for an approximation.
        tolerance: the relative tolerance of a decimal gold when no approximation is asked for.
        places: the decimal places the problem asks for, when it says.
        gold_places: the decimal places a plain decimal gold writes (``12.50``: 2).
    """

    inexact: bool
    approximate: bool
    tolerance: float
    places: int | None = None
    gold_places: int | None = None

    def window(self, g: sp.Rational) -> sp.Rational | None:
        """Half a unit of the last decimal place of a decimal gold (``4.67``: 0.005), or None when the gold is
        exact (no decimals written, or a whole number among them)."""
        if not self.inexact:
            return None
        dd = decimal_digits(g)
        if dd is None or dd[0] == 0:
            return None
        return sp.Rational(1, 2 * 10 ** max(dd[0], self.gold_places or 0))

    def holds(self, g: sp.Rational, value: sp.Basic) -> bool:
        """``value`` is what the decimal gold ``g`` writes: within its window (never a tie), and never a
        perturbation far below any rounding (``7 + 10^{-40}`` is not ``7.0``)."""
        half = self.window(g)
        if half is None:
            return False
        diff = abs(value - g)
        if diff <= _PERTURBATION * abs(g):
            return bool(diff == 0)
        if not self.approximate and not diff <= sp.Rational(repr(self.tolerance)) * abs(g):
            return False
        return bool(diff < half)

    def rounds_exact(self, value: sp.Basic | None, a: sp.Rational) -> bool:
        """A decimal answer that is an exact gold's value rounded to the answer's last place, when the problem asks
        for an approximation (to at least the places it names): ``0.33`` for ``\\frac13`` "to two places"."""
        if not self.approximate or value is None or not value.is_real:
            return False
        dd = decimal_digits(a)
        if dd is None or dd[0] == 0 or (self.places is not None and dd[0] < self.places):
            return False
        return bool(abs(value - a) < sp.Rational(1, 2 * 10 ** dd[0]))


def same_at_places(g: sp.Basic, a: sp.Basic, places: int) -> bool:
    """Whether the numbers ``g`` and ``a`` (without variables) round alike at ``places`` decimal places, one of
    them being a decimal: see the module docstring. Values that are not real numbers are never alike here."""
    if not any(_is_decimal(x) for x in (g, a)):
        return False  # two exact values (1/3 and sqrt(11)/10): rounding is for the decimal that approximates one
    gr, ar = _roundings(g, places), _roundings(a, places)
    return bool(gr & ar)


def _is_decimal(x: sp.Basic) -> bool:
    dd = decimal_digits(x)
    return dd is not None and dd[0] > 0


def _roundings(x: sp.Basic, places: int) -> set[sp.Integer]:
    """``x`` times ``10^places`` rounded to the nearest integer; both neighbours for an exact halfway value, none
    for a value that is not a real number or cannot be told from halfway 40 digits below its last place."""
    scaled: sp.Basic
    if isinstance(x, sp.Rational):
        scaled = x * 10**places
        lo = sp.floor(scaled)
        frac = scaled - lo
        if frac == sp.Rational(1, 2):
            return {sp.Integer(lo), sp.Integer(lo + 1)}
        return {sp.Integer(lo + (1 if frac > sp.Rational(1, 2) else 0))}
    try:
        rough = sp.N(x, 15, maxn=MAX_DIGITS)
        if not (rough.is_number and rough.is_real and rough.is_finite):
            return set()
        digits = places + max(0, int(sp.floor(sp.log(abs(rough) + 1, 10)))) + 40  # 40 digits below the last place
        if digits > MAX_DIGITS:
            return set()
        scaled = sp.N(x * 10**places, digits, maxn=MAX_DIGITS)
    except (TypeError, ValueError, ArithmeticError):
        return set()
    if not (scaled.is_number and scaled.is_real):
        return set()
    lo = sp.floor(scaled)
    frac = scaled - lo
    if abs(frac - sp.Rational(1, 2)) < sp.Float("1e-20"):
        return set()  # an irrational value is never halfway; this close, the digits cannot say which side
    return {sp.Integer(lo + (1 if frac > sp.Rational(1, 2) else 0))}


def confirmed_zero(d: sp.Basic, subs: dict | None = None) -> bool:
    """Whether ``d`` (a difference of two values that agree numerically) is zero: see the module docstring.

    Exact shortcuts first: a rational function is evaluated exactly at the (rational) point ``subs``; a small
    algebraic closed form is expanded. Otherwise the difference is evaluated with adaptive precision.
    """
    if d == 0:
        return True
    if _rational_function(d) and (subs or not d.free_symbols):
        e = d.xreplace(subs) if subs else d  # exact arithmetic: x + 10^{-40} is not x
        if e == 0 or (e.is_Rational and e != 0):
            return e == 0
        d = e
    if not d.free_symbols and _expandable(d) and sp.expand(d) == 0:
        return True  # (1 + sqrt 2)^2 - (3 + 2 sqrt 2), (1 + i)^2 - 2i
    v = _evaluated(d, 15, subs)
    if v is None or v == 0:
        return True
    finer = _evaluated(d, 45, subs)  # a true difference keeps its value; a cancellation residue of complex
    return finer is None or bool(abs(finer) < abs(v) * sp.Float(1e-6))  # arithmetic (1e-21 i at 15 digits) shrinks


def _evaluated(d: sp.Basic, digits: int, subs: dict | None) -> sp.Basic | None:
    """``d`` to ``digits`` significant digits with adaptive precision; None when it is zero to :data:`MAX_DIGITS`
    digits or cannot be evaluated more precisely (then the 30-digit agreement stands)."""
    try:
        if subs:
            return d.evalf(digits, subs=subs, maxn=MAX_DIGITS, strict=True)
        return d.evalf(digits, maxn=MAX_DIGITS, strict=True)
    except PrecisionExhausted:
        return None
    except (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError):
        return None


def _rational_function(d: sp.Basic) -> bool:
    """Built from variables, rationals and ``i`` with +, *, and integer powers (exact at a rational point)."""
    if d.has(sp.Function) or d.atoms(sp.NumberSymbol) or d.atoms(sp.Float):
        return False
    return all(p.exp.is_Integer for p in d.atoms(sp.Pow))


#: Largest number of terms :func:`confirmed_zero` lets ``sp.expand`` produce (estimated before expanding).
MAX_EXPANDED_TERMS = 512


def _expandable(d: sp.Basic) -> bool:
    """No functions, no power of a sum above 6, and an expansion estimated at most :data:`MAX_EXPANDED_TERMS`
    terms (a product of radical sums multiplies their term counts)."""
    if d.has(sp.Function):
        return False
    if any(isinstance(p.base, sp.Add) and p.exp.is_Integer and abs(p.exp) > 6 for p in d.atoms(sp.Pow)):
        return False
    return _terms(d) <= MAX_EXPANDED_TERMS


def _terms(e: sp.Basic) -> int:
    """An upper bound on the terms of ``sp.expand(e)``, capped just above :data:`MAX_EXPANDED_TERMS`."""
    cap = MAX_EXPANDED_TERMS + 1
    if isinstance(e, sp.Add):
        return min(cap, sum(_terms(a) for a in e.args))
    if isinstance(e, sp.Mul):
        n = 1
        for a in e.args:
            n = min(cap, n * _terms(a))
        return n
    if isinstance(e, sp.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        base = _terms(e.base)
        return cap if base > 1 and int(e.exp) > 64 else min(cap, base ** int(e.exp))
    return 1
