"""Every example in a docstring of the packages runs and holds: each module whose source has a ``>>>`` line is
found by walking the packages (a new module with examples is covered without being listed here)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "rewards", "sandbox", "trainer", "evals")


def _modules_with_examples() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                out.append(name.removesuffix(".__init__"))
    return out


MODULES = _modules_with_examples()


def test_the_walk_finds_the_modules_with_examples() -> None:
    assert {"harness.types", "rewards.format", "rewards._boxes", "trainer.advantages"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_hold(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, f"{module}: {result.failed} of {result.attempted} failed"
