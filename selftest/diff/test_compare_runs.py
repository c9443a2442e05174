"""Two bundles compared: what matches is compared, the rest is listed, and news comes first.

Synthetic bundles (selftest/diff/diff_bundles.py): two clean runs differ by noise only and
show no significant change; a 30% slower cell is a significant regression; a check that
fails now comes before any performance finding; a stale record is "fixed"; cells of another
shape or request set are "not compared", with why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from diff_bundles import CHECK_IDS, bundle, cell, check

from engine_acceptance.diff.bundle import Bundle
from engine_acceptance.diff.compare_runs import (
    CHANGE,
    CHECKS,
    IMPROVEMENT,
    PERFORMANCE,
    RATES,
    REGRESSION,
    SECTIONS,
    UNCHANGED,
    VERDICT,
    DiffReport,
    Tolerances,
    compare_bundles,
)


def diff(base: dict[str, Any], new: dict[str, Any], **options: Any) -> DiffReport:
    return compare_bundles(Bundle(Path("base/run.json"), base), Bundle(Path("new/run.json"), new), **options)


def test_two_clean_runs_show_no_significant_change_anywhere() -> None:
    report = diff(bundle(1), bundle(2))
    assert report.findings and all(f.kind == UNCHANGED and not f.significant for f in report.findings)
    assert {f.section for f in report.findings} == {PERFORMANCE, RATES}
    assert not report.not_compared


def test_a_30_percent_slower_cell_is_a_significant_ttft_and_tpot_regression_with_intervals() -> None:
    report = diff(bundle(1), bundle(2, cells=[cell(2, slower=1.3)]))
    latencies = [f for f in report.of(PERFORMANCE) if "TTFT" in f.metric or "TPOT" in f.metric]
    assert len(latencies) == 8
    for finding in latencies:
        assert finding.kind == REGRESSION and finding.significant, finding
        assert 0 < finding.low < finding.change < finding.high and finding.unit == "relative"
    throughput = [f for f in report.of(PERFORMANCE) if f.metric.startswith("output tok/s")]
    assert throughput[0].kind == REGRESSION and throughput[0].change < 0  # lower throughput is worse


def test_a_faster_cell_is_an_improvement() -> None:
    report = diff(bundle(1, cells=[cell(1, slower=1.3)]), bundle(2))
    assert {f.kind for f in report.of(PERFORMANCE) if "TTFT" in f.metric} == {IMPROVEMENT}


def test_a_change_within_the_tolerance_is_not_significant() -> None:
    slower = bundle(2, cells=[cell(2, slower=1.3)])
    report = diff(bundle(1), slower, tolerances=Tolerances(user={"ttft": 0.6}))
    ttft = [f for f in report.of(PERFORMANCE) if "TTFT" in f.metric]
    assert all(f.kind == UNCHANGED and "within the 60% tolerance" in f.note for f in ttft)
    assert all(f.kind == REGRESSION for f in report.of(PERFORMANCE) if "TPOT" in f.metric)


def test_tolerances_come_from_the_user_then_the_new_runs_profile_then_the_default() -> None:
    from_profile = {"default": 0.08, "ttft": 0.12}
    assert Tolerances(bundle=from_profile).of("ttft") == (0.12, "NEW run's model profile")
    assert Tolerances(bundle=from_profile).of("tpot") == (0.08, "NEW run's model profile")
    assert Tolerances(user_default=0.2, bundle=from_profile).of("ttft") == (0.2, "--tolerance")
    assert Tolerances(user={"ttft": 0.3}, user_default=0.2).of("ttft") == (0.3, "--tolerance")
    assert Tolerances().of("itl") == (0.05, "the diff's default")
    report = diff(bundle(1), bundle(2, tolerances={"default": 0.5}, cells=[cell(2, slower=1.3)]))
    assert not any(f.significant for f in report.findings)  # NEW's profile allows 50%
    assert any("50% for ttft" in note and "NEW run's model profile" in note for note in report.notes)


def test_a_check_that_fails_now_comes_before_any_performance_finding() -> None:
    new = bundle(2, cells=[cell(2, slower=1.3)])
    check(new, CHECK_IDS[0]).update(outcome="failed", reason="AssertionError: the answer was 41")
    report = diff(bundle(1), new)
    first = report.findings[0]
    assert (first.section, first.kind, first.subject, first.base, first.new) == (
        CHECKS, REGRESSION, CHECK_IDS[0], "passed", "failed")
    assert "the answer was 41" in first.note
    sections = [f.section for f in report.findings]
    assert sections == sorted(sections, key=SECTIONS.index)


def test_a_record_that_went_stale_is_fixed_and_a_new_record_is_named() -> None:
    new = bundle(2)
    check(new, CHECK_IDS[2])["outcome"] = "stale_record"
    check(new, CHECK_IDS[1]).update(outcome="known_defect", reason="tool calls arrive as text")
    report = diff(bundle(1), new)
    verdict = {f.subject: f for f in report.of(VERDICT)}
    assert verdict[CHECK_IDS[2]].kind == IMPROVEMENT and verdict[CHECK_IDS[2]].metric.startswith("fixed")
    assert verdict[CHECK_IDS[1]].metric == "new known-defect record"
    assert verdict[CHECK_IDS[1]].note == "tool calls arrive as text"
    assert not report.of(CHECKS)  # each said once, in section 1


def test_the_gate_and_capability_changes_come_first() -> None:
    new = bundle(2)
    new["verdict"].update(gate="fail", gate_failures=["capability tools: served but broken"])
    new["capabilities"][1].update(discovered="broken", evidence="400 tool_choice not supported")
    new["capabilities"][0].update(failed=1)
    report = diff(bundle(1), new)
    found = [(f.subject, f.metric, f.kind) for f in report.findings[:4]]
    assert found[:2] == [("gate", "verdict", REGRESSION), ("gate", "new gate failure", REGRESSION)]
    # Then the capabilities, in the verdict's row order.
    assert found[2:] == [("capability text", "required, now failing", REGRESSION),
                         ("capability tools", "discovered", REGRESSION)]


def test_checks_skipped_or_only_in_one_run_are_changes_with_their_reason() -> None:
    new = bundle(2)
    check(new, CHECK_IDS[1]).update(outcome="skipped", reason="tools not served by this deployment")
    new["checks"].append({"id": "tests/test_new.py::test_more", "outcome": "failed", "reason": "boom"})
    del new["checks"][0]
    report = {f.subject: f for f in diff(bundle(1), new).of(CHECKS)}
    assert report[CHECK_IDS[1]].kind == "change" and "not served" in report[CHECK_IDS[1]].note
    assert report["tests/test_new.py::test_more"].metric == "only in NEW"
    assert report["tests/test_new.py::test_more"].kind == REGRESSION
    assert report[CHECK_IDS[0]].metric == "only in BASE"


def test_cells_of_another_shape_or_request_set_are_not_compared_and_say_why() -> None:
    other_shape = cell(2, shape={"input_tokens": 128, "output_tokens": 128, "concurrency": 8, "requests": 500,
                                 "rounds": 3})
    other_prompts = {**cell(2, key="128/128@1"), "request_set": "sha256:ffffffffffffffff"}
    base = bundle(1, cells=[cell(1), cell(1, key="128/128@1"), cell(1, key="1024/128@1")])
    report = diff(base, bundle(2, cells=[other_shape, other_prompts]))
    assert not report.of(PERFORMANCE)
    why = {item.what: item.why for item in report.not_compared}
    assert why["cell throughput 128/128@4"] == "a different shape: concurrency 4 vs 8"
    assert "other requests" in why["cell throughput 128/128@1"]
    assert why["cell throughput 1024/128@1"] == "only in BASE"


def test_prompts_drawn_with_other_seeds_are_compared_and_the_seeds_are_said() -> None:
    # The throughput prompts' seed is random by default: the same lengths from the same corpus.
    report = diff(bundle(1, cells=[{**cell(1), "prompt_seed": 11}]), bundle(2, cells=[{**cell(2), "prompt_seed": 22}]))
    assert report.of(PERFORMANCE) and not report.not_compared
    assert any("other seeds (BASE 11, NEW 22)" in note and "--throughput-seed" in note for note in report.notes)
    same = diff(bundle(1, cells=[{**cell(1), "prompt_seed": 5}]), bundle(2, cells=[{**cell(2), "prompt_seed": 5}]))
    assert not any("seeds" in note for note in same.notes)


def test_another_suite_version_is_said_and_what_matches_is_still_compared() -> None:
    report = diff(bundle(1), bundle(2, suite_version="0.2.0"))
    assert report.not_compared[0].what == "suite version" and "0.1.0" in report.not_compared[0].why
    assert report.of(PERFORMANCE)


def test_a_rate_that_dropped_is_a_significant_regression_with_newcombes_interval() -> None:
    new = bundle(2, rates=[{"name": "tool_schema_valid", "check": "tests/test_tool_accuracy.py::test_schemas",
                            "k": 560, "n": 626}])
    rate = next(f for f in diff(bundle(1), new).of(RATES) if f.metric == "tool_schema_valid")
    assert rate.kind == REGRESSION and rate.significant and rate.high < 0 and "Newcombe" in rate.note
    assert (rate.base, rate.new) == ("620/626 (99.0%)", "560/626 (89.5%)")


def test_rounds_too_few_for_an_interval_are_never_significant() -> None:
    base, new = bundle(1), bundle(2, cells=[cell(2, slower=2.0)])
    for document in (base, new):
        document["cells"][0]["rounds"] = {"output_tok_s": document["cells"][0]["rounds"]["output_tok_s"][:2]}
    rounds = [f for f in diff(base, new).of(PERFORMANCE) if f.metric.startswith("output tok/s")]
    assert rounds[0].kind == UNCHANGED and rounds[0].change < -0.4 and "too few rounds" in rounds[0].note


def test_what_differs_in_who_was_tested_and_how_is_said_first() -> None:
    new = bundle(2, engine={"engine.kind": "vllm", "engine.version": "0.33.0", "model": "reference-model",
                            "engine.url": "http://elsewhere", "capabilities.discovery_s": "0.4"},
                 options={"args": ["--throughput-shapes=full", "--run-bundle", "/tmp/new", "--clean-alluredir"]})
    notes = diff(bundle(1, options={"args": ["--run-bundle=/tmp/old"]}), new).notes
    assert notes[0] == "Engine: engine.version 0.1.0+reference -> 0.33.0."  # not the URL, not a timing
    assert notes[1] == ("Command lines differ (where files were written aside): only BASE -; "
                        "only NEW --throughput-shapes=full.")


def test_tool_call_f1_that_dropped_is_a_regression_and_a_rate_in_one_run_is_not_compared() -> None:
    new = bundle(2, confusions=[{"name": "tool_trigger_vs_baseline", "check": "tests/test_tool_accuracy.py::test_triggers",
                                 "both_called": 480, "only_candidate_called": 40, "only_reference_called": 44,
                                 "neither_called": 74}],
                 rates=[{"name": "trials", "check": CHECK_IDS[0], "k": 3, "n": 3}])
    report = diff(bundle(1), new)
    [f1] = [f for f in report.of(RATES) if f.metric == "tool_trigger_vs_baseline F1"]
    assert f1.kind == REGRESSION and f1.high < 0 and (f1.base, f1.new) == ("0.995", "0.920")
    assert [(item.what, item.why) for item in report.not_compared] == [
        (f"rate trials of {CHECK_IDS[0]}", "only in NEW"),
        ("rate tool_schema_valid of tests/test_tool_accuracy.py::test_schemas", "only in BASE")]


def test_a_run_that_did_not_finish_is_said_and_its_missing_parts_are_not_compared() -> None:
    new = bundle(2, checks=[], cells=[], rates=[], confusions=[])
    new["verdict"].update(gate="fail", engine_unavailable="engine unreachable at http://127.0.0.1:9")
    report = diff(bundle(1), new)
    assert "The NEW run did not finish (engine unreachable at http://127.0.0.1:9)" in report.notes[0]
    assert report.findings[0].kind == REGRESSION and report.findings[0].subject == "gate"
    assert {f.metric for f in report.of(CHECKS)} == {"only in BASE"}
    assert {item.why for item in report.not_compared} == {"only in BASE"}


def _chat_cell(seed: int, *, content_later_ms: float = 0.0, reasoning: float = 40.0, cached: float = 0.0,
               with_cached: bool = True) -> dict[str, Any]:
    """A media cell of a reasoning model: reasoning first, its answer ``content_later_ms`` later than usual."""
    chat = cell(seed, key="image-512@4")
    chat["workload"] = "media_throughput"
    rng = np.random.default_rng(seed + 100)
    ttft = np.asarray(chat["samples"]["ttft_ms"])
    prompts = rng.integers(60, 70, ttft.size).astype(float)
    chat["samples"].update({
        "first_reasoning_ms": ttft.tolist(),
        "first_content_ms": (ttft + rng.lognormal(np.log(200), 0.1, ttft.size) + content_later_ms).round(3).tolist(),
        "reasoning_tokens": rng.poisson(reasoning, ttft.size).astype(float).tolist(),
        "content_tokens": rng.poisson(12, ttft.size).astype(float).tolist(),
    })
    if with_cached:
        chat["samples"].update({"cached_tokens": np.floor(prompts * cached).tolist(),
                                "cached_of_prompt_tokens": prompts.tolist()})
    return chat


def test_the_output_split_is_compared_first_content_token_like_ttft_tokens_as_changes_and_the_cached_share() -> None:
    base = bundle(1, cells=[_chat_cell(1, cached=0.5)])
    clean = diff(base, bundle(2, cells=[_chat_cell(2, cached=0.5)]))
    metrics = {f.metric for f in clean.of(PERFORMANCE)}
    assert {"P50 first reasoning token", "P99 first content token", "reasoning tokens/request",
            "content tokens/request", "cached share of prompt tokens"} <= metrics
    assert all(f.kind == UNCHANGED for f in clean.findings), [f for f in clean.findings if f.kind != UNCHANGED]

    # The answer held back to the end: the first content token regresses, the first output (TTFT) does not; the
    # model now reasons twice as long: a change, neither better nor worse; the cache stopped serving: a regression.
    worse = diff(base, bundle(2, cells=[_chat_cell(2, content_later_ms=150.0, reasoning=80.0)]))
    by_metric = {f.metric: f for f in worse.of(PERFORMANCE)}
    content = by_metric["P50 first content token"]
    assert content.kind == REGRESSION and content.significant and content.low > 0.3, content
    assert by_metric["P50 TTFT"].kind == UNCHANGED and by_metric["P50 first reasoning token"].kind == UNCHANGED
    reasoning = by_metric["reasoning tokens/request"]
    assert reasoning.kind == CHANGE and reasoning.significant and 0.8 < reasoning.change < 1.2, reasoning
    cached = by_metric["cached share of prompt tokens"]
    assert (cached.kind, cached.unit, cached.new) == (REGRESSION, "difference", "0.0%"), cached
    assert cached.base.startswith("49.") and cached.high < -0.45


def test_a_figure_only_one_run_reported_is_listed_as_not_compared() -> None:
    report = diff(bundle(1, cells=[_chat_cell(1)]), bundle(2, cells=[_chat_cell(2, with_cached=False)]))
    assert "cached share of prompt tokens" not in {f.metric for f in report.of(PERFORMANCE)}
    [missing] = report.not_compared
    assert missing.what == "cached share of prompt tokens of cell media_throughput image-512@4"
    assert missing.why.startswith("only in BASE: no request of NEW had it (not reported by the engine")


def test_a_drop_in_speculative_decoding_acceptance_is_a_rate_regression_with_a_note_on_its_interval() -> None:
    acceptance = {"name": "spec_decode_acceptance[128/128@4]", "check": "tests/test_throughput.py::test_load",
                  "k": 8000, "n": 10000}
    report = diff(bundle(1, rates=[acceptance]), bundle(2, rates=[{**acceptance, "k": 2000}]))
    [rate] = [f for f in report.of(RATES) if f.metric.startswith("spec_decode_acceptance")]
    assert (rate.kind, rate.significant, rate.base, rate.new) == (REGRESSION, True, "8000/10000 (80.0%)",
                                                                    "2000/10000 (20.0%)")
    assert any("not independent trials" in note for note in report.notes)
