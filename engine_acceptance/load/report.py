"""Throughput results as a table (terminal and Allure HTML) and as one JSON document.

Each cell shows the median of its rounds with the rounds' min-max; the JSON keeps
every round's figures and every request's record, plus how percentiles were taken.
The table ends with the output split's columns (:mod:`engine_acceptance.load.output_split`:
cached prompt tokens and draft acceptance where the engine reports them; the fixed-length
load is on ``/v1/completions``, which has no reasoning field) and their notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine_acceptance.load.generator import CellResult
from engine_acceptance.load.metrics import PERCENTILE_METHOD
from engine_acceptance.load.output_split import split_columns
from engine_acceptance.reporting import html, terminal
from engine_acceptance.reporting.table import Table

__all__ = ["COLUMNS", "note_page", "results_document", "table_html", "table_lines", "throughput_table"]

COLUMNS = (
    ("output_tok_s", "out tok/s"),
    ("p50_ttft_ms", "P50 TTFT ms"),
    ("p95_ttft_ms", "P95 TTFT ms"),
    ("p50_tpot_ms", "P50 TPOT ms"),
    ("p95_tpot_ms", "P95 TPOT ms"),
    ("p95_itl_ms", "P95 ITL ms"),
    ("p95_e2e_ms", "P95 E2E ms"),
)


def prompt_tokens_cell(result: CellResult) -> str:
    """The input lengths the engine counted (usage.prompt_tokens): ``128``, or ``~117-131`` when estimated."""
    counts = [r.prompt_tokens for records in result.records for r in records if r.ok and r.prompt_tokens is not None]
    if not counts:
        return "-"
    low, high = min(counts), max(counts)
    span = str(low) if low == high else f"{low}-{high}"
    return span if result.input_exact else f"~{span}"


def _rows(results: Sequence[CellResult]) -> list[list[str]]:
    rows = []
    for result in results:
        summary = result.summary
        errors = summary.errors_by_kind
        cpu = max((r.client.get("cpu_fraction", 0.0) for r in summary.rounds), default=0.0)
        rows.append([result.cell.key, f"{result.cell.requests}x{len(summary.rounds)}", prompt_tokens_cell(result),
                     *(summary.metrics[name].text() for name, _ in COLUMNS),
                     ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "0", f"{cpu:.0%}",
                     str(result.processes)])
    return rows


def _header() -> list[str]:
    return ["cell", "req x rounds", "prompt tok", *(label for _, label in COLUMNS), "errors", "client CPU",
            "client procs"]


def throughput_table(title: str, results: Sequence[CellResult], notes: Sequence[str] = ()) -> Table:
    """The cells' table: the throughput columns, then the output split's, with the split's notes under it."""
    header, rows, split_notes = split_columns([result.split_cell() for result in results])
    return Table.of(title, [*_header(), *header], [[*row, *split] for row, split in zip(_rows(results), rows)],
                    [*notes, *split_notes])


def note_page(table: Table) -> str:
    """A load table as the small HTML page Allure shows inline: its title, its notes, then the table."""
    return html.page("", [html.table_fragment(table, notes_above=True)])


def table_lines(results: Sequence[CellResult]) -> list[str]:
    """A fixed-width table for the terminal: median [min-max] of rounds, the split's notes under it."""
    return terminal.table_lines(throughput_table("", results), title=False)


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
    return note_page(throughput_table(title, results, [" ".join([*notes, note])]))


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
