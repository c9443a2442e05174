"""The throughput gate: absolute thresholds and a comparison with a saved baseline.

Both are declarative and compare a cell's **median of rounds** for a metric:

- a threshold ``[CELL:]METRIC<=VALUE`` or ``>=`` (``p95_ttft_ms<=500``,
  ``128/128@4:output_tok_s>=100``), from the command line or the model profile;
- a baseline file (JSON, written by ``--throughput-save``) holds each cell's medians
  and the tolerances declared when it was saved; ``--throughput-tolerance
  METRIC=PCT`` overrides them. A metric regresses when it is worse than the
  baseline by more than its tolerance: lower for ``output_tok_s``, higher for
  latencies. Only metrics with a declared tolerance are compared. A baseline that
  compares nothing in a check (none of its cells and metrics is among the run's) fails
  it (:func:`nothing_compared`): a gate that compared nothing is not a pass. The file
  keeps its provenance (``engine_acceptance.provenance``); one saved before provenance
  was kept loads as "provenance unknown".

Every violation is one sentence naming the cell, the metric, both values and the
limit, so a failed gate says what to look at.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine_acceptance.load.metrics import HIGHER_IS_BETTER, METRIC_UNITS, CellSummary
from engine_acceptance.errors import UsageError
from engine_acceptance.provenance import read_provenance

__all__ = [
    "BASELINE_FORMAT",
    "Baseline",
    "DEFAULT_TOLERANCES",
    "GateError",
    "Threshold",
    "compare_with_baseline",
    "compared_metrics",
    "check_thresholds",
    "nothing_compared",
    "parse_threshold",
    "parse_tolerance",
]

BASELINE_FORMAT = "engine-acceptance-throughput-baseline/1"
# Percent a median may worsen before the gate fails. Tail latencies of a few
# requests per round move more between runs than medians of throughput do.
DEFAULT_TOLERANCES: dict[str, float] = {
    "output_tok_s": 10.0,
    "p95_ttft_ms": 25.0,
    "p95_tpot_ms": 15.0,
    "p95_e2e_ms": 15.0,
}

_THRESHOLD = re.compile(r"^\s*(?:(?P<cell>[^:]+):)?(?P<metric>[a-z0-9_]+)\s*(?P<op><=|>=)\s*(?P<value>[-+0-9.eE]+)\s*$")
_TOLERANCE = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)\s*=\s*(?P<pct>[0-9.eE+]+)\s*%?\s*$")


class GateError(UsageError):
    """A threshold, tolerance or baseline file that cannot be used, with what is wrong."""


def _unit(metric: str) -> str:
    return METRIC_UNITS.get(metric, "")


def _known_metric(metric: str, where: str) -> None:
    if metric not in METRIC_UNITS:
        raise GateError(f"{where}: unknown metric {metric!r}; known: {', '.join(sorted(METRIC_UNITS))}")


@dataclass(frozen=True)
class Threshold:
    """``cell`` None applies to every cell."""

    metric: str
    op: str
    limit: float
    cell: str | None = None
    source: str = "command line"

    def applies_to(self, key: str) -> bool:
        return self.cell is None or self.cell == key

    def violation(self, summary: CellSummary) -> str | None:
        value = summary.median(self.metric)
        unit = _unit(self.metric)
        if value is None:
            return f"{summary.key}: {self.metric} was not measured (no successful request), limit {self.op} " \
                   f"{self.limit:g} {unit} ({self.source})"
        ok = value <= self.limit if self.op == "<=" else value >= self.limit
        if ok:
            return None
        return (f"{summary.key}: {self.metric} is {value:.4g} {unit} (median of rounds), threshold "
                f"{self.op} {self.limit:g} {unit} ({self.source})")

    def __str__(self) -> str:
        return f"{self.cell + ':' if self.cell else ''}{self.metric}{self.op}{self.limit:g}"


def parse_threshold(text: str, *, source: str = "command line") -> Threshold:
    match = _THRESHOLD.match(text)
    if not match:
        raise GateError(f"{source}: threshold {text!r} is not [CELL:]METRIC<=VALUE or [CELL:]METRIC>=VALUE "
                        f"(e.g. p95_ttft_ms<=500, 128/128@4:output_tok_s>=100)")
    _known_metric(match["metric"], source)
    try:
        limit = float(match["value"])
    except ValueError:
        raise GateError(f"{source}: threshold {text!r}: {match['value']!r} is not a number") from None
    cell = match["cell"].strip() if match["cell"] else None
    return Threshold(match["metric"], match["op"], limit, cell, source)


def parse_tolerance(text: str) -> tuple[str, float]:
    match = _TOLERANCE.match(text)
    if not match:
        raise GateError(f"tolerance {text!r} is not METRIC=PERCENT (e.g. p95_ttft_ms=20%)")
    _known_metric(match["metric"], "tolerance")
    try:
        pct = float(match["pct"])
    except ValueError:
        raise GateError(f"tolerance {text!r}: {match['pct']!r} is not a number") from None
    if pct < 0:
        raise GateError(f"tolerance {text!r} must not be negative")
    return match["metric"], pct


def check_thresholds(summary: CellSummary, thresholds: Iterable[Threshold]) -> list[str]:
    """One sentence per violated threshold that applies to this cell."""
    return [v for t in thresholds if t.applies_to(summary.key) and (v := t.violation(summary)) is not None]


@dataclass
class Baseline:
    """Saved medians per cell, and the tolerances declared with them."""

    cells: dict[str, dict[str, float]]
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    engine: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    path: Path | None = None
    # engine_acceptance.provenance.provenance_of at save time; None in a file saved before it was kept.
    provenance: dict[str, Any] | None = None

    @classmethod
    def load(cls, path: str | Path) -> "Baseline":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise GateError(f"baseline file {path} does not exist") from None
        except (OSError, ValueError) as exc:
            raise GateError(f"baseline file {path} is not readable JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
            raise GateError(f"baseline file {path} is not a {BASELINE_FORMAT} file (write one with --throughput-save)")
        cells = data.get("cells")
        tolerances = data.get("tolerances", {})
        if not isinstance(cells, dict) or not isinstance(tolerances, dict):
            raise GateError(f"baseline file {path}: 'cells' and 'tolerances' must be objects")
        for metric, pct in tolerances.items():
            _known_metric(metric, f"baseline file {path} tolerances")
            if not isinstance(pct, (int, float)) or pct < 0:
                raise GateError(f"baseline file {path}: tolerance of {metric} must be a non-negative number")
        for key, metrics in cells.items():
            if not isinstance(metrics, dict) or not all(
                    isinstance(v, (int, float)) or v is None for v in metrics.values()):
                raise GateError(f"baseline file {path}: cell {key!r} must map metric names to numbers")
        return cls(cells=cells, tolerances={k: float(v) for k, v in tolerances.items()},
                   engine=data.get("engine", {}), created=data.get("created", ""), path=path,
                   provenance=read_provenance(data.get("provenance")))

    @classmethod
    def from_summaries(cls, summaries: Iterable[CellSummary], *, tolerances: Mapping[str, float],
                       engine: Mapping[str, Any], provenance: Mapping[str, Any] | None = None) -> "Baseline":
        cells = {s.key: {name: spread.median for name, spread in s.metrics.items() if spread.median is not None}
                 for s in summaries}
        return cls(cells=cells, tolerances=dict(tolerances), engine=dict(engine),
                   created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   provenance=dict(provenance) if provenance is not None else None)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        data = {"format": BASELINE_FORMAT, "created": self.created, "engine": self.engine,
                "tolerances": self.tolerances, "cells": self.cells,
                **({"provenance": self.provenance} if self.provenance is not None else {})}
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path


def compare_with_baseline(summary: CellSummary, baseline: Baseline,
                          tolerances: Mapping[str, float] | None = None) -> tuple[list[str], list[str]]:
    """(violations, notes) for one cell: each regression beyond its tolerance, and what was not compared."""
    declared = {**baseline.tolerances, **(tolerances or {})}
    saved = baseline.cells.get(summary.key)
    where = f"baseline {baseline.path}" if baseline.path else "baseline"
    if saved is None:
        return [], [f"{summary.key}: not in the {where}; not compared"]
    violations, notes = [], []
    for metric, pct in sorted(declared.items()):
        before, now = saved.get(metric), summary.median(metric)
        unit = _unit(metric)
        if before is None or now is None:
            notes.append(f"{summary.key}: {metric} missing in the {'baseline' if before is None else 'run'}; "
                         f"not compared")
            continue
        if before == 0:
            notes.append(f"{summary.key}: {metric} is 0 in the baseline; not compared")
            continue
        change = (now - before) / abs(before) * 100.0
        worse = -change if metric in HIGHER_IS_BETTER else change
        if worse > pct:
            direction = "below" if metric in HIGHER_IS_BETTER else "above"
            violations.append(
                f"{summary.key}: {metric} {now:.4g} {unit} is {abs(change):.1f}% {direction} the baseline "
                f"{before:.4g} {unit} (tolerance {pct:g}%, {where})")
    return violations, notes


def compared_metrics(summary: CellSummary, baseline: Baseline,
                     tolerances: Mapping[str, float] | None = None) -> list[str]:
    """The metrics of this cell that the baseline comparison judges: declared, in both, not 0 in the baseline."""
    declared = {**baseline.tolerances, **(tolerances or {})}
    saved = baseline.cells.get(summary.key) or {}
    return [metric for metric in sorted(declared)
            if saved.get(metric) not in (None, 0) and summary.median(metric) is not None]


def nothing_compared(summaries: Iterable[CellSummary], baseline: Baseline,
                     tolerances: Mapping[str, float] | None = None) -> str | None:
    """The failure when no cell and metric of a check was compared with the baseline, naming both sides; else None."""
    summaries = list(summaries)
    if any(compared_metrics(summary, baseline, tolerances) for summary in summaries):
        return None
    declared = set(baseline.tolerances) | set(tolerances or {})
    held = "; ".join(f"{key} ({_among(metrics, declared)})" for key, metrics in sorted(baseline.cells.items()))
    measured = "; ".join(f"{s.key} ({_among([m for m, v in s.metrics.items() if v.median is not None], declared)})"
                         for s in summaries)
    where = f"baseline {baseline.path}" if baseline.path else "baseline"
    return (f"the {where} compared nothing in this check: it holds {held or 'no cell'}; this run measured "
            f"{measured or 'no cell'}; a metric is compared when it has a tolerance "
            f"({', '.join(sorted(declared)) or 'none'}) and both sides hold it for the same cell")


def _among(names: Iterable[str], declared: set[str]) -> str:
    """The compared metrics among ``names``, or how many others there are."""
    names = set(names)
    shown = sorted(names & declared)
    return ", ".join(shown) if shown else f"none of the compared metrics, {len(names)} other(s)"
