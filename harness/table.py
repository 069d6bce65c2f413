"""Plain-text tables for the terminal: columns padded to their widest cell, two spaces apart.

The one column layout of the console tables (``harness report``'s and ``harness eval``'s). It formats cells that
are already text; what goes in a cell, and any lines around the table, are the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["align_columns"]


def align_columns(rows: Sequence[Sequence[str]], *, rule: bool = False) -> list[str]:
    """The rows as lines with every column left-aligned to its widest cell (trailing spaces stripped).

    Args:
        rows: the header first, then the body; every row has the header's number of cells.
        rule: put a line of dashes under the header.

    >>> for line in align_columns([("step", "reward"), ("10", "math")], rule=True):
    ...     print(line)
    step  reward
    ----  ------
    10    math
    """
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
