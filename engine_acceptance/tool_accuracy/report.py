"""The tool-accuracy figures as the report shows them: tables (CSV), examples of failures, a chart.

Nothing here sends requests or imports pytest: the checks attach what these return.
A trigger comparison with a baseline recorded from the same engine identity is said to
be a regression against itself (``engine_acceptance.provenance``), never accuracy; one of
the same engine and model at another version, a regression across versions.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine_acceptance.reporting.charts import png_of, pyplot
from engine_acceptance.reporting.csv_text import table_csv
from engine_acceptance.reporting.table import Table
from engine_acceptance.provenance import AGAINST_ITSELF, UNKNOWN, is_across_versions
from engine_acceptance.tool_accuracy.runner import CaseOutcome
from engine_acceptance.tool_accuracy.scoring import Confusion, ToolScore

__all__ = ["comparison_text", "confusion_csv", "confusion_table", "error_kinds", "failure_examples", "shape_chart_png",
           "shape_csv", "shape_table", "summary_lines"]


def comparison_text(comparison: str | None) -> str:
    """What a trigger comparison with the baseline is worth, said beside its figures."""
    if comparison == AGAINST_ITSELF:
        return (f"{AGAINST_ITSELF}: the baseline was recorded from this same engine, version and model, so this "
                "shows only that its triggers did not change since, not that they are accurate")
    if is_across_versions(comparison):
        return f"{comparison}: this shows what the upgrade changed in its triggers, not that they are accurate"
    if comparison == UNKNOWN:
        return f"{UNKNOWN}: the baseline file does not say which engine and model it was recorded from"
    return comparison or ""


def summary_lines(score: ToolScore, trigger: Confusion | None, baseline_label: str | None,
                  comparison: str | None = None) -> list[str]:
    lines = [f"cases: {score.cases} (each non-streamed and streamed: {score.replies} replies, "
             f"{score.errors} HTTP errors, {score.calls} tool calls)",
             f"schema-valid arguments: {score.schema_valid}",
             f"finish_reason consistent with the calls: {score.finish_consistent} of the replies that ended before "
             f"max_tokens ({score.finish_cut} cut by max_tokens, not judged)",
             f"streamed calls = non-streamed calls: {score.stream_agreement} of the cases whose replies both ran "
             f"to their end ({score.stream_left_out} left out: an HTTP error or a reply cut by max_tokens)",
             f"trigger against the set's intent: {_confusion_text(score.intended)}"]
    if trigger is not None:
        said = f" [{comparison_text(comparison)}]" if comparison else ""
        lines.append(f"trigger against the baseline {baseline_label}: {_confusion_text(trigger)}{said}")
    return lines


def _confusion_text(value: Confusion) -> str:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"
    return (f"precision {pct(value.precision)}, recall {pct(value.recall)}, F1 {pct(value.f1)}, "
            f"agreement {value.agreement}")


def confusion_table(value: Confusion, reference: str) -> Table:
    """Tool calls of this deployment against ``reference``'s, as a 2x2 table."""
    return Table.of(f"tool-call trigger against {reference}", ["", f"{reference} called", f"{reference} did not call"],
                    [["this deployment called", str(value.both), str(value.only_candidate)],
                     ["this deployment did not call", str(value.only_reference), str(value.neither)]])


def confusion_csv(value: Confusion, reference: str) -> str:
    return table_csv(confusion_table(value, reference))


def shape_table(score: ToolScore) -> Table:
    """Per schema shape: cases, replies calling a tool, calls, schema-valid calls, inconsistent finishes, errors."""
    return Table.of("tool accuracy by schema shape",
                    ["shape", "cases", "replies calling", "calls", "schema-valid calls", "finish_reason inconsistent",
                     "HTTP errors"],
                    [[shape, *(str(row[key]) for key in ("cases", "replies_calling", "calls", "valid_calls",
                                                          "finish_inconsistent", "errors"))]
                     for shape, row in score.by_shape.items()])


def shape_csv(score: ToolScore) -> str:
    return table_csv(shape_table(score))


def failure_examples(outcomes: Sequence[CaseOutcome], *, kind: str, limit: int = 5) -> list[str]:
    """A few cases that failed ``kind`` (invalid, finish), shortened; errors are grouped by error_kinds."""
    found: list[str] = []
    for outcome in outcomes:
        if kind == "invalid":
            found += [f"{outcome.case_id} ({outcome.mode}) {call.name}: {call.problems[0][:160]}"
                      for call in outcome.calls if not call.valid]
        elif kind == "finish" and outcome.finish_judged and not outcome.finish_consistent:
            found.append(f"{outcome.case_id} ({outcome.mode}): {len(outcome.calls)} call(s), "
                         f"finish_reason {outcome.finish_reason!r}")
        if len(found) >= limit:
            break
    return found[:limit]


def error_kinds(outcomes: Sequence[CaseOutcome], *, text_chars: int = 160, ids_shown: int = 3) -> list[str]:
    """The failed requests grouped by their error text, most frequent first.

    Five examples show one kind; a rare second kind (one timeout among 52 refusals)
    would hide behind them, so every kind is listed with its count, modes and cases.
    """
    groups: dict[str, list[CaseOutcome]] = {}
    for outcome in outcomes:
        if outcome.error is not None:
            groups.setdefault(outcome.error[:text_chars], []).append(outcome)
    lines = []
    for text, members in sorted(groups.items(), key=lambda item: -len(item[1])):
        modes = " and ".join(sorted({member.mode for member in members}))
        ids = sorted({member.case_id for member in members})
        shown = ", ".join(ids[:ids_shown]) + (f", ... ({len(ids)} cases)" if len(ids) > ids_shown else "")
        lines.append(f"{len(members)} x {text} [{modes}: {shown}]")
    return lines


def shape_chart_png(score: ToolScore, title: str) -> bytes:
    """Per shape: the share of replies that call a tool, and of calls whose arguments fit the schema."""
    shapes = list(score.by_shape)
    calling = [100 * row["replies_calling"] / (2 * row["cases"]) if row["cases"] else 0
               for row in score.by_shape.values()]
    valid = [100 * row["valid_calls"] / row["calls"] if row["calls"] else 0 for row in score.by_shape.values()]
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(10, 3.8))
    try:
        positions = range(len(shapes))
        ax.bar([p - 0.2 for p in positions], calling, width=0.4, label="replies that call a tool (%)")
        ax.bar([p + 0.2 for p in positions], valid, width=0.4, label="calls with schema-valid arguments (%)")
        ax.set_xticks(list(positions), shapes, rotation=35, ha="right")
        ax.set_ylim(0, 105)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(title, fontsize=10)
    except BaseException:
        plt.close(figure)
        raise
    return png_of(figure)
