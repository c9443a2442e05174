"""Tables as fixed-width text for the terminal and text attachments."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from engine_acceptance.reporting.table import Table

__all__ = ["aligned_lines", "fixed_width_lines", "table_lines"]


def fixed_width_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as a fixed-width text table with a rule under the header."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def table_lines(table: Table, *, title: bool = True) -> list[str]:
    """The title, the fixed-width table and its notes (indented), as terminal lines."""
    lines = [table.title] if title and table.title else []
    lines += fixed_width_lines(table.header, table.rows)
    return lines + [f"  {note}" for note in table.notes]


def aligned_lines(table: Table, widths: Sequence[int], *, right: Collection[int] = ()) -> list[str]:
    """The compact layout of the gate's counts and the soak's windows: the header, one rule as
    wide as it, then the rows; each cell padded to its column's width with no gap added (the
    widths carry the spacing), right-aligned in the columns whose index is in ``right``."""
    def line(cells: Sequence[str]) -> str:
        return "".join(cell.rjust(width) if index in right else cell.ljust(width)
                       for index, (cell, width) in enumerate(zip(cells, widths)))

    header = line(table.header)
    return [header, "-" * len(header), *(line(row) for row in table.rows)]
