"""The labeled set in ``tests/data/math_labeled.jsonl`` runs in full through the registered ``math`` reward.

Each row is ``{id, category, answer, completion, label, reason?}``; ``label`` is 1 (right), 0 (wrong) or null
(the gold is broken, so the right verdict is *unscored*).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness import Sample, get_reward

DATA = Path(__file__).resolve().parent.parent / "data" / "math_labeled.jsonl"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_set_is_large_and_covers_every_category_both_ways(rows: list[dict]) -> None:
    assert len(rows) >= 300
    assert len({r["id"] for r in rows}) == len(rows)
    by_cat: dict[str, Counter] = {}
    for r in rows:
        by_cat.setdefault(r["category"], Counter())[r["label"]] += 1
    for cat, counts in by_cat.items():
        if cat != "gold_unparseable":
            assert counts[1] > 0 and counts[0] > 0, f"category {cat} lacks positives or negatives: {counts}"
    assert sum(1 for r in rows if r.get("reason")) >= 100


def test_every_labeled_pair_gets_its_label(rows: list[dict]) -> None:
    fn = get_reward("math")
    wrong = []
    for r in rows:
        s = fn(Sample(id=r["id"], answer=r["answer"]), r["completion"])
        expected = r["label"]
        ok = s.value is None if expected is None else s.value == float(expected)
        if not ok:
            got = f"{s.value} {s.status} {s.info.get('reason')}"
            wrong.append(f"{r['id']} ({r['category']}): expected {expected}, got {got}")
    assert not wrong, "\n".join(wrong)
