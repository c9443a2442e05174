"""The release gate: what passed, what failed, what is known, per capability.

The collector sees every test report (on the controller, also under xdist) and
turns them into the verdict a release pipeline reads: a short terminal table by
check group, the capability table (declared, discovered, required, tested,
result) and a machine-readable ``gate.json`` with the figures the measurements
recorded, every measurement that ran smaller than declared (its *shortfall*,
:mod:`engine_acceptance.shortfalls`): in the capability row, under ``shortfalls`` and as a
line of the table; a shortfall alone does not fail the gate), and the baselines the run
was gated on with whose they are (a baseline of this same engine is a regression against
itself, not accuracy). The gate passes only when at least one check ran, no check failed,
no expected-failure record went stale (unless stale records are only warned about), every
required capability was served and tested (a genuine pass, not only known defects), and
every capability the run meant to test had a check that ran (unless ``--allow-untested``
names it).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine_acceptance.capabilities.plan import CapabilityPlan, CapabilityRow, coverage_rows
from engine_acceptance.capabilities.registry import GROUP_MARKERS
from engine_acceptance.shortfalls import Shortfall
from engine_acceptance.provenance import BASELINE_PROPERTY, describe
from engine_acceptance.run_bundle import CELLS_PROPERTY, RATE_PROPERTY

__all__ = ["COVERS_PROPERTY", "CheckOutcome", "GateCollector"]

# The user property (set at collection) naming the capabilities a check tests; any other
# user property a check records is a figure for gate.json.
COVERS_PROPERTY = "engine_acceptance.covers"


@dataclass
class CheckOutcome:
    nodeid: str
    capability: str
    outcome: str  # passed, failed, known_defect, stale_record, skipped
    reason: str = ""
    covers: frozenset[str] = frozenset()


@dataclass
class GateCollector:
    stale_records_fail: bool = True
    outcomes: dict[str, CheckOutcome] = field(default_factory=dict)
    interrupted: str | None = None
    engine_unavailable: str | None = None
    # Set before the run once the engine is known: what is declared, discovered, required, tested.
    plans: Mapping[str, CapabilityPlan] = field(default_factory=dict)
    engine_facts: list[str] = field(default_factory=list)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    # --allow-untested: capabilities that may end the run with every selected check skipped.
    allow_untested: frozenset[str] = frozenset()
    # Set before the run from the options and the model profile: measurements smaller than declared.
    shortfalls: list[Shortfall] = field(default_factory=list)
    # The baselines checks compared with (engine_acceptance.provenance.baseline_entry), by kind and path.
    baselines: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # For the run bundle (engine_acceptance.run_bundle): every rate as k of n, every load cell's samples.
    rates: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)

    def add(self, nodeid: str, keywords: Iterable[str], when: str, outcome: str, wasxfail: str | None,
            longrepr: str, user_properties: Iterable[tuple[str, Any]] = ()) -> None:
        """Fold one pytest report (setup, call or teardown phase) into the verdict."""
        # The check's group: the first group marker it carries, in the registry's order.
        capability = next((name for name in GROUP_MARKERS if name in set(keywords)), "other")
        given = list(user_properties)
        # A rate or a load cell recorded for the run bundle is raw data, not a gate.json figure.
        properties = dict((key, value) for key, value in given if key not in (RATE_PROPERTY, CELLS_PROPERTY))
        if when == "call":
            self._keep_for_bundle(nodeid, given)
        covers = frozenset(filter(None, str(properties.pop(COVERS_PROPERTY, "")).split(",")))
        baseline = _figure(properties.pop(BASELINE_PROPERTY, None))
        if isinstance(baseline, dict):
            self.baselines[(str(baseline.get("kind")), str(baseline.get("path")))] = baseline
        if properties and when == "call":
            self.figures[nodeid] = {key: _figure(value) for key, value in properties.items()}
        previous = self.outcomes.get(nodeid)
        if wasxfail is not None and outcome == "skipped":
            result = CheckOutcome(nodeid, capability, "known_defect", wasxfail)
        elif wasxfail is not None and outcome in ("passed", "failed"):
            # An xfail record whose check now passes: strict makes it a failure, warn mode a pass.
            result = CheckOutcome(nodeid, capability, "stale_record", wasxfail)
        elif outcome == "failed" or "XPASS(strict)" in longrepr:
            stale = "XPASS(strict)" in longrepr
            result = CheckOutcome(nodeid, capability, "stale_record" if stale else "failed", _first_line(longrepr))
        elif outcome == "skipped":
            result = CheckOutcome(nodeid, capability, "skipped", _skip_reason(longrepr))
        elif when == "call":
            result = CheckOutcome(nodeid, capability, "passed")
        else:
            return
        result.covers = covers
        # A teardown error after a pass still fails the check; a later pass never hides a failure.
        if previous is not None and previous.outcome in ("failed", "stale_record") and result.outcome == "passed":
            return
        self.outcomes[nodeid] = result

    def _keep_for_bundle(self, nodeid: str, properties: list[tuple[str, Any]]) -> None:
        for key, value in properties:
            if key == RATE_PROPERTY:
                self.rates.append({**json.loads(value), "check": nodeid})
            elif key == CELLS_PROPERTY:
                self.cells += [{**cell, "check": nodeid} for cell in json.loads(value)]

    def counts_by_capability(self) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for item in self.outcomes.values():
            row = table.setdefault(item.capability, {k: 0 for k in
                                                     ("passed", "failed", "known_defect", "stale_record", "skipped")})
            row[item.outcome] += 1
        order = {name: index for index, name in enumerate(GROUP_MARKERS + ("other",))}
        return dict(sorted(table.items(), key=lambda kv: order.get(kv[0], 99)))

    def _by(self, outcome: str) -> list[CheckOutcome]:
        return [item for item in self.outcomes.values() if item.outcome == outcome]

    @property
    def executed(self) -> int:
        """Checks that ran to a verdict (not skipped)."""
        return sum(1 for item in self.outcomes.values() if item.outcome != "skipped")

    def capability_rows(self) -> list[CapabilityRow]:
        rows = coverage_rows(self.plans, ((i.covers, i.outcome, i.reason) for i in self.outcomes.values()),
                             self.allow_untested)
        return _with_shortfalls(rows, self.shortfalls_seen())

    def shortfalls_seen(self) -> list[tuple[Shortfall, list[CheckOutcome]]]:
        """The shortfalls whose checks this run collected (run or skipped), each with those checks."""
        seen = []
        for shortfall in self.shortfalls:
            checks = [i for i in self.outcomes.values() if shortfall.concerns(i.nodeid, i.capability)]
            if checks:
                seen.append((shortfall, checks))
        return seen

    def shortfall_entries(self) -> list[dict[str, Any]]:
        """gate.json's ``shortfalls``: each with its checks and how they read at the size they ran at."""
        return [{**shortfall.as_dict(),
                 "checks": [{"id": i.nodeid, "outcome": i.outcome, "result": shortfall.check_result(i.outcome)}
                            for i in checks]}
                for shortfall, checks in self.shortfalls_seen()]

    def gate_failures(self) -> list[str]:
        """Why the gate fails beyond failed checks: nothing ran, a required capability untested."""
        reasons = [row.coverage_failure for row in self.capability_rows() if row.coverage_failure]
        if not self.executed and not (self.interrupted or self.engine_unavailable):
            reasons.insert(0, f"no check ran ({len(self.outcomes)} collected, all skipped or none selected): "
                              "a run that tested nothing is not a pass")
        return reasons

    @property
    def passed(self) -> bool:
        if self.interrupted or self.engine_unavailable:
            return False
        if self._by("failed") or self.gate_failures():
            return False
        return not (self.stale_records_fail and self._by("stale_record"))

    def verdict(self) -> dict[str, Any]:
        totals = {k: len(self._by(k)) for k in ("passed", "failed", "known_defect", "stale_record", "skipped")}
        return {
            "gate": "pass" if self.passed else "fail",
            "gate_failures": self.gate_failures(),
            "interrupted": self.interrupted,
            "engine_unavailable": self.engine_unavailable,
            "totals": totals,
            "capabilities": [row.as_dict() for row in self.capability_rows()],
            "engine_facts": self.engine_facts,
            "figures": self.figures,
            "shortfalls": self.shortfall_entries(),
            "baselines": list(self.baselines.values()),
            "by_capability": self.counts_by_capability(),
            "failing_checks": [{"id": i.nodeid, "reason": i.reason} for i in self._by("failed")],
            "stale_records": [{"id": i.nodeid, "record": i.reason} for i in self._by("stale_record")],
            "known_defects": [{"id": i.nodeid, "record": i.reason} for i in self._by("known_defect")],
            "skipped": [{"id": i.nodeid, "reason": i.reason} for i in self._by("skipped")],
            "stale_records_policy": "fail" if self.stale_records_fail else "warn",
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def write(self, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {**self.verdict(), **(extra or {})}
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
        tmp.replace(target)  # never leave a half-written verdict for a pipeline to read
        return target

    def table_lines(self) -> list[str]:
        header = f"{'capability':<20}{'passed':>8}{'failed':>8}{'known':>8}{'stale':>8}{'skipped':>9}"
        lines = [header, "-" * len(header)]
        for capability, row in self.counts_by_capability().items():
            lines.append(f"{capability:<20}{row['passed']:>8}{row['failed']:>8}{row['known_defect']:>8}"
                         f"{row['stale_record']:>8}{row['skipped']:>9}")
        reasons = sorted({item.reason for item in self._by("skipped") if item.reason})
        for reason in reasons[:8]:
            lines.append(f"  skipped: {reason}")
        for item in self._by("stale_record"):
            lines.append(f"  STALE RECORD (the defect seems fixed): {item.nodeid}")
        lines += self.capability_table_lines()
        lines += self.shortfall_lines()
        lines += self.baseline_lines()
        for reason in self.gate_failures():
            lines.append(f"  GATE FAILURE: {reason}")
        state = "PASS" if self.passed else "FAIL"
        why = self.interrupted or self.engine_unavailable or ""
        lines.append(f"GATE: {state}{' (' + why + ')' if why else ''}")
        return lines

    def baseline_lines(self) -> list[str]:
        """One line per baseline gated on: what the comparison is, and whose the baseline is."""
        return [f"  baseline ({entry.get('kind')}): {entry.get('comparison')}, {entry.get('path')}: "
                f"{describe(entry.get('provenance'))}" for entry in self.baselines.values()]

    def capability_table_lines(self) -> list[str]:
        rows = self.capability_rows()
        if not rows:
            return []
        # The discovered column is as wide as its longest word ("not served (stated)" is 19 characters).
        width = max(12, *(len(row.discovered) + 2 for row in rows))
        header = (f"{'capability':<20}{'declared':<10}{'discovered':<{width}}{'required':<10}"
                  f"{'ran':>5}{'skipped':>9}  result")
        lines = ["", header, "-" * len(header)]
        for row in rows:
            discovered = row.discovered.replace('_', ' ')
            lines.append(f"{row.name:<20}{'yes' if row.declared else 'no':<10}{discovered:<{width}}"
                         f"{'yes' if row.required else '-':<10}{row.ran:>5}{row.skipped:>9}  {_cell(row.result)}")
        return lines + [f"  {fact}" for fact in self.engine_facts]

    def shortfall_lines(self) -> list[str]:
        """A line per shortfall: what ran smaller, why, and how its checks read at that size."""
        lines = []
        for shortfall, checks in self.shortfalls_seen():
            counts: dict[str, int] = {}
            for item in checks:
                counts[item.outcome] = counts.get(item.outcome, 0) + 1
            results = ", ".join(f"{count} {shortfall.check_result(outcome)}" for outcome, count in counts.items())
            lines.append(f"  SHORTFALL ({shortfall.capability}): {shortfall.summary} "
                         f"[{shortfall.reason()}]; checks: {results}")
        return lines


def _with_shortfalls(rows: list[CapabilityRow],
                     seen: list[tuple[Shortfall, list[CheckOutcome]]]) -> list[CapabilityRow]:
    """Each row's result followed by the shortfalls of its capability: "passed; recall at 7,000 of 32,768 ..."."""
    notes: dict[str, list[str]] = {}
    for shortfall, _ in seen:
        notes.setdefault(shortfall.capability, []).append(shortfall.summary)
    return [dataclasses.replace(row, result="; ".join([row.result, *notes[row.name]])) if row.name in notes else row
            for row in rows]


def _cell(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _figure(value: Any) -> Any:
    """A recorded property as JSON: the checks record numbers, or JSON documents as text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("E "):
            return line[2:].strip()[:600]  # room for a record mismatch: the record and the real failure
    return (text.strip().splitlines() or [""])[-1][:300]


def _skip_reason(longrepr: str) -> str:
    # Skip reprs look like "('path', line, 'Skipped: reason')".
    marker = "Skipped: "
    return longrepr.split(marker, 1)[1].rstrip("')\"") if marker in longrepr else longrepr[:300]
