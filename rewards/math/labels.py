r"""Labelled answers and chains: when ``lhs = value`` states ``value``, and when it states nothing.

* A **label** is a name for the quantity asked for: a variable (``x = 5``), a tuple of variables
  (``(a, b) = (3, -2)``; its values are read in the variables' alphabetical order, as ``b = -2, a = 3`` is), or a
  named quantity built from letters alone: a product of points (``AB = 4``), its
  absolute value (``|PQ| = 2``), a ratio (``\frac{XY}{YZ} = \frac13``, ``V_1 : V_2 = 7 : 32``). ``label = value``
  states ``value``. A single variable may label an expression in other variables (``y = 2x + 1``); a composite
  label must label a number (``xy = 6`` states 6, ``x + y = 5`` is an equation and stays one).
* ``e = value`` names an eccentricity (or any quantity called e) when the value is a number without e in it.
  ``x = y = z = 1`` (distinct variables, then a number) states 1.
* A **chain** ``a = b = c`` states its last term only when it is true as a whole (every side equal):
  ``1 + 1 = 2`` states 2, ``3 = 9`` and ``1 + 1 = 3 = 2`` state nothing (they stay false equations, which equal no
  number). A label may start a chain: ``x = 3 + 4 = 7``.

Equality of the sides is the caller's (passed in). This module does not parse or compare.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from rewards.math.values import MARKERS, Expr, Rel, Seq, Value

__all__ = ["unassign", "is_label"]


def is_label(e: object) -> bool:
    """A variable, or a product, quotient or absolute value of variables (no numbers): see the module doc."""
    if isinstance(e, Seq):
        return e.kind == "tuple" and all(isinstance(i, Expr) and isinstance(i.e, sp.Symbol) for i in e.items)
    if not isinstance(e, sp.Basic) or e.free_symbols & MARKERS:
        return False
    if isinstance(e, sp.Symbol):
        return True
    if isinstance(e, sp.Abs):
        return is_label(e.args[0])
    if isinstance(e, sp.Pow):
        return isinstance(e.base, sp.Symbol) and e.exp in (1, -1)
    if isinstance(e, sp.Mul):
        return all(is_label(f) for f in e.args)
    return False


def _numeric(t: object) -> bool:
    """No variables (percent and degree markers are units, not variables)."""
    if isinstance(t, Seq):
        return all(isinstance(i, Expr) and not i.e.free_symbols - MARKERS for i in t.items)
    return isinstance(t, sp.Basic) and not t.free_symbols - MARKERS


def _value(t: object) -> Value:
    return t if isinstance(t, Seq) else Expr(t)


def _by_name(label: object, value: object) -> object:
    """``(y, x) = (2, 1)`` -> the values in the variables' alphabetical order, ``(1, 2)``, as ``x = 1, y = 2``."""
    if not (isinstance(label, Seq) and isinstance(value, Seq) and len(label.items) == len(value.items)):
        return value
    names = [str(i.e) for i in label.items if isinstance(i, Expr)]
    order = sorted(range(len(names)), key=lambda k: names[k])
    return Seq(value.kind, tuple(value.items[k] for k in order))


def unassign(v: Value, same: Callable[[object, object], bool]) -> Value:
    """``label = value`` -> value; a true chain -> its last term; anything else unchanged (see the module doc)."""
    if not (isinstance(v, Rel) and v.ops and set(v.ops) == {"="}):
        return v
    first, rest = v.terms[0], v.terms[1:]
    second = rest[0] if len(rest) == 1 else None
    if first == sp.E and isinstance(second, sp.Basic) and _numeric(second) and not second.has(sp.E):
        return Expr(second)  # e = \frac{\sqrt5}{5}: an eccentricity named e, not Euler's number
    if len(v.terms) > 2 and _numeric(v.terms[-1]) and all(isinstance(t, sp.Symbol) for t in v.terms[:-1]):
        if len(set(v.terms[:-1])) == len(v.terms) - 1:
            return _value(v.terms[-1])  # x = y = z = 1: every variable has the value
    if len(v.terms) == 2 and isinstance(first, sp.Symbol) and isinstance(rest[0], sp.Basic):
        if first not in rest[0].free_symbols:
            return Expr(rest[0])  # x = 3, y = 2x + 1
    if len(v.terms) == 2 and isinstance(rest[0], sp.Symbol) and isinstance(first, sp.Basic):
        if rest[0] not in first.free_symbols:
            return Expr(first)  # 3 = x
    if not all(_numeric(t) for t in rest):
        return v
    if is_label(first):
        chain = [_by_name(first, t) for t in rest]
    elif _numeric(first):
        chain = list(v.terms)
    else:
        return v
    if all(same(chain[0], t) for t in chain[1:]):
        return _value(chain[-1])
    return v  # a false chain states nothing
