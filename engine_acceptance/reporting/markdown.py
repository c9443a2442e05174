"""Tables as GitHub-flavoured Markdown: a CI job summary or a pull-request comment."""

from __future__ import annotations

from engine_acceptance.reporting.table import Table

__all__ = ["cell", "table_lines"]


def cell(text: str) -> str:
    """One cell's text that cannot break the table: pipes escaped, one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def table_lines(table: Table, *, heading: str = "###") -> list[str]:
    """The table under a heading with its notes after it, ending in a blank line."""
    lines = [f"{heading} {table.title}", ""] if table.title else []
    lines += ["| " + " | ".join(cell(h) for h in table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    lines += [""] + list(table.notes) + ([""] if table.notes else [])
    return lines
