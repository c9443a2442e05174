"""Writes the run bundle at the end of every run: ``run-bundle/run.json`` (docs/diff.md).

One self-describing file per run, so that the next release can be compared with this one
without the old deployment (``engine-acceptance diff BASE NEW``): who was tested and how
(engine facts, the command line with the key redacted, the profiles with their hashes),
the verdict and the capability table, every check's outcome and figures, every rate as k
of n, every tool-call trigger confusion, and every load cell's per-request samples
(:mod:`engine_acceptance.run_bundle`). Written like ``gate.json``: whole or not at all.

A check is named as its records name it, ``module::test[param]`` (``check_id``): pytest's node
ids depend on where the suite is installed and where pytest was started, and two runs, one
from a release's virtualenv and one from the next's (or a checkout), must name a check alike.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from engine_acceptance import __version__
from engine_acceptance.profiles.expectations import check_id
from engine_acceptance.pytest_plugin import gate_json
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.reporting.json_file import write_json
from engine_acceptance.run_bundle import BUNDLE_FILE, BUNDLE_VERSION
from engine_acceptance.session import AcceptanceSession

__all__ = ["bundle_document", "write_bundle"]

# The verdict's fields a diff reads first (the rest of gate.json is in the checks and capabilities).
VERDICT_FIELDS = ("gate", "gate_failures", "totals", "interrupted", "engine_unavailable", "stale_records_policy")
# A figure holding these counts is a tool-call trigger confusion against a baseline (tool_accuracy).
CONFUSION_FIELDS = ("both_called", "only_candidate_called", "only_reference_called", "neither_called")


def _profile(profile: Any) -> dict[str, Any]:
    source = getattr(profile, "source", None)
    entry: dict[str, Any] = {"name": profile.name, "path": str(source) if source else None}
    if source is not None and Path(source).is_file():
        entry["sha256"] = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return entry


def _counted_figures(checks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rates (a figure with integer ``k`` and ``n``) and confusions the checks' figures already hold."""
    rates, confusions = [], []
    for check in checks:
        for name, value in check["figures"].items():
            if not isinstance(value, dict):
                continue
            if isinstance(value.get("k"), int) and isinstance(value.get("n"), int):
                rates.append({"name": name, "k": value["k"], "n": value["n"], "check": check["id"]})
            elif all(isinstance(value.get(field), int) for field in CONFUSION_FIELDS):
                confusions.append({"name": name, **{field: value[field] for field in CONFUSION_FIELDS},
                                   "check": check["id"]})
    return rates, confusions


def bundle_document(gate: GateCollector, state: AcceptanceSession | None, args: list[str],
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The bundle as one JSON-ready document."""
    verdict = gate_json.document(gate)
    checks = [{"id": check_id(item.nodeid), "group": item.capability, "outcome": item.outcome, "reason": item.reason,
               "covers": sorted(item.covers), "figures": gate.figures.get(item.nodeid, {})}
              for item in gate.outcomes.values()]
    rates, confusions = _counted_figures(checks)
    redact = state.redactor.text if state is not None else (lambda text: text)
    model_profile = state.declared_profile if state is not None else None
    return {
        "bundle_version": BUNDLE_VERSION,
        "suite_version": __version__,
        "written_at": verdict["written_at"],
        "engine": state.environment() if state is not None else {},
        "options": {"args": [redact(arg) for arg in args]},
        "profiles": ({"model": _profile(state.declared_profile), "engine": _profile(state.engine_profile)}
                     if state is not None else {}),
        "tolerances": dict(getattr(model_profile, "diff_tolerances", {}) or {}),
        "verdict": {name: verdict[name] for name in VERDICT_FIELDS},
        "capabilities": verdict["capabilities"],
        "checks": checks,
        "rates": rates + [{**rate, "check": check_id(rate["check"])} for rate in gate.rates],
        "confusions": confusions,
        "cells": [{**cell, "check": check_id(cell["check"])} for cell in gate.cells],
        **(extra or {}),
    }


def write_bundle(folder: str | Path, document: dict[str, Any]) -> Path:
    """``folder/run.json``, replaced whole (never half-written)."""
    return write_json(Path(folder) / BUNDLE_FILE, document)
