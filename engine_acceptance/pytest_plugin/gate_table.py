"""The gate in the terminal: counts by check group, the capability table, shortfalls, baselines.

The terminal's view of :class:`~engine_acceptance.pytest_plugin.verdict.GateCollector`, as
:mod:`~engine_acceptance.pytest_plugin.gate_json` is the pipeline's. The counts are a
:class:`~engine_acceptance.reporting.table.Table` drawn compact
(:func:`engine_acceptance.reporting.terminal.aligned_lines`: fixed columns, counts
right-aligned, one rule). The capability table keeps its own layout here: its discovered
column is as wide as its longest state and its result follows two spaces after the
right-aligned counts, which neither shared layout draws, and changing it would change
what every run has printed.
"""

from __future__ import annotations

from engine_acceptance.provenance import describe
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.reporting import terminal
from engine_acceptance.reporting.results import OUTCOME_KINDS
from engine_acceptance.reporting.table import Table, shorten

__all__ = ["baseline_lines", "capability_table_lines", "counts_table", "lines", "shortfall_lines"]


def lines(gate: GateCollector) -> list[str]:
    """Everything the terminal shows of the gate, ending in ``GATE: PASS`` or ``GATE: FAIL``."""
    table = counts_table(gate)
    # The stale column is as wide as its header: "stale (warned)" when stale records only warn.
    out = terminal.aligned_lines(table, (20, 8, 8, 8, max(8, len(table.header[4]) + 2), 9), right=range(1, 6))
    reasons = sorted({item.reason for item in gate.by_outcome("skipped") if item.reason})
    for reason in reasons[:8]:
        out.append(f"  skipped: {reason}")
    stale = ("STALE RECORD (the defect seems fixed)" if gate.stale_records_fail
             else "STALE RECORD, warned (the defect seems fixed; --stale-records=warn: the gate does not fail on it)")
    for item in gate.by_outcome("stale_record"):
        out.append(f"  {stale}: {item.nodeid}")
    out += capability_table_lines(gate)
    out += shortfall_lines(gate)
    out += baseline_lines(gate)
    for reason in gate.gate_failures():
        out.append(f"  GATE FAILURE: {reason}")
    state = "PASS" if gate.passed else "FAIL"
    why = gate.interrupted or gate.engine_unavailable or ""
    out.append(f"GATE: {state}{' (' + why + ')' if why else ''}")
    return out


def counts_table(gate: GateCollector) -> Table:
    """The checks of each group by how they ended, in the registry's order of groups.

    With ``--stale-records=warn`` the stale column reads "stale (warned)": those checks passed and
    fail nothing, as the gate says.
    """
    stale = "stale" if gate.stale_records_fail else "stale (warned)"
    return Table.of("checks by group", ["capability", "passed", "failed", "known", stale, "skipped"],
                    [[capability, *(str(row[kind]) for kind in OUTCOME_KINDS)]
                     for capability, row in gate.counts_by_capability().items()])


def baseline_lines(gate: GateCollector) -> list[str]:
    """One line per baseline gated on: what the comparison is, and whose the baseline is."""
    return [f"  baseline ({entry.get('kind')}): {entry.get('comparison')}, {entry.get('path')}: "
            f"{describe(entry.get('provenance'))}" for entry in gate.baselines.values()]


def capability_table_lines(gate: GateCollector) -> list[str]:
    """Declared, discovered, required, ran, skipped and the result of each capability, then the engine's facts."""
    rows = gate.capability_rows()
    if not rows:
        return []
    # The discovered column is as wide as its longest word ("not served (stated)" is 19 characters).
    width = max(12, *(len(row.discovered) + 2 for row in rows))
    header = (f"{'capability':<20}{'declared':<10}{'discovered':<{width}}{'required':<10}"
              f"{'ran':>5}{'skipped':>9}  result")
    out = ["", header, "-" * len(header)]
    for row in rows:
        discovered = row.discovered.replace('_', ' ')
        out.append(f"{row.name:<20}{'yes' if row.declared else 'no':<10}{discovered:<{width}}"
                   f"{'yes' if row.required else '-':<10}{row.ran:>5}{row.skipped:>9}  {shorten(row.result, 110)}")
    return out + [f"  {fact}" for fact in gate.engine_facts]


def shortfall_lines(gate: GateCollector) -> list[str]:
    """A line per shortfall: what ran smaller, why, and how its checks read at that size."""
    out = []
    for shortfall, checks in gate.shortfalls_seen():
        counts: dict[str, int] = {}
        for item in checks:
            counts[item.outcome] = counts.get(item.outcome, 0) + 1
        results = ", ".join(f"{count} {shortfall.check_result(outcome)}" for outcome, count in counts.items())
        out.append(f"  SHORTFALL ({shortfall.capability}): {shortfall.summary} "
                   f"[{shortfall.reason()}]; checks: {results}")
    return out
