"""A diff's findings as tables, then as terminal text, Markdown, HTML (with charts) and JSON.

The tables are built once (:func:`diff_tables`) and every text format renders the same
ones through :mod:`engine_acceptance.reporting`. Verdict and check changes are always shown
whole; of the performance and rate comparisons, the terminal and the top of the Markdown
show the significant ones, and the rest (within noise or tolerance) are counted, folded in
Markdown, listed in the HTML page and the JSON.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import asdict
from typing import Any

import numpy as np

from engine_acceptance.diff.bundle import Bundle
from engine_acceptance.diff.compare_runs import (
    CHANGE,
    CHECKS,
    IMPROVEMENT,
    PERFORMANCE,
    RATES,
    REGRESSION,
    UNCHANGED,
    VERDICT,
    DiffReport,
    Finding,
)
from engine_acceptance.reporting import html as html_format
from engine_acceptance.reporting import markdown, terminal
from engine_acceptance.reporting.charts import png_of, pyplot
from engine_acceptance.reporting.table import Table, shorten

__all__ = ["diff_tables", "json_document", "json_text", "render_html", "render_markdown", "render_terminal",
           "summary_line"]

TITLES = {VERDICT: "1. Verdict and capabilities", CHECKS: "2. Checks whose outcome changed",
          PERFORMANCE: "3. Performance", RATES: "4. Rates"}
HEADERS = {
    VERDICT: ("finding", "what", "change", "BASE", "NEW", "note"),
    CHECKS: ("finding", "check", "change", "BASE", "NEW", "why"),
    PERFORMANCE: ("finding", "cell", "metric", "BASE", "NEW", "change", "95% interval", "tolerance", "note"),
    RATES: ("finding", "check", "rate", "BASE", "NEW", "change", "95% interval", "note"),
}
# The folded Markdown table holds performance and rate comparisons alike.
FOLDED_HEADER = ("finding", "cell or check", "metric or rate", "BASE", "NEW", "change", "95% interval", "tolerance",
                 "note")
# Markdown cells are cut here, and the folded table after this many rows: a PR comment is read,
# not searched, and GitHub takes at most 65,536 characters (the reference engine's default run
# folds 177 comparisons into 40 KB).
NOTE_LIMIT = 160
FOLDED_ROWS = 200


def summary_line(report: DiffReport) -> str:
    """One line: how many regressions, improvements and changes, and what stayed within noise."""
    within = sum(f.kind == UNCHANGED for f in report.findings)
    parts = [f"{report.count(REGRESSION)} regression(s)", f"{report.count(IMPROVEMENT)} improvement(s)",
             f"{report.count(CHANGE)} other change(s)", f"{within} comparison(s) within noise or tolerance",
             f"{len(report.not_compared)} not compared"]
    return ", ".join(parts)


def _signed(value: float | None, unit: str) -> str:
    """A relative change in percent, a difference of shares in percentage points."""
    if value is None:
        return "-"
    if unit == "relative":
        return f"{100 * value:+.1f}%"
    return f"{100 * value:+.1f} pts" if unit == "difference" else f"{value:+.3g}"


def _interval(finding: Finding) -> str:
    if finding.low is None or finding.high is None:
        return "-"
    if finding.unit == "relative":
        return f"[{100 * finding.low:+.1f}%, {100 * finding.high:+.1f}%]"
    return f"[{100 * finding.low:+.1f}, {100 * finding.high:+.1f}] pts"


def _label(finding: Finding) -> str:
    if finding.section in (PERFORMANCE, RATES) and finding.significant:
        return f"{finding.kind.upper()} (significant)"
    if finding.kind in (REGRESSION, IMPROVEMENT):
        return finding.kind.upper()
    return finding.kind


def _row(finding: Finding) -> tuple[str, ...]:
    if finding.section == PERFORMANCE:
        tolerance = "-" if finding.tolerance is None else f"{100 * finding.tolerance:g}%"
        return (_label(finding), finding.subject, finding.metric, finding.base, finding.new,
                _signed(finding.change, finding.unit), _interval(finding), tolerance, finding.note)
    if finding.section == RATES:
        return (_label(finding), finding.subject, finding.metric, finding.base, finding.new,
                _signed(finding.change, finding.unit), _interval(finding), finding.note)
    return _label(finding), finding.subject, finding.metric, finding.base, finding.new, finding.note


def diff_tables(report: DiffReport, *, everything: bool) -> list[Table]:
    """One table per section, in reading order, and the not-compared list.

    Without ``everything`` a performance or rate table holds only the significant findings
    and says how many more were compared; verdict and check tables hold every change always.
    """
    tables = []
    for section, title in TITLES.items():
        findings = report.of(section)
        shown = findings if everything or section in (VERDICT, CHECKS) else [f for f in findings if f.kind != UNCHANGED]
        hidden = len(findings) - len(shown)
        notes = [f"{hidden} more compared, none significant (within noise or tolerance)."] if hidden else []
        if not findings:
            notes = ["Nothing changed." if section in (VERDICT, CHECKS) else "Nothing to compare."]
        elif not shown:
            notes = [f"No significant change in {len(findings)} comparisons."]
        tables.append(Table.of(title, HEADERS[section], [_row(f) for f in shown], notes))
    tables.append(Table.of("Not compared", ("what", "why"), [(item.what, item.why) for item in report.not_compared],
                           () if report.not_compared else ("Everything both runs have was compared.",)))
    return tables


def _lead(report: DiffReport) -> list[str]:
    return [f"BASE: {report.base.label} ({report.base.path})", f"NEW:  {report.new.label} ({report.new.path})",
            summary_line(report), *report.notes]


def render_terminal(report: DiffReport, *, everything: bool = False) -> str:
    """The diff for a terminal: the lead lines, then each section's table (or its one-line note)."""
    lines = ["engine-acceptance diff", *_lead(report), ""]
    for table in diff_tables(report, everything=everything):
        if table.rows:
            lines += terminal.table_lines(table) + [""]
        else:
            lines += [f"{table.title}: {' '.join(table.notes)}", ""]
    if not everything:
        lines.append("(--all lists every comparison; --markdown, --html and --json write them all)")
    return "\n".join(lines).rstrip() + "\n"


def _clipped(table: Table) -> Table:
    """The table with every cell cut to NOTE_LIMIT characters."""
    return Table.of(table.title, table.header, [tuple(shorten(c, NOTE_LIMIT) for c in row) for row in table.rows],
                    table.notes)


def render_markdown(report: DiffReport) -> str:
    """A CI job summary or PR comment: the changes first; comparisons without news folded under <details>."""
    lines = ["## engine-acceptance diff", "", *(f"- {line}" for line in _lead(report)), ""]
    for table in diff_tables(report, everything=False):
        lines += markdown.table_lines(_clipped(table)) if table.rows else [f"### {table.title}", "", *table.notes, ""]
    rest = [f for f in report.findings if f.section in (PERFORMANCE, RATES) and f.kind == UNCHANGED]
    if rest:
        rows = [_row(f) if f.section == PERFORMANCE else (*_row(f)[:7], "-", _row(f)[7]) for f in rest]
        cut = len(rows) - FOLDED_ROWS
        notes = [f"{cut} more not shown here: --json and --html list every comparison."] if cut > 0 else []
        folded = Table.of("", FOLDED_HEADER, rows[:FOLDED_ROWS], notes)
        lines += ["<details><summary>Every comparison without a significant change "
                  f"({len(rest)})</summary>", "", *markdown.table_lines(_clipped(folded)), "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_html(report: DiffReport) -> str:
    """The whole diff as one page, every comparison listed, and a chart per significantly changed metric of a cell."""
    fragments = [html_format.table_fragment(table) for table in diff_tables(report, everything=True)]
    charted: dict[tuple[str, ...], list[Finding]] = {}
    for finding in report.of(PERFORMANCE):
        if finding.significant and finding.source:
            charted.setdefault(finding.source[:4], []).append(finding)
    if charted:
        charts = "".join(_chart_fragment(report, source, findings) for source, findings in charted.items())
        fragments.insert(3, f"<h3>Charts of the significant performance changes</h3>{charts}")
    return html_format.page("engine-acceptance diff", fragments, lead=_lead(report))


def _cell(run: Bundle, workload: str, key: str) -> dict[str, Any]:
    for cell in run.section("cells"):
        if cell.get("workload") == workload and cell.get("key") == key:
            return cell
    return {}


def _chart_fragment(report: DiffReport, source: tuple[str, ...], findings: list[Finding]) -> str:
    """One metric of one cell in both runs, as an inline PNG.

    Per-request samples as two distribution functions, each significantly changed percentile
    a dotted line; per-round figures as the rounds' dots side by side.
    """
    workload, key, kind, metric = source
    before = _cell(report.base, workload, key).get(kind, {}).get(metric) or []
    after = _cell(report.new, workload, key).get(kind, {}).get(metric) or []
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3))
    try:
        if kind == "samples":
            for values, label in ((before, "BASE"), (after, "NEW")):
                ordered = np.sort(np.asarray(values, dtype=float))
                axis.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post", label=label)
            for finding in findings:
                if len(finding.source) > 4:  # a percentile's line; a mean or a share has none
                    axis.axhline(int(finding.source[4]) / 100, color="grey", linestyle=":", linewidth=1)
            axis.set_xlabel(metric.replace("_", " "))
            axis.set_ylabel("share of requests at or below")
            axis.legend()
        else:
            for position, values in enumerate((before, after)):
                axis.plot([position] * len(values), values, "o")
            axis.set_xticks([0, 1], ["BASE", "NEW"])
            axis.set_xlim(-0.5, 1.5)
            axis.set_ylabel(metric.replace("_", " ") + " per round")
        changes = ", ".join(f"{f.metric.split(' ')[0] if kind == 'samples' else 'mean'} "
                            f"{_signed(f.change, f.unit)} {_interval(f)}" for f in findings)
        axis.set_title(f"{workload} {key} {metric}: {changes}", fontsize=8, wrap=True)
        axis.grid(True, alpha=0.3)
    except BaseException:
        plt.close(figure)
        raise
    encoded = base64.b64encode(png_of(figure)).decode("ascii")
    alt = html.escape(f"{workload} {key} {metric}", quote=True)
    return f"<p><img alt='{alt}' src='data:image/png;base64,{encoded}'/></p>"


def json_document(report: DiffReport) -> dict[str, Any]:
    """The diff as data: both runs, the summary, every finding and what was not compared."""
    return {
        "base": {"path": str(report.base.path), "label": report.base.label, "suite_version": report.base.suite_version},
        "new": {"path": str(report.new.path), "label": report.new.label, "suite_version": report.new.suite_version},
        "summary": {"regressions": report.count(REGRESSION), "improvements": report.count(IMPROVEMENT),
                    "changes": report.count(CHANGE), "unchanged": report.count(UNCHANGED),
                    "not_compared": len(report.not_compared)},
        "notes": list(report.notes),
        "findings": [{**asdict(f), "source": list(f.source)} for f in report.findings],
        "not_compared": [asdict(item) for item in report.not_compared],
    }


def json_text(report: DiffReport) -> str:
    return json.dumps(json_document(report), indent=1, ensure_ascii=False) + "\n"
