"""Name tables of the answer grammar: functions, constants, Greek letters, relation and product commands.

Data only; :mod:`rewards.math.parse` reads it.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

__all__ = ["FUNCS", "TRIG", "CONSTS", "GREEK", "RELOPS", "MUL_CMDS", "FRACS", "ATOM_CMDS"]

FUNCS: dict[str, Callable[..., sp.Basic]] = {
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
    "sec": sp.sec,
    "csc": sp.csc,
    "cot": sp.cot,
    "arcsin": sp.asin,
    "arccos": sp.acos,
    "arctan": sp.atan,
    "asin": sp.asin,
    "acos": sp.acos,
    "atan": sp.atan,
    "acot": sp.acot,
    "asec": sp.asec,
    "acsc": sp.acsc,
    "arccot": sp.acot,
    "arcsec": sp.asec,
    "arccsc": sp.acsc,
    "asinh": sp.asinh,
    "acosh": sp.acosh,
    "atanh": sp.atanh,
    "arsinh": sp.asinh,
    "arcosh": sp.acosh,
    "artanh": sp.atanh,
    "coth": sp.coth,
    "sech": sp.sech,
    "csch": sp.csch,
    "sinh": sp.sinh,
    "cosh": sp.cosh,
    "tanh": sp.tanh,
    "exp": sp.exp,
    "ln": sp.log,
    "log": sp.log,
    "lg": lambda x: sp.log(x, 10),
    "sgn": sp.sign,
    "sqrt": sp.sqrt,
    "abs": lambda x: sp.Abs(x, evaluate=not x.free_symbols),  # the parser routes abs() through its _abs
    "cbrt": lambda x: sp.real_root(x, 3),
    "arg": sp.arg,
}
TRIG = {"sin", "cos", "tan", "sec", "csc", "cot"}
CONSTS = {
    "pi": sp.pi,
    "oo": sp.oo,
    "inf": sp.oo,
    "infinity": sp.oo,
    "infty": sp.oo,
    "e": sp.E,
    "i": sp.I,
    "E": sp.E,
    "I": sp.I,
}  # sympy's printed names
GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
RELOPS = {
    "=": "=",
    "<": "<",
    ">": ">",
    "lt": "<",
    "gt": ">",
    "leqq": "<=",
    "geqq": ">=",
    "le": "<=",
    "leq": "<=",
    "leqslant": "<=",
    "ge": ">=",
    "geq": ">=",
    "geqslant": ">=",
    "ne": "!=",
    "neq": "!=",
    "in": "in",
    "approx": "=",
    "equiv": "=",
}
MUL_CMDS = {"cdot", "times", "ast"}
FRACS = {"frac", "dfrac", "tfrac", "cfrac"}
ATOM_CMDS = (
    FRACS
    | {
        "sqrt",
        "pi",
        "infty",
        "infinity",
        "binom",
        "dbinom",
        "tbinom",
        "lfloor",
        "lceil",
        "begin",
        "mathrm",
        "operatorname",
        "mathbf",
        "based",
        "sum",
        "prod",
    }
    | GREEK
    | set(FUNCS)
)
