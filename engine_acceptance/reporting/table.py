"""A titled table of text cells: the one shape every report format renders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Table", "shorten"]


@dataclass(frozen=True)
class Table:
    """A title, a header, rows of text cells (as wide as the header) and notes under it."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.title!r}: a row of {len(row)} cells under a header of "
                                 f"{len(self.header)}: {row!r}")

    @classmethod
    def of(cls, title: str, header: Sequence[str], rows: Sequence[Sequence[str]] = (),
           notes: Sequence[str] = ()) -> Table:
        return cls(title, tuple(header), tuple(tuple(row) for row in rows), tuple(notes))


def shorten(text: str, limit: int) -> str:
    """A cell's text in at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
