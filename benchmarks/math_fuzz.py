"""Differential fuzz of the ``math`` reward: sympy-rendered pairs, equal in value or near misses, with known labels.

Each pair is a random sympy value of one kind (integers, fractions, radicals, multiples of pi, logarithms, complex
numbers, polynomials, rational functions, trigonometric identities, absolute values, intervals and unions,
finite sets, tuples, matrices, equations of lines, decimals) rendered with ``sympy.latex`` as the gold, and either
another form of the same value (expanded, factored, together, apart, rewritten, sets reordered, ``\\lbrace``
and French-interval renderings, an interval as an inequality) labeled 1, or a near miss (a coefficient or an
endpoint moved by one, a sign flipped, an element dropped or swapped, an interval end opened, a wrong exact
value that rounds to a decimal gold) labeled 0 and checked numerically to differ. The completion is the
answer boxed. Prints accuracy, false positives and false negatives per kind, and (``--show``) every miss.

    python benchmarks/math_fuzz.py [--n 4400] [--seed 0] [--show] [--mathverify]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable

import sympy as sp

x, y = sp.symbols("x y", real=True)
Pair = tuple[str, str, int]  # gold latex, answer latex, label


def _r(rng: random.Random, lo: int = -20, hi: int = 20, zero: bool = False) -> int:
    while True:
        v = rng.randint(lo, hi)
        if zero or v != 0:
            return v


_STYLE_RNG = random.Random(12345)
_STYLES: list[dict[str, object]] = [
    {},
    {"mul_symbol": "dot"},
    {"mul_symbol": "times"},
    {"fold_short_frac": True},
    {"ln_notation": True},
    {"inv_trig_style": "full"},
    {"inv_trig_style": "power"},
    {"root_notation": False},
    {"fold_frac_powers": True},
    {"mat_delim": "("},
    {"decimal_separator": "comma"},
    {"imaginary_unit": "j"},
    {"mat_str": "pmatrix", "mat_delim": ""},
    {"order": "old"},
]


def _latex(e: object) -> str:
    """``sympy.latex`` in one of its printing styles, chosen at random (products with dots or crosses, folded
    fractions, ln, arcsin, powers for roots, commas as decimal separators, j for i, pmatrix)."""
    style = _STYLE_RNG.choice(_STYLES)
    if style.get("decimal_separator") == "comma" and isinstance(e, (sp.Tuple, sp.Set, sp.MatrixBase)):
        style = {}  # sympy then separates items with semicolons, a notation of its own
    return sp.latex(e, **style)  # type: ignore[arg-type]


_LEAVES = [sp.Integer(2), sp.Integer(3), sp.Integer(5), sp.Rational(1, 2), sp.Rational(3, 4), x, x, x]


def _tree(rng: random.Random, depth: int) -> sp.Basic:
    if depth == 0 or rng.random() < 0.25:
        leaf = rng.choice(_LEAVES)
        return leaf if leaf.free_symbols or rng.random() < 0.7 else leaf * _r(rng, 1, 5)
    op = rng.choice(["+", "-", "*", "/", "pow", "sqrt", "sin", "cos", "exp", "log", "abs", "atan"])
    a = _tree(rng, depth - 1)
    if op in ("+", "-", "*", "/"):
        b = _tree(rng, depth - 1)
        if op == "/" and b == 0:
            b = sp.Integer(7)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]
    if op == "pow":
        return a ** rng.choice([2, 3, -1])
    fn = {"sqrt": sp.sqrt, "sin": sp.sin, "cos": sp.cos, "exp": sp.exp, "abs": sp.Abs, "atan": sp.atan}
    if op == "log":
        return sp.log(sp.Abs(a) + 1) if a.free_symbols else sp.log(abs(a) + 2)
    return fn[op](a)


_REWRITES: list[Callable[[sp.Basic], sp.Basic]] = [
    sp.expand,
    sp.factor,
    sp.together,
    sp.cancel,
    sp.powsimp,
    sp.expand_trig,
    sp.radsimp,
    lambda e: e,
    lambda e: sp.expand_log(e, force=True),
    lambda e: e.rewrite(sp.exp) if e.has(sp.sin, sp.cos) else sp.expand(e),
]


def _bump(rng: random.Random, e: sp.Basic) -> sp.Basic:
    """One constant of ``e`` moved by one, or a sign flipped: a near miss."""
    numbers = [n for n in sp.preorder_traversal(e) if isinstance(n, sp.Rational) and n not in (-1,)]
    if numbers and rng.random() < 0.7:
        n = rng.choice(numbers)
        return e.xreplace({n: n + 1})
    return -e if rng.random() < 0.5 else e + x


def _differs(g: sp.Basic, a: sp.Basic) -> bool:
    d = sp.simplify(g - a)
    if d == 0:
        return False
    for pt in (sp.Rational(7, 3), sp.Rational(-5, 2), sp.Rational(11, 7)):
        v = d.subs({x: pt, y: pt + 1}).evalf(30)
        if v.is_number and abs(v) > 1e-20:
            return True
    return False


def _scalar(rng: random.Random, g: sp.Basic, forms: list[sp.Basic], nears: list[sp.Basic]) -> Pair:
    if rng.random() < 0.5:
        return _latex(g), _latex(rng.choice(forms)), 1
    rng.shuffle(nears)
    for a in nears:
        if _differs(g, a):
            return _latex(g), _latex(a), 0
    return _latex(g), _latex(forms[0]), 1


def k_integer(rng: random.Random) -> Pair:
    n = _r(rng, -500, 500)
    a = _r(rng, 2, 30)
    return _scalar(rng, sp.Integer(n), [sp.Integer(n), sp.Mul(n * a, sp.Rational(1, a))], [n + 1, n - 1, -n, 10 * n])


def k_fraction(rng: random.Random) -> Pair:
    p, q = _r(rng, -60, 60), _r(rng, 2, 40)
    g = sp.Rational(p, q)
    forms = [g, sp.Rational(p * 3, q * 3)]
    if g.q in (2, 4, 5, 8, 10, 16, 20, 25):
        forms.append(sp.Float(g, 10).round(8))
    return _scalar(rng, g, forms, [g + 1, sp.Rational(p + 1, q), sp.Rational(p, q + 1), -g, 1 / g if p else g + 2])


def k_radical(rng: random.Random) -> Pair:
    a, b, c = _r(rng, 1, 9), rng.choice([2, 3, 5, 6, 7, 10, 11, 13]), _r(rng, -9, 9, zero=True)
    g = a * sp.sqrt(b) + c
    forms = [g, sp.sqrt(a * a * b) + c, sp.radsimp((a * b + c * sp.sqrt(b)) / sp.sqrt(b)), (g**2) ** sp.Rational(1, 2)]
    if g.is_negative:
        forms.pop()
    nears = [a * sp.sqrt(b + 1) + c, (a + 1) * sp.sqrt(b) + c, a * sp.sqrt(b) - c + (1 if c == 0 else 0), -g]
    return _scalar(rng, g, forms, nears)


def k_pi(rng: random.Random) -> Pair:
    p, q = _r(rng, -12, 12), rng.choice([1, 2, 3, 4, 6, 12])
    g = sp.Rational(p, q) * sp.pi
    return _scalar(rng, g, [g, sp.pi * p / q, sp.Mul(sp.Rational(2 * p, 2 * q), sp.pi)], [g + sp.pi, -g, g / 2, g + 1])


def k_log(rng: random.Random) -> Pair:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    g = sp.log(a * b)
    forms = [g, sp.expand_log(sp.log(a) + sp.log(b), force=True), sp.log(a) + sp.log(b)]
    return _scalar(rng, g, forms, [sp.log(a + b), sp.log(a * b + 1), sp.log(a) * sp.log(b), 2 * g])


def k_complex(rng: random.Random) -> Pair:
    a, b, c, d = (_r(rng, -6, 6) for _ in range(4))
    g = sp.expand((a + b * sp.I) * (c + d * sp.I))
    forms = [g, sp.Add(sp.re(g), sp.im(g) * sp.I, evaluate=False)]
    return _scalar(rng, g, forms, [sp.conjugate(g), g + sp.I, g + 1, -g])


def k_poly(rng: random.Random) -> Pair:
    r1, r2, k = _r(rng, -6, 6), _r(rng, -6, 6), _r(rng, 1, 3)
    g = sp.expand(k * (x - r1) * (x - r2))
    forms = [g, sp.factor(g), k * (x - r1) * (x - r2)]
    return _scalar(rng, g, forms, [g + 1, g + x, sp.expand(k * (x - r1) * (x + r2)) if r2 else g - 1, g.subs(x, -x)])


def k_rational_fn(rng: random.Random) -> Pair:
    a, b = _r(rng, -5, 5), _r(rng, -5, 5)
    if a == b:
        b = a + 1
    g = 1 / (x - a) - 1 / (x - b)
    forms = [sp.together(g), sp.apart(sp.together(g), x), sp.factor(sp.together(g))]
    return _scalar(
        rng, sp.together(g), forms, [1 / (x - a) + 1 / (x - b), sp.together(g) + 1, 1 / (x - a - 1) - 1 / (x - b)]
    )


def k_trig(rng: random.Random) -> Pair:
    k = _r(rng, 1, 4)
    g = sp.sin(k * x) ** 2
    forms = [g, (1 - sp.cos(2 * k * x)) / 2, 1 - sp.cos(k * x) ** 2]
    return _scalar(
        rng, g, forms, [sp.cos(k * x) ** 2, (1 + sp.cos(2 * k * x)) / 2, sp.sin((k + 1) * x) ** 2, sp.sin(k * x)]
    )


def k_abs(rng: random.Random) -> Pair:
    c = _r(rng, 1, 9)
    g = sp.Abs(x) * c
    forms = [g, c * sp.sqrt(x**2)]
    return _scalar(rng, g, forms, [c * x, -c * x, c * sp.Abs(x + 1)])


def k_interval(rng: random.Random) -> Pair:
    a = _r(rng, -9, 9, zero=True)
    b = a + rng.randint(1, 9)
    lo, ro = rng.random() < 0.5, rng.random() < 0.5
    g = sp.Interval(a, b, lo, ro)
    if rng.random() < 0.5:
        form = rng.choice(["latex", "ineq", "french"])
        if form == "latex":
            return _latex(g), _latex(sp.Interval(a, b, lo, ro)), 1
        if form == "ineq":
            left, right = ("<" if lo else "\\le"), ("<" if ro else "\\le")
            return _latex(g), f"{a} {left} x {right} {b}", 1
        return _latex(g), f"{']' if lo else '['}{a}, {b}{'[' if ro else ']'}", 1
    near = rng.choice([sp.Interval(a, b, not lo, ro), sp.Interval(a, b + 1, lo, ro), sp.Interval(a - 1, b, lo, ro)])
    return _latex(g), _latex(near), 0


def k_union(rng: random.Random) -> Pair:
    a = _r(rng, -9, 5, zero=True)
    b = a + rng.randint(1, 5)
    g = sp.Union(sp.Interval.open(-sp.oo, a), sp.Interval(b, sp.oo))
    if rng.random() < 0.5:
        return (
            _latex(g),
            rng.choice([_latex(g), f"x < {a} \\text{{ or }} x \\ge {b}", f"]-\\infty, {a}[ \\cup [{b}, +\\infty["]),
            1,
        )
    near = (
        sp.Union(sp.Interval(-sp.oo, a), sp.Interval(b, sp.oo))
        if rng.random() < 0.5
        else sp.Union(sp.Interval.open(-sp.oo, a), sp.Interval(b + 1, sp.oo))
    )
    return _latex(g), _latex(near), 0


def k_set(rng: random.Random) -> Pair:
    items = rng.sample(range(-20, 20), rng.randint(2, 5))
    g = sp.FiniteSet(*items)
    if rng.random() < 0.5:
        perm = items[:]
        rng.shuffle(perm)
        inner = ", ".join(map(str, perm))
        return (
            _latex(g),
            rng.choice([f"\\{{{inner}\\}}", f"\\lbrace {inner} \\rbrace", f"\\left\\lbrace {inner}\\right\\rbrace"]),
            1,
        )
    near = items[:-1] if rng.random() < 0.5 else items[:-1] + [items[-1] + 100]
    return _latex(g), _latex(sp.FiniteSet(*near)), 0


def k_tuple(rng: random.Random) -> Pair:
    a, b = sp.Rational(_r(rng), _r(rng, 1, 5)), sp.sqrt(rng.choice([2, 3, 5])) * _r(rng, 1, 4)
    g = sp.Tuple(a, b)
    if rng.random() < 0.5:
        return _latex(g), _latex(sp.Tuple(sp.Rational(a.p * 2, a.q * 2), sp.sqrt(b**2))), 1
    return _latex(g), _latex(rng.choice([sp.Tuple(b, a), sp.Tuple(a, -b), sp.Tuple(a + 1, b)])), 0


def k_matrix(rng: random.Random) -> Pair:
    n = rng.choice([2, 3])
    m = sp.Matrix(n, n, lambda i, j: _r(rng, -9, 9, zero=True))
    if rng.random() < 0.5:
        alt = m.applyfunc(lambda v: sp.Rational(2 * v, 2))
        return _latex(m), rng.choice([_latex(alt), _latex(alt).replace("\\\\", "\\\\[2pt]")]), 1
    near = m.copy()
    i, j = rng.randrange(n), rng.randrange(n)
    near[i, j] += 1
    return _latex(m), _latex(near), 0


def k_line(rng: random.Random) -> Pair:
    m, c = _r(rng, -5, 5), _r(rng, -9, 9, zero=True)
    g = sp.Eq(y, m * x + c)
    if rng.random() < 0.5:
        k = _r(rng, 1, 3)
        return _latex(g), rng.choice([_latex(g), f"{_latex(sp.expand(k * (m * x - y + c)))} = 0"]), 1
    near = rng.choice([sp.Eq(y, m * x + c + 1), sp.Eq(y, -m * x + c if m else x + c)])
    return _latex(g), _latex(near), 0


def k_decimal(rng: random.Random) -> Pair:
    """A decimal gold rounded from an exact value: its own value in other notations is right; the exact value it
    was rounded from (no approximation asked) and one unit off are wrong."""
    p, q = _r(rng, 1, 900), rng.choice([3, 6, 7, 9, 11, 12, 13])
    places = rng.randint(1, 4)
    d = sp.Rational(round(sp.Rational(p, q) * 10**places), 10**places)
    gold = f"{float(d):.{places}f}"
    if rng.random() < 0.5:
        num = int(d * 10**places)
        return gold, rng.choice([gold + "0", f"\\frac{{{num}}}{{{10**places}}}", f"{num}e-{places}", gold]), 1
    if sp.Rational(p, q) == d:
        return gold, f"{float(d + sp.Rational(1, 10**places)):.{places}f}", 0
    near = rng.choice([f"\\frac{{{p}}}{{{q}}}", f"{float(d + sp.Rational(1, 10**places)):.{places}f}"])
    return gold, near, 0


def k_rounding(rng: random.Random) -> Pair:
    """A short decimal gold against an exact value that merely rounds to it (no approximation asked): wrong; and
    a 13-digit decimal gold against a value off by hundreds: wrong."""
    if rng.random() < 0.5:
        n = rng.randint(20, 400)
        d = sp.Rational(round(sp.sqrt(n) * 10), 10)
        if sp.sqrt(n) == d:
            return f"{float(d):.1f}", f"\\sqrt{{{n}}}", 1
        return f"{float(d):.1f}", f"\\sqrt{{{n}}}", 0
    whole = rng.randint(10**12, 10**13 - 1)
    gold = f"{whole}.{rng.randint(1, 9)}"
    if rng.random() < 0.5:
        return gold, gold + "0", 1
    return gold, f"{whole + rng.randint(1, 999)}{gold[-2:]}", 0


def k_solve(rng: random.Random) -> Pair:
    """The answer states the solution; an unsolved equation or inequality copied from the problem states none."""
    r1, r2, a, b = _r(rng, -9, 9), _r(rng, -9, 9), _r(rng, 2, 5), _r(rng, -9, 9)
    c = a * r1 + b
    form = rng.randrange(6)
    if form == 0:
        return f"x = {r1}", rng.choice([f"x = {r1}", f"{r1}", f"{r1} = x"]), 1
    if form == 1:
        return rng.choice([f"{r1}", f"x = {r1}"]), f"{a}x + {b} = {c}".replace("+ -", "- "), 0
    if form == 2:
        if r1 == r2:
            r2 = r1 + 1
        roots = f"{r1}, {r2}"
        quad = _latex(sp.expand((x - r1) * (x - r2)))
        return roots, rng.choice([f"{quad} = 0", f"{r2}, {r1}", f"x = {r2} \\text{{ or }} x = {r1}"]), None  # type: ignore[return-value]
    if form == 3:
        lo = sp.Rational(c - b, a)
        return f"({_latex(lo)}, \\infty)", f"{a}x + {b} > {c}".replace("+ -", "- "), 0
    if form == 4:
        return f"x = {r1}", f"x = {r1 + 1}", 0
    return (
        f"({r1}, \\infty)",
        rng.choice([f"x > {r1}", f"]{r1}, +\\infty[", f"\\{{x \\in \\mathbb{{R}} \\mid x > {r1}\\}}"]),
        1,
    )


def k_clock(rng: random.Random) -> Pair:
    """Times with a zero part are no quotients; ratios are."""
    h1, h2 = rng.sample(range(1, 13), 2)
    if rng.random() < 0.5:
        return f"{h1}:00", rng.choice([f"{h1}:00", f"{h2}:00"]), None  # type: ignore[return-value]
    p, q, k = _r(rng, 1, 9), _r(rng, 1, 9), _r(rng, 2, 5)
    return f"{p}:{q}", rng.choice([f"{k * p}:{k * q}", f"{k * p}:{k * q + 1}"]), None  # type: ignore[return-value]


def k_root_of_square(rng: random.Random) -> Pair:
    c = _r(rng, 1, 9)
    return f"{c}x", rng.choice([f"\\sqrt{{{c * c}x^2}}", f"{c}\\sqrt{{x^2}}"]), 0


def _same_by_rule(g: str, a: str) -> bool:
    """Labels of the generators that mix forms: roots listed in any order or as solved equations, the same time,
    an equal ratio (a copied quadratic is never right)."""
    if "=" in a and "^" in a:
        return False
    if ":" in g:
        gp, ap = [tuple(int(v) for v in t.split(":")) for t in (g, a)]
        if gp[1] == 0 or ap[1] == 0:
            return gp == ap
        return sp.Rational(*gp) == sp.Rational(*ap)
    import re

    return sorted(re.findall(r"-?\d+", g)) == sorted(re.findall(r"-?\d+", a))


def k_tree(rng: random.Random) -> Pair:
    """A random expression (sums, products, powers, roots, trig, exp, log, abs, atan of small constants and x)
    against a rewriting of it by sympy, or against a near miss."""
    for _ in range(20):
        g = _tree(rng, rng.randint(2, 4))
        if g.is_number and not g.is_finite:
            continue
        if rng.random() < 0.5:
            a = rng.choice(_REWRITES)(g)
            return _latex(g), _latex(a), 1
        a = _bump(rng, g)
        if _differs(g, a):
            return _latex(g), _latex(a), 0
    return "1", "1", 1


def k_constant_tree(rng: random.Random) -> Pair:
    """A random closed form without variables, against a rewriting or a near miss."""
    for _ in range(20):
        g = _tree(rng, rng.randint(2, 4)).subs(x, rng.choice([sp.Integer(2), sp.Rational(1, 3), sp.sqrt(2)]))
        if not g.is_finite or g.is_zero:
            continue
        if rng.random() < 0.5:
            return _latex(g), _latex(rng.choice(_REWRITES)(g)), 1
        a = _bump(rng, g)
        if _differs(g, a):
            return _latex(g), _latex(a), 0
    return "1", "1", 1


_IDENTITIES: list[tuple[sp.Basic, sp.Basic]] = [
    (sp.sqrt(3 + 2 * sp.sqrt(2)), 1 + sp.sqrt(2)),
    (sp.cos(sp.pi / 5), (1 + sp.sqrt(5)) / 4),
    (sp.sin(sp.pi / 12), (sp.sqrt(6) - sp.sqrt(2)) / 4),
    (sp.tan(sp.pi / 8), sp.sqrt(2) - 1),
    (sp.exp(sp.I * sp.pi / 3), sp.Rational(1, 2) + sp.sqrt(3) * sp.I / 2),
    (sp.log(8, 2), sp.Integer(3)),
    (sp.log(sp.Integer(10)) / sp.log(sp.Integer(100)), sp.Rational(1, 2)),
    (sp.binomial(10, 3), sp.Integer(120)),
    (sp.factorial(6) / sp.factorial(4), sp.Integer(30)),
    (sp.Integer(2) ** 64, sp.Integer(18446744073709551616)),
    (sp.Rational(3, 2) * 10**-7, sp.Float("1.5e-7")),
    (sp.atan(1) + sp.atan(sp.Rational(1, 2)) + sp.atan(sp.Rational(1, 3)), sp.pi / 2),
    (sp.sqrt(2) * sp.sqrt(8), sp.Integer(4)),
    (sp.root(54, 3), 3 * sp.root(2, 3)),
    (sp.cos(sp.pi / 7) * sp.cos(2 * sp.pi / 7) * sp.cos(4 * sp.pi / 7), -sp.Rational(1, 8)),
    ((1 + sp.I) ** 8, sp.Integer(16)),
    (sp.asin(sp.Rational(1, 2)), sp.pi / 6),
    (sp.sqrt(5 + 2 * sp.sqrt(6)), sp.sqrt(2) + sp.sqrt(3)),
]


def k_identity(rng: random.Random) -> Pair:
    """Classic closed-form identities (denesting, exact trig values, logs, complex powers, big integers), against
    the other side or the other side moved a little (1e-12 included: no rounding window for exact golds)."""
    g, a = rng.choice(_IDENTITIES)
    if rng.random() < 0.5:
        g, a = a, g
    if rng.random() < 0.5:
        return _latex(g), _latex(a), 1
    near = rng.choice([a + 1, 2 * a, a + sp.Rational(1, 10**12), -a, a + sp.sqrt(2) / 10**9])
    return _latex(g), _latex(near), 0


KINDS: dict[str, Callable[[random.Random], Pair]] = {
    name[2:]: fn for name, fn in globals().items() if name.startswith("k_") and callable(fn)
}


def pairs(n: int, seed: int) -> list[tuple[str, str, str, int]]:
    rng = random.Random(seed)
    out = []
    kinds = sorted(KINDS)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        g, a, label = KINDS[kind](rng)
        if label is None:  # a generator that picked among right and wrong forms: decide by its rule
            label = int(_same_by_rule(g, a))
        out.append((kind, g, a, label))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", action="store_true", help="print every miss")
    ap.add_argument("--mathverify", action="store_true", help="also score the pairs with Math-Verify")
    args = ap.parse_args()
    from rewards.math import verify

    data = pairs(args.n, args.seed)
    scorers: dict[str, Callable[[str, str], bool]] = {"ours": lambda g, a: verify(g, f"\\boxed{{{a}}}").value == 1.0}
    if args.mathverify:
        from math_verify import parse
        from math_verify import verify as mv

        scorers["math-verify"] = lambda g, a: bool(mv(parse(f"${g}$"), parse(f"\\boxed{{{a}}}")))
    for name, fn in scorers.items():
        per: Counter[tuple[str, str]] = Counter()
        t0 = time.perf_counter()
        for kind, g, a, label in data:
            got = fn(g, a)
            verdict = "ok" if got == bool(label) else ("FP" if got else "FN")
            per[(kind, verdict)] += 1
            per[("all", verdict)] += 1
            if verdict != "ok" and args.show and name == "ours":
                print(f"{verdict} {kind:10s} gold={g!r} answer={a!r}")
        dt = time.perf_counter() - t0
        print(f"== {name}: {len(data)} pairs in {dt:.1f} s")
        for kind in ["all", *sorted(KINDS)]:
            n = sum(per[(kind, v)] for v in ("ok", "FP", "FN"))
            print(f"{kind:12s} n={n:5d} acc={per[(kind, 'ok')] / n:.4f} FP={per[(kind, 'FP')]} FN={per[(kind, 'FN')]}")


if __name__ == "__main__":
    main()
