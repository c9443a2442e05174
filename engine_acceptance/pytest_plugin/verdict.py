"""The release gate: what passed, what failed, what is known, per capability.

The collector sees every test report (on the controller, also under xdist) and
turns them into the verdict a release pipeline reads, which two modules render: a
short terminal table by check group and the capability table (declared, discovered,
required, tested, result) (:mod:`~engine_acceptance.pytest_plugin.gate_table`), and a
machine-readable ``gate.json`` (:mod:`~engine_acceptance.pytest_plugin.gate_json`)
with the figures the measurements recorded, every measurement that ran smaller than declared (its *shortfall*,
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

import ast
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from engine_acceptance.capabilities.plan import CapabilityPlan, coverage_rows
from engine_acceptance.capabilities.registry import GROUP_MARKERS, is_core_check
from engine_acceptance.profiles.expectations import check_id
from engine_acceptance.provenance import BASELINE_PROPERTY
from engine_acceptance.reporting.results import OUTCOME_KINDS, CapabilityRow, CheckOutcome
from engine_acceptance.shortfalls import TRIAL_KIND_PROPERTY, Shortfall
from engine_acceptance.run_bundle import CELLS_PROPERTY, RATE_PROPERTY

__all__ = ["COVERS_PROPERTY", "RECORDS_PROPERTY", "UNRECORDED_XFAIL", "GateCollector"]

# The user property (set at collection) naming the capabilities a check tests; any other
# user property a check records is a figure for gate.json.
COVERS_PROPERTY = "engine_acceptance.covers"
# The user property (set at collection) naming the expected-failure records that apply to a
# check: only an xfail of a check that carries it is a known defect (or, passing, a stale record).
RECORDS_PROPERTY = "engine_acceptance.records"
# How an expected failure no record produced reads: a user's xfail mark, pytest.xfail() in a check.
UNRECORDED_XFAIL = "an expected failure that no record describes"
# A failure is never replaced by a later phase's lesser outcome (a teardown xfail after a failed call).
_FAILURES = ("failed", "stale_record")


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
        recorded = bool(properties.pop(RECORDS_PROPERTY, ""))
        trial_kind = str(properties.pop(TRIAL_KIND_PROPERTY, ""))  # set at collection, like covers
        baseline = _figure(properties.pop(BASELINE_PROPERTY, None))
        if isinstance(baseline, dict):
            self.baselines[(str(baseline.get("kind")), str(baseline.get("path")))] = baseline
        if properties and when == "call":
            self.figures[nodeid] = {key: _figure(value) for key, value in properties.items()}
        previous = self.outcomes.get(nodeid)
        # Only a record makes an xfail a known defect, and a passing recorded check stale; any other
        # expected failure (a conftest's xfail mark, pytest.xfail() in a check) is what it is: a failure
        # (RecordHooks' neighbour UnrecordedXfailHooks already turned its report into one), or a pass.
        if wasxfail is not None and outcome == "skipped":
            result = (CheckOutcome(nodeid, capability, "known_defect", wasxfail) if recorded else
                      CheckOutcome(nodeid, capability, "failed", f"{UNRECORDED_XFAIL}: {wasxfail}"))
        elif wasxfail is not None and outcome in ("passed", "failed") and recorded:
            # An xfail record whose check now passes: strict makes it a failure, warn mode a pass.
            result = CheckOutcome(nodeid, capability, "stale_record", wasxfail)
        elif outcome == "failed" or "XPASS(strict)" in longrepr:
            stale = "XPASS(strict)" in longrepr and recorded
            result = CheckOutcome(nodeid, capability, "stale_record" if stale else "failed", _first_line(longrepr))
        elif outcome == "skipped":
            result = CheckOutcome(nodeid, capability, "skipped", _skip_reason(longrepr))
        elif when == "call":
            result = CheckOutcome(nodeid, capability, "passed")
        else:
            return
        result.covers = covers
        result.trial_kind = trial_kind
        result.core = frozenset(name for name in covers if is_core_check(name, check_id(nodeid)))
        # A teardown error after a pass still fails the check; no later phase (a pass, a skip, a teardown
        # that failed as a record describes) hides a failure.
        if previous is not None and previous.outcome in _FAILURES and result.outcome not in _FAILURES:
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
            row = table.setdefault(item.capability, {kind: 0 for kind in OUTCOME_KINDS})
            row[item.outcome] += 1
        order = {name: index for index, name in enumerate(GROUP_MARKERS + ("other",))}
        return dict(sorted(table.items(), key=lambda kv: order.get(kv[0], 99)))

    def by_outcome(self, outcome: str) -> list[CheckOutcome]:
        """The checks that ended as ``outcome`` (one of OUTCOME_KINDS), in the order they ran."""
        return [item for item in self.outcomes.values() if item.outcome == outcome]

    @property
    def executed(self) -> int:
        """Checks that ran to a verdict (not skipped)."""
        return sum(1 for item in self.outcomes.values() if item.outcome != "skipped")

    def capability_rows(self) -> list[CapabilityRow]:
        rows = coverage_rows(self.plans, self.outcomes.values(), self.allow_untested,
                             stale_warned=not self.stale_records_fail)
        return _with_shortfalls(rows, self.shortfalls_seen())

    def shortfalls_seen(self) -> list[tuple[Shortfall, list[CheckOutcome]]]:
        """The shortfalls whose checks this run collected (run or skipped; for a --trials cut, run), each with them."""
        seen = []
        for shortfall in self.shortfalls:
            checks = [i for i in self.outcomes.values()
                      if shortfall.concerns(i.nodeid, i.capability, trial_kind=i.trial_kind, outcome=i.outcome)]
            if checks:
                seen.append((shortfall, checks))
        return seen

    def shortfall_entries(self) -> list[dict[str, Any]]:
        """The shortfalls as gate.json and Allure's environment give them: each with its checks and how
        they read at the size they ran at."""
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
        if self.by_outcome("failed") or self.gate_failures():
            return False
        return not (self.stale_records_fail and self.by_outcome("stale_record"))


def _with_shortfalls(rows: list[CapabilityRow],
                     seen: list[tuple[Shortfall, list[CheckOutcome]]]) -> list[CapabilityRow]:
    """Each row's result followed by the shortfalls of its capability: "passed; recall at 7,000 of 32,768 ...".

    A --trials cut belongs to no one capability (kind ``image`` samples the image and the video
    checks): its note goes to each capability its checks that ran cover.
    """
    notes: dict[str, list[str]] = {}
    for shortfall, checks in seen:
        names = sorted(set().union(*(i.covers for i in checks))) if shortfall.trial_kind else [shortfall.capability]
        for name in names:
            notes.setdefault(name, []).append(shortfall.summary)
    return [dataclasses.replace(row, result="; ".join([row.result, *notes[row.name]])) if row.name in notes else row
            for row in rows]


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
    # Skip reprs look like "('path', line, 'Skipped: reason')": read as the tuple it is, so a reason that
    # ends in a quote or a parenthesis keeps it.
    marker = "Skipped: "
    try:
        text = str(ast.literal_eval(longrepr)[2])
    except (ValueError, SyntaxError, TypeError, IndexError):
        return longrepr.split(marker, 1)[1].rstrip("')\"") if marker in longrepr else longrepr[:300]
    return text.split(marker, 1)[1] if marker in text else text
