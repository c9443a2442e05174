"""SLO results as a table (terminal, Allure HTML, CSV) and a chart of latency against rate.

One row per open-loop cell: requests sent and meeting the SLO, attainment with its
95% Wilson interval, goodput, the P50/P90/P99 of TTFT, TPOT and E2E (the percentile
is in every column's name), late sends and the most requests in flight, then the output
split's columns where the engine reported them (:mod:`engine_acceptance.load.output_split`:
cached prompt tokens, draft acceptance; the cells are on ``/v1/completions``, which has no
reasoning field) with the split's notes under the table. The chart
draws each metric's percentiles against the arrival rate, with the SLO's limit as a
line, so where latency leaves the objective is visible at a glance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine_acceptance.load.arrivals import LATE_S, format_rate
from engine_acceptance.load.metrics import PERCENTILE_METHOD
from engine_acceptance.load.output_split import NOT_REPORTED, SplitCell, split_columns
from engine_acceptance.load.report import note_page
from engine_acceptance.load.open_loop.slo import SLO_METRICS, SLO_PERCENTILES, SloOutcome, SloSpec
from engine_acceptance.reporting import terminal
from engine_acceptance.reporting.charts import png_of, pyplot
from engine_acceptance.reporting.csv_text import records_csv
from engine_acceptance.reporting.table import Table

__all__ = ["SPLIT_CSV_COLUMNS", "slo_chart_png", "slo_csv", "slo_table", "slo_table_html", "slo_table_lines"]

_LATENCY_COLUMNS = tuple((f"p{p}_{metric}_ms", f"P{p} {metric.upper()} ms")
                         for metric in SLO_METRICS for p in SLO_PERCENTILES)


# The output split in the CSV, numbers unformatted: (column, the cell's metric or None for the k of n).
SPLIT_CSV_COLUMNS = ("p50_first_reasoning_ms", "p50_first_content_ms", "mean_reasoning_tokens", "mean_content_tokens",
                     "mean_cached_tokens", "prompt_cached_share", "spec_decode_acceptance",
                     "spec_decode_accepted_tokens", "spec_decode_draft_tokens")


def _header() -> list[str]:
    return ["cell", "rate req/s", "sent", "meeting", "attainment", "95% Wilson", "goodput req/s", "duration s",
            *(label for _, label in _LATENCY_COLUMNS), f"late sends (>{LATE_S * 1000:g} ms)", "max in flight",
            "client processes"]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _rows(outcomes: Sequence[SloOutcome]) -> list[list[str]]:
    rows = []
    for outcome in outcomes:
        share = outcome.attainment
        rows.append([outcome.key, format_rate(outcome.rate), str(share.total), str(share.successes),
                     "-" if share.rate is None else f"{100 * share.rate:.1f}%",
                     f"{100 * share.lower:.1f}-{100 * share.upper:.1f}%", f"{outcome.goodput_rps:.3g}",
                     f"{outcome.duration_s:.1f}",
                     *(_number(outcome.percentiles_ms.get(name)) for name, _ in _LATENCY_COLUMNS),
                     str(outcome.late_sends), str(outcome.max_in_flight), str(outcome.client_processes)])
    return rows


def slo_table(title: str, outcomes: Sequence[SloOutcome], splits: Sequence[SplitCell] = (),
              notes: Sequence[str] = ()) -> Table:
    """One row per cell; the output split's columns and notes when the cells' ``splits`` are given (in order)."""
    if not splits:
        return Table.of(title, _header(), _rows(outcomes), notes)
    header, rows, split_notes = split_columns(splits)
    return Table.of(title, [*_header(), *header], [[*row, *split] for row, split in zip(_rows(outcomes), rows)],
                    [*notes, *split_notes])


def slo_table_lines(outcomes: Sequence[SloOutcome], splits: Sequence[SplitCell] = ()) -> list[str]:
    return terminal.table_lines(slo_table("", outcomes, splits), title=False)


def slo_table_html(title: str, spec: SloSpec, outcomes: Sequence[SloOutcome], splits: Sequence[SplitCell] = ()) -> str:
    note = (f"SLO: {spec.describe()}. Attainment: requests meeting every limit / requests sent (failed ones never "
            f"meet it), with its 95% Wilson interval; goodput: requests meeting it / the cell's duration. "
            f"Percentiles over the successful requests by {PERCENTILE_METHOD}. A send more than "
            f"{LATE_S * 1000:g} ms behind its due time is late: counted, never shifted. Client processes: how many "
            f"processes sent the cell, from one schedule and one clock (--load-processes).")
    return note_page(slo_table(title, outcomes, splits, [note]))


def _split_csv(split: SplitCell | None) -> dict[str, object]:
    """A cell's split for the CSV: the numbers, "not reported by the engine" where it reported none, else empty."""
    if split is None:
        return {}
    values: dict[str, object] = {name: split.spread(name).median for name in SPLIT_CSV_COLUMNS[:-2]}
    if split.spec_decode is not None:
        values["spec_decode_accepted_tokens"], values["spec_decode_draft_tokens"] = split.spec_decode
    else:
        values["spec_decode_acceptance"] = NOT_REPORTED
    if not any(record.cached_tokens is not None for record in split.done):
        values["mean_cached_tokens"] = values["prompt_cached_share"] = NOT_REPORTED
    return values


def slo_csv(outcomes: Sequence[SloOutcome], splits: Sequence[SplitCell] = ()) -> str:
    """The table as CSV, numbers unformatted (for spreadsheets and the comparison of runs)."""
    columns = ["key", "request_rate", "sent", "meeting", "attainment", "attainment_wilson_low",
               "attainment_wilson_high", "goodput_rps", "duration_s", *(name for name, _ in _LATENCY_COLUMNS),
               "late_sends", "max_in_flight", "client_processes", *(SPLIT_CSV_COLUMNS if splits else ())]
    by_key = {split.key: split for split in splits}
    return records_csv(columns, ({**outcome.as_dict(), "request_rate": format_rate(outcome.rate),
                                  **_split_csv(by_key.get(outcome.key))} for outcome in outcomes))


def slo_chart_png(title: str, spec: SloSpec, outcomes: Sequence[SloOutcome]) -> bytes:
    """One panel per metric: its P50/P90/P99 against the arrival rate, the SLO's limit dashed."""
    ordered = sorted(outcomes, key=lambda outcome: outcome.rate)
    # inf (all at once) is drawn one doubling to the right of the highest finite rate.
    finite = [o.rate for o in ordered if not math.isinf(o.rate)]
    at_inf = 2 * max(finite) if finite else 1.0
    xs = [at_inf if math.isinf(o.rate) else o.rate for o in ordered]
    plt = pyplot()
    figure, axes = plt.subplots(1, len(SLO_METRICS), figsize=(4.2 * len(SLO_METRICS), 3.4))
    try:
        for ax, metric in zip(axes, SLO_METRICS):
            for p in SLO_PERCENTILES:
                points = [(x, o.percentiles_ms.get(f"p{p}_{metric}_ms")) for x, o in zip(xs, ordered)]
                drawn = [(x, y) for x, y in points if y is not None]
                if drawn:
                    ax.plot([x for x, _ in drawn], [y for _, y in drawn], "o-", label=f"P{p}")
            if metric in spec.limits_ms:
                ax.axhline(spec.limits_ms[metric], color="red", linestyle="--", label="SLO")
            if len(set(xs)) > 1:
                ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [format_rate(o.rate) for o in ordered])
            ax.set_xlabel("arrival rate (req/s)")
            ax.set_title(f"{metric.upper()} (ms)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
        figure.suptitle(f"{title}: latency percentiles against the open-loop rate")
    except BaseException:
        plt.close(figure)
        raise
    return png_of(figure)
