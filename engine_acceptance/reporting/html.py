"""Tables as HTML: fragments for a page, and a small page Allure shows inline."""

from __future__ import annotations

import html
from collections.abc import Sequence

from engine_acceptance.reporting.table import Table

__all__ = ["page", "table_fragment"]


def table_fragment(table: Table, *, notes_above: bool = False) -> str:
    """The table under an ``<h3>`` title, with its notes as paragraphs after it (or between the two)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in table.notes)
    title = f"<h3>{html.escape(table.title)}</h3>" if table.title else ""
    grid = f"<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>{head}</tr>{body}</table>"
    return f"{title}{notes}{grid}" if notes_above else f"{title}{grid}{notes}"


def page(title: str, fragments: Sequence[str], *, lead: Sequence[str] | None = None) -> str:
    """A whole page: an ``<h2>`` title (none when empty), lead lines as a list, then the fragments in order.

    ``lead=None`` leaves the list out; an empty sequence still writes it (empty).
    """
    heading = f"<h2>{html.escape(title)}</h2>" if title else ""
    listed = "" if lead is None else "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in lead) + "</ul>"
    return f"<html><body>{heading}{listed}{''.join(fragments)}</body></html>"
