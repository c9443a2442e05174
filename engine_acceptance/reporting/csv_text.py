"""Tables as CSV text: a table's cells, or long-format records (one line per figure)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine_acceptance.reporting.table import Table

__all__ = ["records_csv", "rows_csv", "table_csv"]


def rows_csv(header: Sequence[Any], rows: Iterable[Sequence[Any]], *, lineterminator: str = "\r\n") -> str:
    """A header and rows of values (numbers unformatted) as CSV."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=lineterminator)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def table_csv(table: Table, *, lineterminator: str = "\r\n") -> str:
    """A table's header and rows as CSV (its title and notes are not part of a CSV)."""
    return rows_csv(table.header, table.rows, lineterminator=lineterminator)


def records_csv(fields: Sequence[str], records: Iterable[Mapping[str, Any]]) -> str:
    """Records as CSV under ``fields``: a field a record lacks (or holds None) is empty, extra keys are left out."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: ("" if v is None else v) for k, v in record.items()})
    return out.getvalue()
