"""The load tables' columns for reasoning against answer, cached prompt tokens and draft acceptance.

Every load table (throughput, SLO, media) ends with the same columns, made here from each
cell's records and figures so that the three say the same thing the same way:

- **P50 first reasoning ms** and **P50 first content ms** (chat cells: the reasoning's first
  token and the answer's), beside TTFT, which stays the first output of any kind;
- **reasoning tok/req** and **content tok/req**, the means per request, with how the
  reasoning was counted in the notes (the engine's usage, or one token per streamed event);
- **cached prompt tok/req** and the **cached share** of the prompt tokens;
- **spec decode acceptance**: accepted over draft tokens from the engine's counters.

A column shows only where some cell has a value. A cell without one says why in words
("not reported by the engine", "no reasoning streamed"), never 0, and a column no cell has a
value for is left out and named in a note with the reason. ``/v1/completions`` has no
reasoning field, so cells on it get no reasoning split: their TTFT is the first content token
and every output token is content; the note says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.metrics import (
    PROMPT_CACHED_SHARE,
    REASONING_FROM_EVENTS,
    SPEC_DECODE_ACCEPTANCE,
    CellSummary,
    RequestRecord,
    RoundSummary,
)
from engine_acceptance.reporting.results import Spread
from engine_acceptance.run_bundle import rate_property

__all__ = ["NOT_REPORTED", "SplitCell", "acceptance_rate_properties", "cell_of_round", "cell_of_summary",
           "split_columns", "split_figures"]

NOT_REPORTED = "not reported by the engine"
COMPLETIONS_NOTE = ("/v1/completions has no reasoning field: there TTFT is the first content token and every "
                    "output token is content")


@dataclass(frozen=True)
class SplitCell:
    """What the split columns read of one cell."""

    key: str
    # Each metric of metrics.METRIC_UNITS as a median of rounds (one value for a single-round cell).
    metrics: Mapping[str, Spread]
    records: Sequence[RequestRecord]
    # The requests went to /v1/chat/completions (reasoning has a field of its own there).
    chat: bool
    # The speculative-decoding counters' increase over the measured rounds: (accepted, draft tokens).
    spec_decode: tuple[int, int] | None = None
    # Why there is none, in words (spec_decode.SpecDecodeCounters.unavailable).
    spec_decode_note: str | None = None

    @property
    def done(self) -> list[RequestRecord]:
        return [record for record in self.records if record.ok]

    def spread(self, metric: str) -> Spread:
        return self.metrics.get(metric) or Spread(None)


def cell_of_summary(key: str, summary: CellSummary, records: Iterable[RequestRecord], *, chat: bool,
                    spec_decode_note: str | None) -> SplitCell:
    """A cell of rounds (throughput, media): each figure the median of its rounds."""
    return SplitCell(key, summary.metrics, list(records), chat, summary.spec_decode, spec_decode_note)


def cell_of_round(key: str, summary: RoundSummary, records: Sequence[RequestRecord], *, chat: bool,
                  spec_decode_note: str | None) -> SplitCell:
    """A cell of one round (an open-loop cell): each figure its one value."""
    spec = None if summary.spec_drafted is None else (summary.spec_accepted or 0, summary.spec_drafted)
    return SplitCell(key, {name: Spread.of([value]) for name, value in summary.metrics.items()}, records, chat,
                     spec, spec_decode_note)


def _percent(spread: Spread) -> str:
    if spread.median is None:
        return "-"
    if spread.count < 2 or spread.min == spread.max:
        return f"{100 * spread.median:.1f}%"
    return f"{100 * spread.median:.1f}% [{100 * spread.min:.1f}-{100 * spread.max:.1f}%]"  # type: ignore[operator]


@dataclass(frozen=True)
class _Column:
    label: str
    # The cell's text, or None when it has no value (then ``why`` says what to show).
    value: Callable[[SplitCell], str | None]
    why: Callable[[SplitCell], str]
    # Shown for chat cells only: the reasoning split.
    chat_only: bool = False


def _when(cell: SplitCell, metric: str, text: Callable[[Spread], str] = Spread.text) -> str | None:
    spread = cell.spread(metric)
    return None if spread.median is None else text(spread)


def _reported_cached(cell: SplitCell) -> bool:
    return any(record.cached_tokens is not None for record in cell.done)


def _acceptance(cell: SplitCell) -> str | None:
    if cell.spec_decode is None or cell.spec_decode[1] <= 0:
        return None
    return _percent(cell.spread(SPEC_DECODE_ACCEPTANCE))


def _acceptance_why(cell: SplitCell) -> str:
    if cell.spec_decode is not None:
        return "no draft tokens"
    return f"{NOT_REPORTED}: {cell.spec_decode_note}" if cell.spec_decode_note else NOT_REPORTED


_COLUMNS = (
    _Column("P50 first reasoning ms", lambda c: _when(c, "p50_first_reasoning_ms"),
            lambda c: "no reasoning streamed", chat_only=True),
    _Column("P50 first content ms", lambda c: _when(c, "p50_first_content_ms"),
            lambda c: "no content streamed", chat_only=True),
    _Column("reasoning tok/req", lambda c: _when(c, "mean_reasoning_tokens"), lambda c: "-", chat_only=True),
    _Column("content tok/req", lambda c: _when(c, "mean_content_tokens"), lambda c: "-", chat_only=True),
    _Column("cached prompt tok/req", lambda c: _when(c, "mean_cached_tokens") if _reported_cached(c) else None,
            lambda c: NOT_REPORTED),
    _Column("cached share", lambda c: _when(c, PROMPT_CACHED_SHARE, _percent) if _reported_cached(c) else None,
            lambda c: NOT_REPORTED),
    _Column("spec decode acceptance", _acceptance, _acceptance_why),
)


def _applies(column: _Column, cell: SplitCell) -> bool:
    return cell.chat or not column.chat_only


def split_columns(cells: Sequence[SplitCell]) -> tuple[list[str], list[list[str]], list[str]]:
    """The header, one row per cell and the notes: only the columns some cell has a value in."""
    shown = [column for column in _COLUMNS
             if any(_applies(column, cell) and column.value(cell) is not None for cell in cells)]
    rows = []
    for cell in cells:
        row = []
        for column in shown:
            value = column.value(cell) if _applies(column, cell) else None
            row.append(value if value is not None else column.why(cell) if _applies(column, cell) else "n/a")
        rows.append(row)
    return [column.label for column in shown], rows, _notes(cells, shown)


def _notes(cells: Sequence[SplitCell], shown: Sequence[_Column]) -> list[str]:
    notes = []
    if any(not cell.chat for cell in cells):
        notes.append(COMPLETIONS_NOTE + ".")
    if any(cell.chat for cell in cells):
        notes += _reasoning_notes([cell for cell in cells if cell.chat])
    labels = {column.label for column in shown}
    chat = [cell for cell in cells if cell.chat]
    if chat and "P50 first reasoning ms" not in labels:
        notes.append("First reasoning token: no reasoning streamed in any chat cell (a model that does not reason, "
                      "or thinking turned off).")
    if chat and "P50 first content ms" not in labels:
        notes.append("First content token: no content streamed in any chat cell: the whole output was reasoning (a "
                      "budget spent before the answer, or a reasoning parser that never saw the end of the "
                      "reasoning).")
    if "cached prompt tok/req" not in labels:
        notes.append(f"Cached prompt tokens: {NOT_REPORTED} (no reply had usage.prompt_tokens_details.cached_tokens; "
                     f"vLLM reports them with --enable-prompt-tokens-details, SGLang with --enable-cache-report).")
    else:
        notes.append("Cached prompt tokens: usage.prompt_tokens_details.cached_tokens, mean per request, and their "
                     "share of the prompt tokens.")
    if "spec decode acceptance" not in labels:
        whys = sorted({_acceptance_why(cell) for cell in cells})
        notes.append(f"Speculative-decoding acceptance: {'; '.join(whys)}.")
    else:
        notes.append("Spec decode acceptance: accepted / draft tokens, the increase of the engine's counters "
                     "over each round (read between rounds).")
    return notes


def _reasoning_notes(cells: Sequence[SplitCell]) -> list[str]:
    """How each chat cell's reasoning tokens were counted, grouped by method."""
    by_method: dict[str, list[str]] = {}
    for cell in cells:
        by_method.setdefault(_reasoning_method(cell), []).append(cell.key)
    return [f"Reasoning tokens ({', '.join(keys)}): {method}." for method, keys in by_method.items()]


def _reasoning_method(cell: SplitCell) -> str:
    sources = {record.reasoning_tokens_source for record in cell.done if record.reasoning_tokens_source}
    reported = sorted(source for source in sources if source != REASONING_FROM_EVENTS)
    counted = REASONING_FROM_EVENTS in sources
    if not sources:
        return "no successful request"
    if not counted:
        return f"{', '.join(reported)}, as the engine reported them; content tokens: the output tokens less those"
    events = sum(record.output_events for record in cell.done)
    tokens = sum(record.output_tokens or 0 for record in cell.done if record.output_tokens_source == "usage")
    per_event = (f"its streams carried {tokens / events:.2f} output tokens per event (usage.completion_tokens over "
                 f"the events with output), so the count is exact only at 1.00" if events and tokens else
                 "no usage to say how many tokens an event carried")
    mixed = f" ({len(reported)} other source(s) too: {', '.join(reported)})" if reported else ""
    return (f"{NOT_REPORTED} in usage, so counted: one token per streamed event carrying reasoning; {per_event}"
            f"{mixed}")


def split_figures(cell: SplitCell) -> dict[str, Any]:
    """The split for JSON (gate.json's figures, the results file): values, how counted, and why not."""
    return {
        "chat": cell.chat,
        "reasoning_tokens": _reasoning_method(cell) if cell.chat else COMPLETIONS_NOTE,
        "cached_tokens": "usage.prompt_tokens_details.cached_tokens" if _reported_cached(cell) else NOT_REPORTED,
        "spec_decode": ({"accepted_tokens": cell.spec_decode[0], "draft_tokens": cell.spec_decode[1]}
                        if cell.spec_decode is not None else _acceptance_why(cell)),
    }


def acceptance_rate_properties(cells: Iterable[SplitCell]) -> list[tuple[str, str]]:
    """Each cell's acceptance as k of n (accepted of draft tokens) for the run bundle's rates."""
    # An engine that counted more accepted than draft tokens has no acceptance to give as a share.
    return [rate_property(f"spec_decode_acceptance[{cell.key}]", *cell.spec_decode) for cell in cells
            if cell.spec_decode is not None and 0 <= cell.spec_decode[0] <= cell.spec_decode[1] > 0]
