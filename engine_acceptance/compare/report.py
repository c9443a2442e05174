"""The engine comparison's tables, from the files each engine's runs left behind.

:mod:`engine_acceptance.compare.run` runs the suite once per engine and leaves, per
engine and phase, ``gate.json`` (counts by capability), ``junit.xml`` (every check's
outcome and its recorded figures: thinking counts and E2E, recall TTFT, media
throughput, the soak) and ``throughput.json`` (every round of the fixed-length
load). This module reads them (:func:`load_engine`) and renders the seeds' tables
with one column per engine (:func:`build_tables`): what each engine serves (the
verdicts' capability rows and engine facts), throughput per shape and concurrency,
media throughput, functional pass counts by capability, thinking modes, recall TTFT
and the soak, as Markdown, CSV and HTML, and an Allure result carrying them.

Each figure is the median of rounds with the rounds' min-max, as measured. Another
engine's figure is given as a ratio to the base engine's; when the two min-max
ranges overlap the note says so and no winner is claimed, and one value each (a
single request or round) claims none either.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine_acceptance.load.media.cells import CACHE_NOTE
from engine_acceptance.load.metrics import HIGHER_IS_BETTER
from engine_acceptance.reporting import allure_files, html, markdown
from engine_acceptance.reporting.csv_text import records_csv
from engine_acceptance.reporting.results import OUTCOME_KINDS, Spread
from engine_acceptance.reporting.table import Table, shorten

__all__ = [
    "ComparisonTable",
    "EngineResults",
    "build_tables",
    "compare_figures",
    "load_engine",
    "render_csv",
    "render_html",
    "render_markdown",
    "write_allure_result",
]

THROUGHPUT_METRICS = (
    ("output_tok_s", "output tok/s"),
    ("p95_ttft_ms", "P95 TTFT ms"),
    ("p95_tpot_ms", "P95 TPOT ms"),
    ("p95_e2e_ms", "P95 E2E ms"),
)
MEDIA_METRICS = (("request_per_s", "req/s"), ("p50_e2e_ms", "median E2E ms"))
# A figure's range in the comparison's tables: an en dash, as the seeds' tables wrote it.
RANGE_DASH = "–"


def _text(figure: Spread) -> str:
    return figure.text(RANGE_DASH)


def compare_figures(base: Spread, other: Spread, *, higher_is_better: bool, other_name: str,
                    base_name: str) -> tuple[float | None, str]:
    """``other / base`` and the note on it: overlapping ranges (or single values) claim no winner."""
    if base.median is None or other.median is None:
        return None, "not measured on both"
    ratio = other.median / base.median if base.median else None
    if base.count < 2 or other.count < 2:
        return ratio, "one value each: no range, no winner claimed"
    if base.min <= other.max and other.min <= base.max:  # type: ignore[operator]
        return ratio, "ranges overlap: no winner"
    other_better = (other.median > base.median) == higher_is_better
    return ratio, f"ranges apart: {other_name if other_better else base_name} better"


@dataclass
class EngineResults:
    """Everything one engine's runs left behind, read back."""

    name: str
    label: str
    facts: dict[str, str] = field(default_factory=dict)
    by_capability: dict[str, dict[str, int]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    # Test id -> why it ended as it did: the failure's first line, the skip reason, or the record's.
    reasons: dict[str, str] = field(default_factory=dict)
    properties: dict[str, dict[str, str]] = field(default_factory=dict)
    throughput: dict[str, dict[str, Any]] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    # The verdict's capability rows (name -> what discovery found and what ran) and the engine's facts
    # beside them (tokenize, metrics, context: the text after "name: "), from gate.json.
    serving: dict[str, str] = field(default_factory=dict)

    def property_rows(self, name: str) -> dict[str, str]:
        """Test id -> the value of property ``name``, for every check that recorded it."""
        return {nodeid: props[name] for nodeid, props in self.properties.items() if name in props}


def _reason(element: ET.Element) -> str:
    """The first line of a junit failure, error or skip message, without pytest's own prefixes."""
    message = (element.get("message") or element.text or "").strip()
    for prefix in ("Skipped: ", "AssertionError: ", "Failed: "):
        message = message.removeprefix(prefix)
    return message.splitlines()[0] if message else ""


def _junit(path: Path) -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, str]]:
    outcomes: dict[str, str] = {}
    properties: dict[str, dict[str, str]] = {}
    reasons: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        nodeid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        children = {child.tag: child for child in case}
        ended = children.get("failure", children.get("error", children.get("skipped")))
        if "failure" in children or "error" in children:
            outcome = "failed"
        elif "skipped" in children:
            outcome = "known_defect" if children["skipped"].get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        outcomes[nodeid] = outcome
        if ended is not None and _reason(ended):
            reasons[nodeid] = _reason(ended)
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        if props:
            properties[nodeid] = props
    return outcomes, properties, reasons


def load_engine(name: str, label: str, directory: Path, phases: Sequence[str],
                exit_codes: dict[str, int | None] | None = None) -> EngineResults:
    """Read ``directory/<phase>/{gate.json,junit.xml,throughput.json}`` of every phase that ran."""
    result = EngineResults(name, label, exit_codes=dict(exit_codes or {}))
    for phase in phases:
        folder = directory / phase
        gate_path, junit_path, throughput_path = (folder / "gate.json", folder / "junit.xml",
                                                  folder / "throughput.json")
        if gate_path.is_file():
            gate = json.loads(gate_path.read_text(encoding="utf-8"))
            result.facts = result.facts or dict(gate.get("engine") or {})
            result.serving = result.serving or _serving(gate)
            for capability, counts in (gate.get("by_capability") or {}).items():
                row = result.by_capability.setdefault(capability, {kind: 0 for kind in OUTCOME_KINDS})
                for kind in OUTCOME_KINDS:
                    row[kind] += int(counts.get(kind, 0))
        if junit_path.is_file():
            outcomes, properties, reasons = _junit(junit_path)
            result.outcomes.update(outcomes)
            result.reasons.update(reasons)
            result.properties.update(properties)
        if throughput_path.is_file():
            document = json.loads(throughput_path.read_text(encoding="utf-8"))
            for cell in document.get("cells", []):
                result.throughput[cell["key"]] = cell
    return result


@dataclass(frozen=True)
class ComparisonTable:
    """One of the comparison's tables, and its figures as long-format records for the CSV.

    A record is one engine's figure in one row (``median``, ``min``, ``max``, ``values``) or
    one engine's ratio to the base engine with its note; :data:`CSV_FIELDS` names them all.
    """

    table: Table
    records: tuple[dict[str, Any], ...] = ()


def _serving(gate: dict[str, Any]) -> dict[str, str]:
    """Capability -> "discovered: result" and fact -> its text, as the engine's verdict states them."""
    rows: dict[str, str] = {}
    for row in gate.get("capabilities") or []:
        discovered = str(row.get("discovered") or "-").replace("_", " ")
        result = str(row.get("result", "-"))
        # A row that is the probe's finding alone (tokenize) already begins with it.
        shown = discovered == "-" or result.startswith(f"{discovered}:")
        rows[row["name"]] = result if shown else f"{discovered}: {result}"
    for fact in gate.get("engine_facts") or []:
        name, _, text = fact.partition(": ")
        rows[name] = text
    return rows


def _ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _figure_table(title: str, metric: str, row_keys: Sequence[tuple[str, ...]],
                  row_header: Sequence[str], figures: dict[str, dict[tuple[str, ...], Spread]],
                  engines: Sequence[EngineResults], base: EngineResults,
                  notes: Sequence[str] = ()) -> ComparisonTable:
    """Rows of one metric: one column per engine, then each other engine's ratio to the base, then notes."""
    higher = metric in HIGHER_IS_BETTER
    others = [e for e in engines if e is not base]
    header = [*row_header, *(e.name for e in engines), *(f"{e.name} / {base.name}" for e in others), "note"]
    rows, records = [], []
    for key in row_keys:
        cells = {e.name: figures[e.name].get(key, Spread(None)) for e in engines}
        row = "@".join(key)
        for engine in engines:
            records.append(_figure_record(title, row, metric, engine.name, cells[engine.name]))
        ratios, remarks = [], []
        for other in others:
            ratio, remark = compare_figures(cells[base.name], cells[other.name], higher_is_better=higher,
                                            other_name=other.name, base_name=base.name)
            ratios.append(_ratio_text(ratio))
            remarks.append(remark if len(others) == 1 else f"{other.name}: {remark}")
            records.append({"table": title, "row": row, "metric": metric, "engine": other.name,
                            "base": base.name, "ratio_to_base": ratio, "note": remark})
        rows.append([*key, *(_text(cells[e.name]) for e in engines), *ratios, "; ".join(remarks)])
    return ComparisonTable(Table.of(title, header, rows, notes), tuple(records))


def _figure_record(title: str, row: str, metric: str, engine: str, figure: Spread) -> dict[str, Any]:
    """One engine's figure in one row, as a CSV record."""
    return {"table": title, "row": row, "metric": metric, "engine": engine,
            "median": figure.median, "min": figure.min, "max": figure.max, "values": figure.count}


def _cell_order(keys: Sequence[str]) -> list[str]:
    """Cell keys (``128/128@4``, ``image-512@4``) by first appearance of the workload, then concurrency."""
    order: dict[str, int] = {}
    for key in keys:
        order.setdefault(key.rsplit("@", 1)[0], len(order))
    return sorted(set(keys), key=lambda k: (order[k.rsplit("@", 1)[0]], int(k.rsplit("@", 1)[1])))


def _throughput_tables(engines: Sequence[EngineResults], base: EngineResults) -> list[ComparisonTable]:
    keys = _cell_order([key for e in engines for key in e.throughput])
    if not keys:
        return []
    tables = []
    for metric, label in THROUGHPUT_METRICS:
        figures = {e.name: {tuple(k.rsplit("@", 1)): Spread.from_dict(e.throughput[k]["summary"]["metrics"].get(metric))
                            for k in e.throughput} for e in engines}
        tables.append(_figure_table(
            f"Throughput, fixed length on /v1/completions: {label}", metric,
            [tuple(k.rsplit("@", 1)) for k in keys], ["input/output tokens", "concurrency"], figures, engines, base,
            notes=["Median of rounds [min–max across rounds]; per round P95 over that round's requests, never pooled."]))
    return tables


def _media_tables(engines: Sequence[EngineResults], base: EngineResults) -> list[ComparisonTable]:
    per_engine: dict[str, dict[str, dict[str, Any]]] = {}
    for engine in engines:
        cells: dict[str, dict[str, Any]] = {}
        for value in engine.property_rows("media_throughput").values():
            cells.update(json.loads(value))
        per_engine[engine.name] = cells
    keys = _cell_order([key for cells in per_engine.values() for key in cells])
    if not keys:
        return []
    tables = []
    for metric, label in MEDIA_METRICS:
        figures = {name: {tuple(k.rsplit("@", 1)): Spread.from_dict(cells[k].get(metric)) for k in cells}
                   for name, cells in per_engine.items()}
        tables.append(_figure_table(f"Media throughput, streamed chat: {label}", metric,
                                    [tuple(k.rsplit("@", 1)) for k in keys], ["input", "concurrency"], figures,
                                    engines, base, notes=[CACHE_NOTE]))
    return tables


def _count_text(counts: dict[str, int] | None) -> str:
    if not counts:
        return "-"
    ran = counts["passed"] + counts["failed"] + counts["known_defect"] + counts["stale_record"]
    text = f"{counts['passed']}/{ran}" if ran else "0/0"
    extras = [f"{counts[k]} {label}" for k, label in (("known_defect", "known"), ("stale_record", "stale"),
                                                       ("skipped", "skipped")) if counts[k]]
    return text + (f" ({', '.join(extras)})" if extras else "")


def _functional_table(engines: Sequence[EngineResults]) -> ComparisonTable | None:
    capabilities: list[str] = []
    for engine in engines:
        capabilities += [c for c in engine.by_capability if c not in capabilities]
    if not capabilities:
        return None
    title = "Checks passed by capability"
    notes = ["passed/ran; known = expected-failure records matched; skipped checks are not run "
             "(capability not in the model profile, or not selected)."]
    rows, records = [], []
    for capability in capabilities:
        counts = [e.by_capability.get(capability) for e in engines]
        same = "yes" if all(c == counts[0] for c in counts) else "no"
        rows.append([capability, *(_count_text(c) for c in counts), same])
        for engine, c in zip(engines, counts):
            records.append({"table": title, "row": capability, "metric": "checks", "engine": engine.name,
                            **{k: (c or {}).get(k, 0) for k in OUTCOME_KINDS}})
    ids = _check_ids(engines)
    differing = _differing(engines, ids)
    if differing:
        notes.append(f"{len(differing)} of {len(ids)} checks ended differently: each is in the table "
                     "\"Checks that ended differently\", with why.")
    elif ids:
        notes.append(f"Every one of the {len(ids)} checks ended the same way on every engine.")
    return ComparisonTable(Table.of(title, ["capability", *(e.name for e in engines), "same counts"], rows, notes),
                           tuple(records))


# The longest cell of the serving table: a verdict's "not tested: ..." reason runs on.
SERVING_CELL_CHARS = 90


def _serving_table(engines: Sequence[EngineResults]) -> ComparisonTable | None:
    """What each engine serves and what ran there: the verdicts' capability rows and engine facts side by side."""
    names: list[str] = []
    for engine in engines:
        names += [name for name in engine.serving if name not in names]
    if not names:
        return None
    title = "What each engine serves"
    rows, records = [], []
    for name in names:
        cells = [engine.serving.get(name, "-") for engine in engines]
        rows.append([name, *(shorten(cell, SERVING_CELL_CHARS) for cell in cells)])
        records += [{"table": title, "row": name, "metric": "served", "engine": engine.name, "note": cell}
                    for engine, cell in zip(engines, cells)]
    notes = ["Each engine's verdict: what capability discovery found (served, not served, broken) and what its "
             "checks did (tokenize: its probe's finding), then its facts: where its Prometheus gauges were read, "
             "its context."]
    return ComparisonTable(Table.of(title, ["capability or fact", *(e.name for e in engines)], rows, notes),
                           tuple(records))


def _check_ids(engines: Sequence[EngineResults]) -> list[str]:
    return sorted({nodeid for e in engines for nodeid in e.outcomes})


def _differing(engines: Sequence[EngineResults], ids: Sequence[str]) -> list[str]:
    return [nodeid for nodeid in ids if len({e.outcomes.get(nodeid, "not run") for e in engines}) > 1]


def _differences_table(engines: Sequence[EngineResults]) -> ComparisonTable | None:
    """Every check whose outcome differs between engines, each side with its reason.

    A difference is explained when its reason is a record of a known defect (known), a skip in
    the engine's or a profile's words, or a failure the gate counts: the reader sees which.
    """
    differing = _differing(engines, _check_ids(engines))
    if not differing:
        return None
    title = "Checks that ended differently"
    rows, records = [], []
    for nodeid in differing:
        cells = []
        for engine in engines:
            outcome = engine.outcomes.get(nodeid, "not run")
            label = {"known_defect": "known", "stale_record": "stale record"}.get(outcome, outcome)
            reason = engine.reasons.get(nodeid, "")
            cells.append(f"{label}: {shorten(reason, 220)}" if reason and outcome != "passed" else label)
            records.append({"table": title, "row": nodeid, "metric": "outcome", "engine": engine.name,
                            "note": f"{outcome}: {reason}" if reason else outcome})
        rows.append([nodeid.split("::", 1)[-1], *cells])
    notes = ["known = failed as an expected-failure record describes (its reason shown); skipped = not run, with the "
             "reason; failed = a failure the engine's gate counts."]
    return ComparisonTable(Table.of(title, ["check", *(e.name for e in engines)], rows, notes), tuple(records))


def _mode_of(nodeid: str) -> str:
    return nodeid.rsplit("[", 1)[-1].rstrip("]") if "[" in nodeid else nodeid.split("::")[-1]


def _thinking_table(engines: Sequence[EngineResults], base: EngineResults) -> ComparisonTable | None:
    by_mode: dict[str, dict[str, tuple[str, Spread]]] = {}
    for engine in engines:
        correct = engine.property_rows("thinking_correct")
        for nodeid, e2e in engine.property_rows("thinking_e2e_s").items():
            by_mode.setdefault(_mode_of(nodeid), {})[engine.name] = (
                correct.get(nodeid, "-"), Spread.of([float(v) for v in json.loads(e2e)]))
    if not by_mode:
        return None
    others = [e for e in engines if e is not base]
    title = "Thinking modes, the 240 question"
    header = ["mode", *(f"{e.name} correct" for e in engines), *(f"{e.name} E2E s" for e in engines),
              *(f"{e.name} / {base.name} E2E" for e in others), "note"]
    notes = ["E2E: median of the mode's requests [min–max]; wrong answers count in the time, as in seed 001."]
    rows, records = [], []
    for mode in sorted(by_mode, key=lambda m: ("disabled", "adaptive", "enabled").index(m)
                       if m in ("disabled", "adaptive", "enabled") else 9):
        cells = by_mode[mode]
        empty = ("-", Spread(None))
        for engine in engines:
            correct, figure = cells.get(engine.name, empty)
            records.append({**_figure_record(title, mode, "e2e_s", engine.name, figure), "correct": correct})
        ratios, remarks = [], []
        for other in others:
            ratio, remark = compare_figures(cells.get(base.name, empty)[1], cells.get(other.name, empty)[1],
                                            higher_is_better=False, other_name=other.name, base_name=base.name)
            ratios.append(_ratio_text(ratio))
            remarks.append(remark if len(others) == 1 else f"{other.name}: {remark}")
            records.append({"table": title, "row": mode, "metric": "e2e_s", "engine": other.name,
                            "base": base.name, "ratio_to_base": ratio, "note": remark})
        rows.append([mode, *(cells.get(e.name, empty)[0] for e in engines),
                     *(_text(cells.get(e.name, empty)[1]) for e in engines), *ratios, "; ".join(remarks)])
    return ComparisonTable(Table.of(title, header, rows, notes), tuple(records))


def _recall_table(engines: Sequence[EngineResults], base: EngineResults) -> ComparisonTable | None:
    figures = {e.name: {(nodeid.split("::", 1)[-1],): Spread(float(v)) for nodeid, v in
                        e.property_rows("ttft_s").items()} for e in engines}
    keys = sorted({key for per in figures.values() for key in per})
    if not keys:
        return None
    return _figure_table("Long-context recall: TTFT s (one streamed request per check)", "ttft_s", keys,
                         ["check"], figures, engines, base)


def _soak_table(engines: Sequence[EngineResults]) -> ComparisonTable | None:
    soaks = {}
    for engine in engines:
        values = list(engine.property_rows("soak").values())
        if values:
            soaks[engine.name] = json.loads(values[0])
    if not soaks:
        return None
    title = "Soak: mixed traffic observation window"
    rows, records = [], []
    for key, label in (("minutes_observed", "minutes observed"), ("requests", "requests"),
                       ("image_requests", "with an image"), ("failures", "failed"), ("p50_e2e_ms", "E2E median ms"),
                       ("p95_e2e_ms", "E2E P95 ms"), ("late_requests", "sent late (all workers busy)"),
                       ("rising_error_rate", "rising error rate"), ("ended_early", "ended early")):
        values = []
        for engine in engines:
            value = soaks.get(engine.name, {}).get(key)
            values.append("-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value))
            records.append({"table": title, "row": label, "metric": key, "engine": engine.name, "median": value})
        rows.append([label, *values])
    notes = ["An observation window per engine, as seed 001 kept it: not a capacity figure, and no winner is "
             "claimed."]
    return ComparisonTable(Table.of(title, ["figure", *(e.name for e in engines)], rows, notes), tuple(records))


def build_tables(engines: Sequence[EngineResults], base: EngineResults) -> list[ComparisonTable]:
    """Every table the runs have data for, in the seeds' order."""
    tables: list[ComparisonTable | None] = [_serving_table(engines), *_throughput_tables(engines, base),
                                  *_media_tables(engines, base), _functional_table(engines), _differences_table(engines),
                                  _thinking_table(engines, base),
                                  _recall_table(engines, base), _soak_table(engines)]
    return [t for t in tables if t is not None]


def _engines_table(engines: Sequence[EngineResults]) -> Table:
    rows = []
    for engine in engines:
        facts = engine.facts
        detected = f"{facts.get('engine.kind', '?')} {facts.get('engine.version', '')}".strip()
        runs = ", ".join(f"{phase} {code if code is not None else 'not run'}" for phase, code in engine.exit_codes.items())
        rows.append([engine.name, engine.label, detected, facts.get("model", "-"),
                     f"{facts.get('engine.profile', '-')} / {facts.get('model.profile', '-')}", runs or "-"])
    return Table.of("Engines", ["engine", "target", "detected", "model", "profiles (engine / model)",
                                "runs (exit code)"], rows)


def render_markdown(engines: Sequence[EngineResults], tables: Sequence[ComparisonTable], *, base: EngineResults,
                    request_set: Sequence[str]) -> str:
    lines = [f"# Engine comparison: {' vs '.join(e.name for e in engines)}", ""]
    lines += [f"- {item}" for item in request_set]
    lines += [f"- Ratios: each engine's median over {base.name}'s. When the two min–max ranges overlap, or there is "
              "one value each, no winner is claimed.", ""]
    for table in [_engines_table(engines), *(t.table for t in tables)]:
        lines += markdown.table_lines(table)
    return "\n".join(lines).rstrip() + "\n"


CSV_FIELDS = ("table", "row", "metric", "engine", "median", "min", "max", "values", "base", "ratio_to_base", "note",
              "correct", *OUTCOME_KINDS)


def render_csv(tables: Sequence[ComparisonTable]) -> str:
    """Long format: one line per table row, metric and engine (and one per ratio)."""
    return records_csv(CSV_FIELDS, (record for table in tables for record in table.records))


def render_html(engines: Sequence[EngineResults], tables: Sequence[ComparisonTable], *,
                request_set: Sequence[str]) -> str:
    fragments = [html.table_fragment(table) for table in [_engines_table(engines), *(t.table for t in tables)]]
    return html.page(f"Engine comparison: {' vs '.join(e.name for e in engines)}", fragments, lead=request_set)


def write_allure_result(alluredir: Path, *, title: str, files: dict[str, tuple[str, str]],
                        description_html: str, status: str, started_ms: int) -> Path:
    """The comparison as one Allure test result named ``title`` carrying ``files`` (name -> (text, MIME type))."""
    return allure_files.write_result(
        alluredir, name=title, full_name="engine_acceptance.compare", history_id="engine-acceptance-comparison",
        labels=[{"name": "feature", "value": "comparison"}, {"name": "suite", "value": "engine comparison"}],
        files=files, description_html=description_html, status=status, started_ms=started_ms)
