"""Throughput charts for the report, drawn on :mod:`engine_acceptance.reporting.charts`.

One figure per workload: output tok/s, P95 TTFT and P95 TPOT against client
concurrency, each point the median of the rounds with a bar from the rounds'
minimum to their maximum (TEST-PLAN §7: the seeds' charts are drawn this way).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine_acceptance.load.generator import CellResult
from engine_acceptance.reporting.charts import png_of, pyplot

__all__ = ["CHARTED_METRICS", "workload_chart_png"]

CHARTED_METRICS = (
    ("output_tok_s", "output tok/s"),
    ("p95_ttft_ms", "P95 TTFT (ms)"),
    ("p95_tpot_ms", "P95 TPOT (ms)"),
)


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

