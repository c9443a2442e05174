"""Throughput results as a table (terminal and Allure HTML) and as one JSON document.

Each cell shows the median of its rounds with the rounds' min-max; the JSON keeps
every round's figures and every request's record, plus how percentiles were taken.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from engine_acceptance.load.generator import CellResult
from engine_acceptance.load.metrics import PERCENTILE_METHOD, Spread

__all__ = ["COLUMNS", "results_document", "table_header", "table_html", "table_lines", "table_rows"]

COLUMNS = (
    ("output_tok_s", "out tok/s"),
    ("p50_ttft_ms", "P50 TTFT ms"),
    ("p95_ttft_ms", "P95 TTFT ms"),
    ("p50_tpot_ms", "P50 TPOT ms"),
    ("p95_tpot_ms", "P95 TPOT ms"),
    ("p95_itl_ms", "P95 ITL ms"),
    ("p95_e2e_ms", "P95 E2E ms"),
)


def format_spread(spread: Spread) -> str:
    """median [min-max] of the rounds, or the one value when they agree."""
    if spread.median is None:
        return "-"
    if spread.min == spread.max:
        return f"{spread.median:.4g}"
    return f"{spread.median:.4g} [{spread.min:.4g}-{spread.max:.4g}]"


def prompt_tokens_cell(result: CellResult) -> str:
    """The input lengths the engine counted (usage.prompt_tokens): ``128``, or ``~117-131`` when estimated."""
    counts = [r.prompt_tokens for records in result.records for r in records if r.ok and r.prompt_tokens is not None]
    if not counts:
        return "-"
    low, high = min(counts), max(counts)
    span = str(low) if low == high else f"{low}-{high}"
    return span if result.input_exact else f"~{span}"


def table_rows(results: Sequence[CellResult]) -> list[list[str]]:
    rows = []
    for result in results:
        summary = result.summary
        errors = summary.errors_by_kind
        cpu = max((r.client.get("cpu_fraction", 0.0) for r in summary.rounds), default=0.0)
        rows.append([result.cell.key, f"{result.cell.requests}x{len(summary.rounds)}", prompt_tokens_cell(result),
                     *(format_spread(summary.metrics[name]) for name, _ in COLUMNS),
                     ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "0", f"{cpu:.0%}",
                     str(result.processes)])
    return rows


def table_header() -> list[str]:
    return ["cell", "req x rounds", "prompt tok", *(label for _, label in COLUMNS), "errors", "client CPU",
            "client procs"]


def fixed_width_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as a fixed-width text table with a rule under the header."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def html_table(title: str, note: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows as a small HTML page, which Allure shows inline."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return (f"<html><body><h3>{html.escape(title)}</h3><p>{html.escape(note)}</p>"
            f"<table border='1' cellpadding='4' style='border-collapse:collapse'><tr>{head}</tr>{body}</table>"
            f"</body></html>")


def table_lines(results: Sequence[CellResult]) -> list[str]:
    """A fixed-width table for the terminal: median [min-max] of rounds."""
    return fixed_width_lines(table_header(), table_rows(results))


def table_html(title: str, results: Sequence[CellResult], notes: Sequence[str] = ()) -> str:
    """The table as HTML; ``notes`` (e.g. that input lengths are approximate) go above it."""
    estimated = any(not result.input_exact for result in results)
    prompt_note = ("Prompt tok: usage.prompt_tokens of the measured requests, min-max; '~': text prompts of an "
                   "estimated length, no exact token ids could be made." if estimated else
                   "Prompt tok: usage.prompt_tokens of the measured requests.")
    note = (f"Each cell: median of rounds [min-max across rounds]; per round P50/P95 by {PERCENTILE_METHOD}. "
            f"{prompt_note} Client CPU: the load generator's busiest round, as a share of one core (of its busiest "
            f"process when spread). Client procs: processes that sent the cell from one schedule and one clock; "
            f"every percentile is over all their requests (--load-processes).")
    return html_table(title, " ".join([*notes, note]), table_header(), table_rows(results))


def results_document(results: Sequence[CellResult], *, engine: dict[str, Any], settings: dict[str, Any],
                     prompts: dict[str, Any]) -> dict[str, Any]:
    """Everything measured: per cell, per round, per request."""
    return {
        "format": "engine-acceptance-throughput-results/1",
        "definitions": {
            "ttft": "request sent -> first event with non-empty output text",
            "e2e": "request sent -> last event carrying a choice (vLLM's latency)",
            "itl": "gaps between consecutive choice events from the first output on; e2e - ttft = sum(itl)",
            "tpot": "(e2e - ttft) / (n - 1), n = usage.completion_tokens (else the event count, flagged)",
            "output_tok_s": "successful output tokens / round wall time",
            "percentiles": PERCENTILE_METHOD,
            "cell_value": "median of the rounds' values, with min-max; rounds are never pooled",
        },
        "engine": engine,
        "settings": settings,
        "prompts": prompts,
        "cells": [result.as_dict() for result in results],
    }
