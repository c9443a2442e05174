"""Throughput charts for the report (matplotlib, Agg backend: no display needed).

One figure per workload: output tok/s, P95 TTFT and P95 TPOT against client
concurrency, each point the median of the rounds with a bar from the rounds'
minimum to their maximum (TEST-PLAN §7: the seeds' charts are drawn this way).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from typing import Any

from engine_acceptance.load.generator import CellResult

__all__ = ["CHARTED_METRICS", "png_of", "pyplot", "workload_chart_png"]

CHARTED_METRICS = (
    ("output_tok_s", "output tok/s"),
    ("p95_ttft_ms", "P95 TTFT (ms)"),
    ("p95_tpot_ms", "P95 TPOT (ms)"),
)


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


def workload_chart_png(workload: str, results: Sequence[CellResult]) -> bytes:
    """A PNG with one panel per charted metric, concurrency on the x axis."""
    ordered = sorted(results, key=lambda result: result.cell.concurrency)
    concurrency = [result.cell.concurrency for result in ordered]
    plt = pyplot()
    figure, axes = plt.subplots(1, len(CHARTED_METRICS), figsize=(4.2 * len(CHARTED_METRICS), 3.4))
    try:
        for ax, (metric, label) in zip(axes, CHARTED_METRICS):
            spreads = [result.summary.metrics[metric] for result in ordered]
            xs = [c for c, s in zip(concurrency, spreads) if s.median is not None]
            medians = [s.median for s in spreads if s.median is not None]
            below = [s.median - s.min for s in spreads if s.median is not None]
            above = [s.max - s.median for s in spreads if s.median is not None]
            ax.errorbar(xs, medians, yerr=[below, above], fmt="o-", capsize=4)
            ax.set_xscale("log", base=2)
            ax.set_xticks(concurrency, [str(c) for c in concurrency])
            ax.set_xlabel("client concurrency")
            ax.set_title(label)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
        rounds = len(ordered[0].summary.rounds) if ordered else 0
        figure.suptitle(f"{workload} tokens: median of {rounds} rounds, bars min-max across rounds")
    except BaseException:
        plt.close(figure)
        raise
    return png_of(figure)


def png_of(figure: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed (pyplot keeps every open figure alive)."""
    try:
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()
    finally:
        pyplot().close(figure)
