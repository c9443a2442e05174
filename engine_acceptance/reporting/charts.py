"""Charts as PNG: matplotlib on the Agg backend (no display needed), imported at the first chart.

A producer draws its own chart (what is on the axes is its data's business) on
:func:`pyplot` and hands the figure to :func:`png_of`; this module is the one place
matplotlib is set up and a figure becomes bytes.
"""

from __future__ import annotations

import functools
import io
from typing import Any

__all__ = ["png_of", "pyplot"]


@functools.cache
def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, imported at the first chart.

    Not at import: pyplot takes most of a second to import, and every run (every
    self-test's subprocess among them) imports the report modules, most drawing nothing.
    """
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: CI and report builders have no display
    import matplotlib.pyplot as plt

    return plt


def png_of(figure: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed (pyplot keeps every open figure alive)."""
    try:
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
    finally:
        pyplot().close(figure)
