"""End to end: the throughput check run by pytest against reference engines.

The check passes on a clean engine and writes its table, chart, JSON and progress;
``early-eos`` fails it for the right reason; a saved baseline keeps its provenance,
passes an unchanged engine (a regression against itself, the gate says) and fails a
slower one, naming the metric and the tolerance; a baseline that holds none of the
run's cells fails it, naming both; a threshold it
misses fails it, the draft acceptance's too when ``spec-decode-rejects`` lowers it; bad option values stop the run with the option named; and it
refuses to share the engine. Pass/fail here never hangs on a wall-clock figure
except the baseline comparison, whose slower engine is three times slower and whose
tolerances are declared wide.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from suite_runner import NO_LATENCY, REPO, SMALLER_MEASUREMENTS, failed, run_suite

from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine

pytestmark = pytest.mark.e2e

PROFILE = REPO / "fixtures" / "profiles" / "models" / "reference.yaml"
CHECK = "test_throughput.py::test_fixed_length_load_is_served_in_full_and_passes_the_gate"
# -k: the fixed-length check alone (-m throughput also selects the media throughput, selftest/e2e/test_media_throughput_e2e.py).
SMALL = ("-m", "throughput", "-k", "not media", "--throughput-shapes", "128/128@2x4", "--throughput-rounds", "2")
# The built-in engine's latency for the whole default run: no wait to a first token and half a
# millisecond a token, not its model's 2 ms and 1 ms. Every functional check runs the same at
# 0,0 but cancellation's non-streamed pair, which gives up its requests after 1 s (contract.yaml)
# and needs them still generating then: 4,096 tokens at 0.5 ms take 2 s. The latency's waits
# were half of this run (the summed check times 37.9 s at 2,1, 19.8 s at 0,0.5, 16.3 s at 0,0).
CANCELLABLE_LATENCY = ("--reference-latency=0,0.5",)
CANCELLATION = "test_cancellation.py::test_"


def test_clean_engine_passes_and_reports_every_round_table_chart_and_progress(pytester: pytest.Pytester) -> None:
    out = pytester.path / "throughput.json"
    result, outcomes = run_suite(pytester, "-m", "throughput", "-k", "not media",
                                 "--throughput-shapes", "128/32@1x2,128/32@4x4",
                                 "--throughput-out", str(out), "--throughput-threshold", "spec_decode_acceptance>=0.5")
    assert result.ret == 0, result.stdout.str()[-3000:]
    # The engine's draft acceptance from its counters (0.8), and what it does not report, said so and not as 0.
    result.stdout.fnmatch_lines(["*cell*out tok/s*spec decode acceptance",
                                 "*128/32@4*4x3*[78]?.?%*",
                                 "*/v1/completions has no reasoning field*",
                                 "*Cached prompt tokens: not reported by the engine*"])
    assert outcomes == {f"{CHECK}[in128-out32]": "passed"}
    result.stdout.fnmatch_lines([
        "*throughput 128/32 concurrency 1 round 1/3: 2/2 requests done*",
        "*throughput 128/32 concurrency 4 round 3/3: 4/4 requests done*",
        "*128/32@4*4x3*",
    ])
    document = json.loads(out.read_text())
    assert [cell["key"] for cell in document["cells"]] == ["128/32@1", "128/32@4"]
    for cell in document["cells"]:
        rounds = cell["summary"]["rounds"]
        assert len(rounds) == 3 and all(r["metrics"]["p95_ttft_ms"] > 0 for r in rounds)
        assert cell["summary"]["metrics"]["output_tok_s"]["median"] > 0
        assert all(request["output_tokens"] == 32 for per_round in cell["requests"] for request in per_round)
    assert "linear" in document["definitions"]["percentiles"]
    attachments = [a for path in (pytester.path / "allure-results").glob("*-result.json")
                   for a in json.loads(path.read_text()).get("attachments", [])]
    kinds = {a["type"] for a in attachments if a["name"].startswith("throughput 128/32 tokens")}
    assert {"text/html", "image/png", "application/json"} <= kinds


def test_early_eos_fails_the_default_run_through_the_throughput_check_alone(pytester: pytest.Pytester) -> None:
    # The default command runs the measurements too: the defect fails that run, and no functional check.
    # Its own throughput cells catch it (128/128, output longer than the engine's natural 54-token reply),
    # and the check says why.
    result, outcomes = run_suite(pytester, "--inject", "early-eos", "-m", "not (recall or recall_1m)",
                                 *SMALLER_MEASUREMENTS, *CANCELLABLE_LATENCY)
    assert failed(outcomes) == {f"{CHECK}[in128-out128]"}, result.stdout.str()[-3000:]
    assert result.ret == 1
    for cell, requests in (("128/128@1", "4/4"), ("128/128@4", "8/8")):
        result.stdout.fnmatch_lines([f"*{cell}: output length not honored: asked 128 tokens with ignore_eos, got 54 "
                                     f"(usage.completion_tokens, finish_reason='stop') in {requests} requests*"])
    # At the lower latency the requests cancellation gives up were still generating when it did.
    cancelled = {test_id: outcome for test_id, outcome in outcomes.items() if test_id.startswith(CANCELLATION)
                 and test_id.endswith("[non-streamed]")}
    assert len(cancelled) == 2 and set(cancelled.values()) == {"passed"}, cancelled


def test_thresholds_missed_fail_the_check_naming_metric_limit_and_source(pytester: pytest.Pytester) -> None:
    """The command line's and the model profile's thresholds in one run: each missed one named with its source."""
    profile = pytester.path / "reference-with-slo.yaml"
    profile.write_text(PROFILE.read_text() + "throughput:\n  thresholds: ['128/128@2:output_tok_s>=1e9']\n")
    result, outcomes = run_suite(pytester, *SMALL, "--throughput-threshold", "128/128@2:output_tok_s>=1e9",
                                 "--throughput-threshold", "p50_ttft_ms<=1e6", "--profile", str(profile))
    assert failed(outcomes) == {f"{CHECK}[in128-out128]"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*128/128@2: output_tok_s is * tok/s (median of rounds), threshold >= 1e+09 tok/s "
                                 "(command line)*"])
    assert "p50_ttft_ms is" not in result.stdout.str()
    result.stdout.fnmatch_lines([f"*128/128@2: output_tok_s is * threshold >= 1e+09 tok/s (model profile {profile})*"])


def test_a_drop_in_draft_acceptance_misses_its_threshold_naming_the_figure(pytester: pytest.Pytester) -> None:
    # spec-decode-rejects: the replies are the same, a quarter as many draft tokens are accepted (0.8 -> 0.2).
    result, outcomes = run_suite(pytester, *SMALL, "--inject", "spec-decode-rejects",
                                 "--throughput-threshold", "spec_decode_acceptance>=0.5")
    assert failed(outcomes) == {f"{CHECK}[in128-out128]"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*128/128@2: spec_decode_acceptance is 0.2* share (median of rounds), threshold "
                                 ">= 0.5 share (command line)*"])


@pytest.fixture(scope="module")
def steady_engine() -> Iterator[RunningReferenceEngine]:
    # Latencies large against a noisy machine's jitter, so an unchanged engine repeats itself.
    with start_reference_engine(latency=LatencyModel(ttft_ms=100, tpot_ms=10), stream_chunk_tokens=1) as engine:
        yield engine


@pytest.fixture(scope="module")
def slower_engine() -> Iterator[RunningReferenceEngine]:
    with start_reference_engine(latency=LatencyModel(ttft_ms=100, tpot_ms=30), stream_chunk_tokens=1) as engine:
        yield engine


WIDE = ("--throughput-tolerance", "output_tok_s=30%", "--throughput-tolerance", "p95_ttft_ms=50%",
        "--throughput-tolerance", "p95_tpot_ms=30%", "--throughput-tolerance", "p95_e2e_ms=30%")


def test_baseline_passes_an_unchanged_engine_and_fails_a_slower_one_naming_metric_and_tolerance(
        pytester: pytest.Pytester, steady_engine: RunningReferenceEngine,
        slower_engine: RunningReferenceEngine) -> None:
    baseline = pytester.path / "baseline.json"
    # One wave of four requests per round (three rounds): the steady engine's figures repeat within
    # the wide tolerances, and the slower one's are 60% (output tok/s) and 200% (TPOT) off.
    shapes = ("-m", "throughput", "-k", "not media", "--throughput-shapes", "128/32@4x4")
    saved, outcomes = run_suite(pytester, *shapes, "--engine-url", steady_engine.url, *WIDE,
                                "--throughput-save", str(baseline))
    assert saved.ret == 0 and not failed(outcomes), saved.stdout.str()[-3000:]
    stored = json.loads(baseline.read_text())
    assert stored["tolerances"]["output_tok_s"] == 30.0 and "128/32@4" in stored["cells"]

    # Whose it is: the engine, version and model it was saved from, its host only, the suite's version.
    assert {key: stored["provenance"][key] for key in ("engine", "model", "where")} == {
        "engine": "vllm", "model": "reference-model", "where": steady_engine.url.rstrip("/")}, stored["provenance"]
    assert stored["provenance"]["suite_version"] and stored["provenance"]["recorded_at"]

    same, outcomes = run_suite(pytester, *shapes, "--engine-url", steady_engine.url,
                               "--throughput-baseline", str(baseline))
    assert same.ret == 0 and not failed(outcomes), same.stdout.str()[-3000:]
    # Saved from this same engine identity: the gate says it is a regression against itself.
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    assert [(b["kind"], b["comparison"]) for b in gate["baselines"]] == [("throughput", "regression against itself")]
    same.stdout.fnmatch_lines([f"*baseline (throughput): regression against itself, {baseline}: vllm *"])

    # The same engine and model recorded at another version: a regression across versions, naming both.
    running = stored["provenance"]["engine_version"]
    older = pytester.path / "older.json"
    older.write_text(json.dumps({**stored, "provenance": {**stored["provenance"], "engine_version": "0.0.1"}}),
                     encoding="utf-8")
    upgraded, outcomes = run_suite(pytester, *shapes, "--engine-url", steady_engine.url,
                                   "--throughput-baseline", str(older))
    assert upgraded.ret == 0 and not failed(outcomes), upgraded.stdout.str()[-3000:]
    across = f"the same engine and model at another version (0.0.1 → {running}): a regression across versions"
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    assert [(b["kind"], b["comparison"]) for b in gate["baselines"]] == [("throughput", across)]
    assert f"  baseline (throughput): {across}, {older}: vllm 0.0.1, model reference-model, " in upgraded.stdout.str()
    assert "against another engine" not in upgraded.stdout.str()

    slower, outcomes = run_suite(pytester, *shapes, "--engine-url", slower_engine.url,
                                 "--throughput-baseline", str(baseline))
    assert failed(outcomes) == {f"{CHECK}[in128-out32]"}, slower.stdout.str()[-3000:]
    slower.stdout.fnmatch_lines([
        "*128/32@4: output_tok_s * tok/s is *% below the baseline * tok/s (tolerance 30%*",
        "*128/32@4: p95_tpot_ms * ms is *% above the baseline * ms (tolerance 30%*",
    ])


def test_a_baseline_that_holds_no_cell_of_the_run_fails_naming_both(pytester: pytest.Pytester) -> None:
    """A baseline of other cells, from before provenance was kept: it compared nothing, so the check fails."""
    baseline = pytester.path / "other-cells.json"
    baseline.write_text(json.dumps({"format": "engine-acceptance-throughput-baseline/1", "created": "2026-11-30",
                                    "engine": {}, "tolerances": {"output_tok_s": 10.0},
                                    "cells": {"4096/128@8": {"output_tok_s": 500.0}}}), encoding="utf-8")
    result, outcomes = run_suite(pytester, "-m", "throughput", "-k", "not media", "--throughput-shapes", "128/32@1x2",
                                 "--throughput-rounds", "1", "--throughput-baseline", str(baseline))
    assert failed(outcomes) == {f"{CHECK}[in128-out32]"}, result.stdout.str()[-3000:]
    output = result.stdout.str()
    assert (f"the baseline {baseline} compared nothing in this check: it holds 4096/128@8 (output_tok_s); this run "
            "measured 128/32@1 (output_tok_s)") in output, output[-3000:]
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    assert [(b["kind"], b["comparison"], b["provenance"]) for b in gate["baselines"]] == [
        ("throughput", "provenance unknown", None)]


@pytest.mark.parametrize(("args", "message"), [
    (("--throughput-shapes", "128x128"), "--throughput-shapes: '128x128' is not smoke, full*"),
    (("--throughput-shapes", "999/1"), "--throughput-shapes: '999/1' is not a workload of the full matrix*"),
    (("--throughput-rounds", "0"), "--throughput-rounds: 0 must be at least 1"),
    (("--throughput-threshold", "speed>=1"), "--throughput-threshold: command line: unknown metric 'speed'*"),
    (("--throughput-tolerance", "p95_ttft_ms=lots"), "--throughput-tolerance: tolerance 'p95_ttft_ms=lots' is not*"),
    (("--throughput-baseline", "/nonexistent/base.json"),
     "--throughput-baseline: baseline file /nonexistent/base.json does not exist"),
    (("--throughput-out", "/nonexistent/dir/out.json"), "--throughput-out: '/nonexistent/dir/out.json': directory*"),
], ids=["shapes-syntax", "shapes-unknown-workload", "rounds", "threshold-metric", "tolerance", "baseline", "out"])
def test_bad_throughput_options_stop_the_run_naming_option_and_value(pytester: pytest.Pytester,
                                                                     args: tuple[str, ...], message: str) -> None:
    result, _ = run_suite(pytester, "-m", "throughput", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([f"*{message}"])


def test_throughput_under_xdist_runs_after_the_workers_alone_in_the_controller(pytester: pytest.Pytester) -> None:
    # The order is the point, not the figures: the engine without its latency, one round of two requests.
    result, outcomes = run_suite(pytester, "-m", "throughput or text", "-k", "not media and not recall",
                                 "--throughput-shapes", "128/32@2x2", "--throughput-rounds", "1", "-n", "2",
                                 *NO_LATENCY)
    assert outcomes[f"{CHECK}[in128-out32]"] == "passed", result.stdout.str()[-3000:]
    assert not failed(outcomes), result.stdout.str()[-3000:]
    out = result.stdout.str()
    # The functional checks ran on the workers first; the measurement came after them, announced.
    assert out.index("functional checks done; now 1 measurement(s) (throughput) run one at a time") < out.index(
        "128/32@2: 1 round(s) of 2 requests"), out[-3000:]
