"""``gate.json``: the gate's verdict as the one JSON document a release pipeline reads.

:class:`~engine_acceptance.pytest_plugin.verdict.GateCollector` decides (what passed, what
failed, what was covered); this module is the document's shape and its writing, as
:mod:`~engine_acceptance.pytest_plugin.gate_table` is the terminal's. A new field of the
verdict is added here once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.reporting.json_file import write_json
from engine_acceptance.reporting.results import OUTCOME_KINDS

__all__ = ["document", "write"]


def document(gate: GateCollector) -> dict[str, Any]:
    """The verdict: pass or fail and why, the counts, the capability rows, figures, shortfalls, baselines."""
    return {
        "gate": "pass" if gate.passed else "fail",
        "gate_failures": gate.gate_failures(),
        "interrupted": gate.interrupted,
        "engine_unavailable": gate.engine_unavailable,
        "totals": {kind: len(gate.by_outcome(kind)) for kind in OUTCOME_KINDS},
        "capabilities": [row.as_dict() for row in gate.capability_rows()],
        "engine_facts": gate.engine_facts,
        "figures": gate.figures,
        "shortfalls": gate.shortfall_entries(),
        "baselines": list(gate.baselines.values()),
        "by_capability": gate.counts_by_capability(),
        "failing_checks": [{"id": i.nodeid, "reason": i.reason} for i in gate.by_outcome("failed")],
        "stale_records": [{"id": i.nodeid, "record": i.reason} for i in gate.by_outcome("stale_record")],
        "known_defects": [{"id": i.nodeid, "record": i.reason} for i in gate.by_outcome("known_defect")],
        "skipped": [{"id": i.nodeid, "reason": i.reason} for i in gate.by_outcome("skipped")],
        "stale_records_policy": "fail" if gate.stale_records_fail else "warn",
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write(gate: GateCollector, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """The document (with ``extra`` fields: the engine, the discovery) written to ``path`` at once."""
    return write_json(path, {**document(gate), **(extra or {})}, indent=2)
