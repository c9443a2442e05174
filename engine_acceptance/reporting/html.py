"""Tables as HTML: fragments for a page, and a small page Allure shows inline."""

from __future__ import annotations

import html
from collections.abc import Sequence

from engine_acceptance.reporting.table import Table

__all__ = ["page", "table_fragment"]


def table_fragment(table: Table) -> str:
    """The table under an ``<h3>`` title, with its notes as paragraphs after it."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in table.notes)
    title = f"<h3>{html.escape(table.title)}</h3>" if table.title else ""
    return (f"{title}<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>{head}</tr>{body}"
            f"</table>{notes}")


def page(title: str, fragments: Sequence[str], *, lead: Sequence[str] = ()) -> str:
    """A whole page: an ``<h2>`` title, lead lines as a list, then the fragments in order."""
    items = "".join(f"<li>{html.escape(item)}</li>" for item in lead)
    listed = f"<ul>{items}</ul>" if lead else ""
    return f"<html><body><h2>{html.escape(title)}</h2>{listed}{''.join(fragments)}</body></html>"
