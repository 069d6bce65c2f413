"""Side-by-side benchmark of the ``math`` reward against HuggingFace Math-Verify on a labeled set.

Runs every (gold, completion, label) row of a labeled JSONL file (default: ``tests/data/math_labeled.jsonl``)
through both verifiers in one process, one pair at a time, and prints for each: accuracy, false positives, false
negatives, pairs/s, p50/p99/max latency, and the ratios (ours / Math-Verify). Rows whose label is null (a broken
gold) are reported apart: the right verdict there is *unscored*, which Math-Verify cannot express.

Math-Verify is the bench extra (``pip install math-verify``); its own ``signal.alarm`` timeout works here because
this script calls it from the main thread. Our result cache is cleared before the timed run so every parse is paid.

    python benchmarks/math_vs_mathverify.py [--data FILE] [--show-errors]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

DEFAULT_DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "math_labeled.jsonl"


def load(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if "completion" not in row or "answer" not in row:
                raise SystemExit(f"{path}:{n}: expected fields 'completion' and 'answer'")
            rows.append(row)
    return rows


def ours() -> Callable[[object, str], float | None]:
    from rewards.math import verify
    from rewards.math.reward import parse_answer

    parse_answer.cache_clear()
    return lambda gold, completion: verify(gold, completion).value


def math_verify() -> Callable[[object, str], float | None]:
    from math_verify import parse, verify

    def run(gold: object, completion: str) -> float | None:
        g = str(gold)
        gp = parse(f"${g}$") or parse(g)  # the README form: gold wrapped in math delimiters
        if not gp:
            return None
        return 1.0 if verify(gp, parse(completion)) else 0.0

    return run


def measure(fn: Callable[[object, str], float | None], rows: list[dict]) -> dict:
    preds, lat = [], []
    for r in rows:
        t0 = time.perf_counter()
        try:
            v = fn(r["answer"], r["completion"])
        except Exception:  # noqa: BLE001 - a crash counts as a wrong verdict for either verifier
            v = 0.0
        lat.append(time.perf_counter() - t0)
        preds.append(v)
    labeled = [(r["label"], p) for r, p in zip(rows, preds) if r.get("label") is not None]
    fp = sum(1 for lab, p in labeled if lab == 0 and p == 1.0)
    fn_ = sum(1 for lab, p in labeled if lab == 1 and p != 1.0)
    unscored_rows = [p for r, p in zip(rows, preds) if r.get("label") is None]
    lat_sorted = sorted(lat)
    return {
        "preds": preds,
        "accuracy": (len(labeled) - fp - fn_) / max(1, len(labeled)),
        "fp": fp,
        "fn": fn_,
        "unscored_right": sum(1 for p in unscored_rows if p is None),
        "unscored_rows": len(unscored_rows),
        "pairs_s": len(rows) / sum(lat),
        "p50": statistics.median(lat),
        "p99": lat_sorted[min(len(lat) - 1, int(0.99 * len(lat)))],
        "max": lat_sorted[-1],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--show-errors", action="store_true", help="list the rows each verifier gets wrong")
    args = ap.parse_args(argv)
    rows = load(args.data)
    a = measure(ours(), rows)
    b = measure(math_verify(), rows)
    n_lab = sum(1 for r in rows if r.get("label") is not None)
    print(f"labeled pairs: {n_lab} (+{len(rows) - n_lab} with a broken gold), all non-adversarial, one process")
    print(f"{'metric':<22}{'ours':>12}{'Math-Verify':>14}{'ratio':>10}")
    for key, label, fmt in (
        ("accuracy", "accuracy", "{:.3f}"), ("fp", "false positives", "{}"), ("fn", "false negatives", "{}"),
        ("pairs_s", "pairs/s", "{:.1f}"), ("p50", "p50 latency ms", "{:.2f}"), ("p99", "p99 latency ms", "{:.2f}"),
        ("max", "max latency ms", "{:.2f}"),
    ):
        x, y = a[key], b[key]
        if key in ("p50", "p99", "max"):
            x, y = x * 1000, y * 1000
        ratio = f"{x / y:.2f}x" if y else "-"
        print(f"{label:<22}{fmt.format(x):>12}{fmt.format(y):>14}{ratio:>10}")
    ours_u, mv_u = f"{a['unscored_right']}/{a['unscored_rows']}", f"{b['unscored_right']}/{b['unscored_rows']}"
    print(f"{'broken gold unscored':<22}{ours_u:>12}{mv_u:>14}")
    if args.show_errors:
        for name, res in (("ours", a), ("Math-Verify", b)):
            for r, p in zip(rows, res["preds"]):
                if r.get("label") is not None and (p == 1.0) != (r["label"] == 1):
                    gold = str(r["answer"])[:40]
                    print(f"[{name}] {r.get('id')} {r.get('category')} label={r['label']} got={p} gold={gold!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
