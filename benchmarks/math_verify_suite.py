"""The ``math`` reward on Math-Verify's own regression tuples: how often do we agree with its expected verdicts?

Math-Verify (HuggingFace) ships its regression tests as ``(gold, pred, expected)`` tuples in
``pytest.mark.parametrize`` lists. This script reads those tuples from the test files of a Math-Verify source
distribution (``pip download --no-deps --no-binary :all: math-verify``, then pass the ``.tar.gz`` or its unpacked
folder) with :mod:`ast`, so no file of theirs is copied here and nothing is fetched. Each tuple is scored with
``rewards.math.verify(gold, pred)`` (gold first) and compared with the expected verdict: agreement, false
positives (we credit what they expect to fail), false negatives, per test file.

Each tuple is scored under the settings its test passes, where we have the same setting. A setting is a keyword
argument of the call that takes ``gold`` and ``pred``, given as a constant in the test or as a column of its
parametrize row (``match_types``, which of their extractors run, is not one: ours reads LaTeX and plain text in
every row). Mapped:

* ``precision`` (their ``float_rounding``: floats compared after rounding to N decimal places) -> our
  ``precision=N`` (numbers, one of them a decimal, compared after rounding both to N places).

Not mapped, scored with our defaults and counted per setting at the end:

* ``strict`` (theirs: ``False`` matches variables by position, ``f(y)`` = ``f(x)``, and compares sets with
  tuples). Ours of that name is another setting (which final answers count); a renamed variable is another
  answer, so we have no equivalent.
* ``allow_set_relation_comp`` (theirs: ``False`` refuses a relation against a gold set). We always compare an
  interval with its inequality.
* A tuple whose test passes no precision is scored with no stated precision (our default), not with their
  default rounding of 6 places: rounding is credited only where someone asks for it.

``--lenient`` scores every row with our ``strict=False`` (an unanchored last value counts too), which is closer to
their extraction (the last expression of the text, anchored or not); the default is our strict mode.

    python benchmarks/math_verify_suite.py PATH [--show-errors] [--lenient]
"""

from __future__ import annotations

import argparse
import ast
import io
import tarfile
from collections import Counter
from pathlib import Path


def _test_sources(path: Path) -> dict[str, str]:
    """Test file name -> source text, from a ``.tar.gz`` sdist or an unpacked folder."""
    out: dict[str, str] = {}
    if path.is_dir():
        for f in sorted(path.rglob("tests/test_*.py")):
            out[f.name] = f.read_text(encoding="utf-8")
        return out
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) >= 2 and parts[-2] == "tests" and parts[-1].startswith("test_"):
                f = tar.extractfile(m)
                if f is not None:
                    out[parts[-1]] = io.TextIOWrapper(f, encoding="utf-8").read()
    return out


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None


#: Their settings with an equivalent of ours: their keyword -> our keyword of ``verify``.
MAPPED = {"precision": "precision"}
#: Arguments that are not comparison settings (which extractors run).
NOT_SETTINGS = {"match_types"}


def _call_settings(fn: ast.FunctionDef, keys: list[str]) -> dict[str, object]:
    """Keyword arguments of the call in ``fn`` that takes ``gold`` and ``pred``: constants as given, parametrize
    columns by name (``"@column"``, filled per row)."""
    out: dict[str, object] = {}
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call):
            continue
        names = [a.id for a in call.args if isinstance(a, ast.Name)]
        if names[:2] != ["gold", "pred"]:
            continue
        for kw in call.keywords:
            if kw.arg is None or kw.arg in NOT_SETTINGS:
                continue
            if isinstance(kw.value, ast.Name) and kw.value.id in keys:
                out[kw.arg] = "@" + kw.value.id
            else:
                out[kw.arg] = _literal(kw.value)
    return out


def tuples(path: Path) -> list[dict]:
    """Every ``(gold, pred, expected, ...)`` parametrize row of the suite, with its file and the settings its test
    passes (under ``settings``)."""
    rows: list[dict] = []
    for name, src in _test_sources(path).items():
        for fn in ast.walk(ast.parse(src)):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for dec in fn.decorator_list:
                if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"):
                    continue
                names = _literal(dec.args[0])
                if not isinstance(names, str):
                    continue
                keys = [k.strip() for k in names.split(",")]
                if keys[:2] != ["gold", "pred"] or len(dec.args) < 2 or not isinstance(dec.args[1], ast.List):
                    continue
                passed = _call_settings(fn, keys)
                for elt in dec.args[1].elts:
                    values = _literal(elt)
                    if not isinstance(values, tuple) or len(values) != len(keys):
                        continue
                    row = dict(zip(keys, values, strict=True))
                    expected = row.pop("expected", row.pop("result", None))
                    if not isinstance(expected, (bool, int)):
                        continue
                    gold, pred = row.pop("gold"), row.pop("pred")
                    settings = {
                        k: row.get(v[1:]) if isinstance(v, str) and v.startswith("@") else v for k, v in passed.items()
                    }
                    rows.append(
                        {
                            "file": name,
                            "test": fn.name,
                            "gold": gold,
                            "pred": pred,
                            "expected": bool(expected),
                            "settings": settings,
                        }
                    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="Math-Verify sdist (.tar.gz) or its unpacked folder")
    ap.add_argument("--show-errors", action="store_true", help="print every disagreement")
    ap.add_argument("--lenient", action="store_true", help="strict=False: also take an unanchored last value")
    args = ap.parse_args()
    from rewards.math import verify

    rows = tuples(args.path)
    if not rows:
        raise SystemExit(f"{args.path}: no (gold, pred, expected) tuples found in tests/test_*.py")
    per: Counter[tuple[str, str]] = Counter()
    passed: Counter[tuple[str, bool]] = Counter()
    for r in rows:
        ours = {MAPPED[k]: v for k, v in r["settings"].items() if k in MAPPED}
        for k in r["settings"]:
            passed[(k, k in MAPPED)] += 1
        s = verify(r["gold"], r["pred"], strict=not args.lenient, **ours)
        got = s.value == 1.0
        kind = "agree" if got == r["expected"] else ("FP" if got else "FN")
        per[(r["file"], kind)] += 1
        per[("all", kind)] += 1
        if kind != "agree" and args.show_errors:
            print(f"{kind} {r['test']} gold={r['gold']!r} pred={r['pred']!r} {s.status} {r['settings'] or ''}")
            print(f"    {s.info.get('extracted')!r} -> {s.info.get('reason')}")
    for f in sorted({k[0] for k in per}):
        n = sum(per[(f, k)] for k in ("agree", "FP", "FN"))
        print(f"{f:28s} n={n:4d} agree={per[(f, 'agree')] / n:.3f} FP={per[(f, 'FP')]} FN={per[(f, 'FN')]}")
    for (k, mapped), n in sorted(passed.items()):
        how = f"scored with our {MAPPED[k]}" if mapped else "no equivalent of ours: scored with our defaults"
        print(f"setting {k!r} passed by {n} rows: {how}")
    verdicts: dict[tuple[str, str], set[bool]] = {}
    for r in rows:
        verdicts.setdefault((str(r["gold"]), str(r["pred"])), set()).add(r["expected"])
    both = sum(1 for v in verdicts.values() if len(v) == 2)
    if both:
        print(f"pairs the suite lists with both verdicts (under different settings): {both}; one row of each disagrees")


if __name__ == "__main__":
    main()
