"""The benchmarks' table of figures: each against its baseline measured in the same run."""

from __future__ import annotations

HEADER = ("figure", "value", "baseline (same run)", "ratio / overhead", "target")


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...] = HEADER) -> None:
    """Rows of five cells; the figure's name and its baseline left-aligned, the numbers right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(widths[i]) if i in (0, 2) else cell.rjust(widths[i]) for i, cell in enumerate(row)))
