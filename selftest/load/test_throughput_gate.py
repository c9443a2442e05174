"""The throughput gate and options, without an engine: thresholds, tolerances, baseline, shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_acceptance.load.metrics import RoundSummary, summarize_cell
from engine_acceptance.load.closed_loop.gate import (
    Baseline,
    GateError,
    check_thresholds,
    compare_with_baseline,
    nothing_compared,
    parse_threshold,
    parse_tolerance,
)
from engine_acceptance.load.closed_loop.settings import SettingsError, full_matrix, select_cells, settings_from_options
from engine_acceptance.provenance import AGAINST_ITSELF, UNKNOWN, comparison, provenance_of
from engine_acceptance.wire.readiness import EngineInfo


def cell(key: str = "128/128@4", **medians: float):
    rounds = [RoundSummary(requests=4, completed=4, wall_s=1.0, output_tokens=512, errors_by_kind={},
                           metrics=dict(medians))]
    return summarize_cell(key, rounds)


def test_thresholds_apply_to_their_cell_and_name_metric_value_and_limit() -> None:
    summary = cell(output_tok_s=90.0, p95_ttft_ms=450.0)
    thresholds = [parse_threshold("p95_ttft_ms<=500"), parse_threshold("128/128@4:output_tok_s>=100"),
                  parse_threshold("128/128@8:output_tok_s>=1e9")]
    assert check_thresholds(summary, thresholds) == [
        "128/128@4: output_tok_s is 90 tok/s (median of rounds), threshold >= 100 tok/s (command line)"]


@pytest.mark.parametrize("text", ["p95_ttft_ms<500", "speed>=1", "p95_ttft_ms<=fast", ""])
def test_malformed_thresholds_are_refused_with_the_text(text: str) -> None:
    with pytest.raises(GateError, match="threshold|metric"):
        parse_threshold(text)


def test_tolerances_parse_with_or_without_percent_sign() -> None:
    assert parse_tolerance("p95_ttft_ms=20%") == ("p95_ttft_ms", 20.0)
    assert parse_tolerance("output_tok_s=7.5") == ("output_tok_s", 7.5)
    with pytest.raises(GateError):
        parse_tolerance("output_tok_s")


def test_baseline_round_trips_and_fails_only_regressions_beyond_their_tolerance(tmp_path: Path) -> None:
    before = cell(output_tok_s=1000.0, p95_ttft_ms=100.0, p95_tpot_ms=10.0)
    path = Baseline.from_summaries([before], tolerances={"output_tok_s": 10.0, "p95_ttft_ms": 25.0},
                                   engine={"model": "m"}).save(tmp_path / "base.json")
    baseline = Baseline.load(path)
    assert baseline.tolerances == {"output_tok_s": 10.0, "p95_ttft_ms": 25.0}

    within = cell(output_tok_s=905.0, p95_ttft_ms=124.0, p95_tpot_ms=50.0)  # TPOT has no tolerance: not compared
    assert compare_with_baseline(within, baseline) == ([], [])
    faster = cell(output_tok_s=5000.0, p95_ttft_ms=1.0)
    assert compare_with_baseline(faster, baseline)[0] == [], "an improvement is not a regression"
    worse = cell(output_tok_s=800.0, p95_ttft_ms=130.0)
    violations, _ = compare_with_baseline(worse, baseline)
    assert violations == [
        f"128/128@4: output_tok_s 800 tok/s is 20.0% below the baseline 1000 tok/s (tolerance 10%, baseline {path})",
        f"128/128@4: p95_ttft_ms 130 ms is 30.0% above the baseline 100 ms (tolerance 25%, baseline {path})",
    ]
    overridden, _ = compare_with_baseline(worse, baseline, {"output_tok_s": 25.0, "p95_ttft_ms": 35.0})
    assert overridden == []
    _, notes = compare_with_baseline(cell("4096/128@8", output_tok_s=1.0), baseline)
    assert notes == [f"4096/128@8: not in the baseline {path}; not compared"]


def test_a_baseline_that_compares_nothing_fails_naming_what_it_holds_and_what_ran(tmp_path: Path) -> None:
    before = cell("128/128@4", output_tok_s=1000.0, p95_ttft_ms=100.0)
    baseline = Baseline.load(Baseline.from_summaries([before], tolerances={"output_tok_s": 10.0},
                                                     engine={}).save(tmp_path / "base.json"))
    # Another cell: nothing compared, a failure (it was a note and a pass before).
    message = nothing_compared([cell("512/64@1", output_tok_s=900.0)], baseline)
    assert message == (f"the baseline {tmp_path / 'base.json'} compared nothing in this check: it holds 128/128@4 "
                       "(output_tok_s); this run measured 512/64@1 (output_tok_s); a metric is compared when it has "
                       "a tolerance (output_tok_s) and both sides hold it for the same cell")
    # The same cell, but only a metric without a tolerance: nothing compared either.
    message = nothing_compared([cell("128/128@4", p95_ttft_ms=120.0)], baseline)
    assert message is not None and "this run measured 128/128@4 (none of the compared metrics, 1 other(s))" in message
    # One cell of several compared: the check compared something.
    assert nothing_compared([cell("512/64@1", output_tok_s=1.0), cell("128/128@4", output_tok_s=990.0)],
                            baseline) is None


def test_a_throughput_baseline_keeps_its_provenance_and_an_old_one_loads_without(tmp_path: Path) -> None:
    engine = EngineInfo(url="https://k:secret@gpu-1.internal:8443/v1", kind="sglang", kind_source="test",
                        version="0.5.1", model="qwen3-8b", models=["qwen3-8b"])
    provenance = provenance_of(engine)
    path = Baseline.from_summaries([cell(output_tok_s=1.0)], tolerances={"output_tok_s": 10.0}, engine={},
                                   provenance=provenance).save(tmp_path / "base.json")
    assert "secret" not in path.read_text(encoding="utf-8")
    loaded = Baseline.load(path)
    assert loaded.provenance == provenance and loaded.provenance["where"] == "https://gpu-1.internal:8443"
    assert comparison(loaded.provenance, engine) == AGAINST_ITSELF
    old = json.loads(path.read_text(encoding="utf-8"))
    del old["provenance"]
    path.write_text(json.dumps(old), encoding="utf-8")
    assert Baseline.load(path).provenance is None and comparison(None, engine) == UNKNOWN


@pytest.mark.parametrize("content", ["not json", json.dumps({"format": "other"}),
                                     json.dumps({"format": "engine-acceptance-throughput-baseline/1",
                                                 "cells": {}, "tolerances": {"speed": 1}})])
def test_a_bad_baseline_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(GateError, match="baseline file"):
        Baseline.load(path)


def test_shape_selection_knows_smoke_full_workloads_and_single_cells() -> None:
    assert [c.key for c in select_cells("smoke")] == ["128/128@1", "128/128@4"]
    assert [c.requests for c in select_cells("smoke")] == [4, 8]
    full = full_matrix()
    assert [c.key for c in select_cells("full")] == [c.key for c in full]
    assert {c.key for c in full} >= {"128/128@32", "4096/128@8", "16384/256@4", "128/2048@8", "8192/1024@16"}
    assert next(c for c in full if c.key == "128/128@32").requests == 128
    assert [c.key for c in select_cells("4096/128")] == ["4096/128@4", "4096/128@8"]
    custom = select_cells("128/128@4,4096/128@32x64,512/64@3")
    assert [(c.key, c.requests, c.warmup_requests) for c in custom] == [
        ("128/128@4", 16, 4), ("4096/128@32", 64, 32), ("512/64@3", 6, 3)]
    with pytest.raises(SettingsError, match="named twice"):
        select_cells("128/128@4x8,128/128@4x16")


def test_settings_name_the_option_that_is_wrong(tmp_path: Path) -> None:
    def settings(**overrides):
        options = dict(shapes="smoke", rounds=3, thresholds=(), tolerances=(), baseline=None, save=None, out=None)
        return settings_from_options(**{**options, **overrides})

    assert settings(save=str(tmp_path / "b.json")).save_path == tmp_path / "b.json"
    for overrides, option in [({"rounds": 0}, "--throughput-rounds"), ({"shapes": "fast"}, "--throughput-shapes"),
                              ({"thresholds": ["x>=1"]}, "--throughput-threshold"),
                              ({"tolerances": ["x=1"]}, "--throughput-tolerance"),
                              ({"baseline": str(tmp_path / "none.json")}, "--throughput-baseline"),
                              ({"out": str(tmp_path)}, "--throughput-out")]:
        with pytest.raises(SettingsError) as raised:
            settings(**overrides)
        assert raised.value.option == option and str(raised.value).startswith(option)


def test_each_kind_of_failed_request_is_a_problem_of_its_own() -> None:
    """A record for the cell's known HTTP 500s must not cover its timeouts: one problem per kind (issue 26)."""
    from types import SimpleNamespace

    from engine_acceptance.load.metrics import RequestRecord
    from engine_acceptance.load.closed_loop.validity import error_problems

    records = [RequestRecord(0.0, "http_500", "HTTP 500: {}"), RequestRecord(0.1, "http_500", "HTTP 500: {}"),
               RequestRecord(0.2, "timeout", "no byte for 60 s"),
               *(RequestRecord(0.3 + i, None, None) for i in range(5))]
    result = SimpleNamespace(cell=SimpleNamespace(key="128/128@1"), records=[records])
    assert error_problems(result) == ["128/128@1: 2/8 measured requests failed: http_500 x2 (e.g. HTTP 500: {})",
                                      "128/128@1: 1/8 measured requests failed: timeout x1 (e.g. no byte for 60 s)"]
