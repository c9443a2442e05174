"""Measurements run smaller than declared are said: computed from the options and the profile, shown in the verdict.

CI runs recall at 7,000 of the 32,768 tokens gemma-3-270m declares, the "million-token"
checks at 7,000 too, throughput at two rounds and one media cell, and one sample per
model-behaviour check (``--trials=1``); before, the verdict said none of it. These tests pin
what each shortfall says and where the verdict shows it.
"""

from __future__ import annotations

from engine_acceptance.load.media.cells import select_media_cells
from engine_acceptance.load.closed_loop.settings import select_cells
from engine_acceptance.capabilities.plan import plan_capabilities
from engine_acceptance.profiles.profile import load_model_profile
from engine_acceptance.pytest_plugin.allure_report import shortfall_facts
from engine_acceptance.pytest_plugin import gate_json, gate_table
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY, GateCollector
from engine_acceptance.recall.haystack import recall_budget
from engine_acceptance.shortfalls import (
    MILLION_TOKENS,
    TRIAL_KIND_PROPERTY,
    media_shortfalls,
    million_note,
    recall_shortfalls,
    throughput_shortfalls,
    trials_shortfalls,
)

FIELD = 31_000  # fixtures/prompts/recall.yaml: seed 001's 32K variant
ROOM = 1024 + 64  # answer and chat template


def _recall(**kwargs):
    values = {"requested": None, "profile_context": 32_768, "max_model_len": 32_768, "profile_name": "gemma",
              "field_tokens": FIELD, **kwargs}
    return {s.check: s for s in recall_shortfalls(**values)}


def test_ci_recall_at_7000_of_32768_declared_is_two_shortfalls_naming_the_option() -> None:
    found = _recall(requested=7000)
    recall, million = found["recall"], found["recall_1m"]
    assert (recall.capability, recall.declared, recall.ran, recall.option) == (
        "long_context", 32_768, 7000, "--recall-tokens=7000")
    assert recall.summary == "recall at 7,000 of 32,768 declared tokens"
    assert recall.why == ("less than the 31,000-token prompt of the 32,768-token context declared by model "
                          "profile 'gemma'")
    # The million-token check is measured against the 32,768 tokens the model has, not a million it never had.
    assert (million.capability, million.declared, million.ran) == ("long_context", 32_768, 7000)
    assert million.summary == "million-token recall at 7,000 of the 32,768 tokens the model declares"
    assert million.check_result("passed") == "passed at 7,000 of the 32,768 tokens the model declares"
    assert million.reason() == "--recall-tokens=7000: a 7,000-token prompt"


def test_recall_at_the_declared_size_is_no_shortfall_but_a_million_check_on_32k_still_is() -> None:
    found = _recall()
    assert "recall" not in found  # 31,000 tokens is the field extraction's own size
    assert found["recall_1m"].option is None
    assert found["recall_1m"].why == "model profile 'gemma' declares 32,768 tokens of context, less than a million"
    assert found["recall_1m"].ran == 32_768 - ROOM
    assert found["recall_1m"].summary == "million-token recall at 31,680 of the 32,768 tokens the model declares"


def test_a_million_token_context_has_no_shortfall() -> None:
    assert _recall(profile_context=MILLION_TOKENS, max_model_len=MILLION_TOKENS) == {}
    budget = recall_budget(requested=None, profile_context=MILLION_TOKENS, max_model_len=MILLION_TOKENS)
    assert million_note(budget) is None


def test_the_million_check_below_a_million_names_the_context_the_model_has_or_a_million() -> None:
    declared = recall_budget(requested=7000, profile_context=131_072, max_model_len=None)
    assert million_note(declared) == "ran at 7,000 of the 131,072 tokens the model declares"
    # No context declared: the engine's advertised one is the measure, and it says so.
    advertised = recall_budget(requested=7000, profile_context=None, max_model_len=131_072)
    assert million_note(advertised) == "ran at 7,000 of the 131,072 tokens the engine advertises (max_model_len)"
    # A million or more, or nothing known: the check is measured against the million it is named for.
    assert million_note(recall_budget(requested=7000, profile_context=MILLION_TOKENS, max_model_len=None)) == \
        "ran at 7,000 tokens, not 1,048,576"
    assert million_note(recall_budget(requested=7000, profile_context=None, max_model_len=None)) == \
        "ran at 7,000 tokens, not 1,048,576"
    # A profile declaring 131,072 on an engine advertising it: the shortfall is declared against 131,072.
    [million] = [s for s in recall_shortfalls(requested=7000, profile_context=131_072, max_model_len=131_072,
                                              profile_name="long", field_tokens=FIELD) if s.check == "recall_1m"]
    assert (million.declared, million.ran) == (131_072, 7000)
    assert million.summary == "million-token recall at 7,000 of the 131,072 tokens the model declares"
    # A profile declaring a million on an engine advertising 131,072: still a million, with the engine's shortfall.
    [short] = [s for s in recall_shortfalls(requested=None, profile_context=MILLION_TOKENS, max_model_len=131_072,
                                            profile_name="m3", field_tokens=FIELD) if s.check == "recall_1m"]
    assert short.declared == MILLION_TOKENS and short.summary.endswith("tokens, not 1,048,576")


def test_recall_tokens_above_the_field_size_leave_recall_whole_and_the_million_check_short() -> None:
    found = _recall(requested=31_000, profile_context=131_072, max_model_len=131_072)
    assert set(found) == {"recall_1m"} and found["recall_1m"].ran == 31_000


def test_an_engine_advertising_less_than_declared_is_a_shortfall_without_an_option() -> None:
    found = _recall(profile_context=MILLION_TOKENS, max_model_len=65_536, profile_name="reference")
    assert set(found) == {"recall_1m"}
    assert found["recall_1m"].option is None and found["recall_1m"].ran == 65_536 - ROOM
    assert "the engine advertises 65,536 (max_model_len): the million-token checks fail" in found["recall_1m"].why


def test_without_a_declared_context_the_advertised_one_is_the_measure() -> None:
    found = _recall(requested=2000, profile_context=None, max_model_len=8192)
    assert found["recall"].summary == "recall at 2,000 of 8,192 advertised tokens"
    assert "advertised by the engine" in found["recall"].why
    # Neither declared nor advertised: nothing for recall to fall short of; the million check still is short.
    assert set(_recall(profile_context=None, max_model_len=None)) == {"recall_1m"}


def test_a_recall_size_the_engine_cannot_take_is_no_shortfall_here() -> None:
    # The run stops with a usage error (engine_setup) or the recall checks skip saying why.
    assert _recall(requested=100_000) == {}


def test_default_throughput_is_no_shortfall() -> None:
    assert throughput_shortfalls(shapes="smoke", rounds=3, cells=select_cells("smoke")) == []
    assert throughput_shortfalls(shapes="full", rounds=5, cells=select_cells("full")) == []
    assert media_shortfalls(shapes="full", rounds=3, cells=select_media_cells("full")) == []


def test_fewer_rounds_cells_and_requests_than_the_default_are_each_said() -> None:
    found = throughput_shortfalls(shapes="128/128@4x2", rounds=2, cells=select_cells("128/128@4x2"))
    assert found[2].param == "in128-out128"
    assert [(s.measure, s.declared, s.ran, s.option) for s in found] == [
        ("rounds per cell", 3, 2, "--throughput-rounds=2"),
        ("cells", 2, 1, "--throughput-shapes=128/128@4x2"),
        ("requests per round of 128/128@4", 8, 2, "--throughput-shapes=128/128@4x2"),
    ]
    assert {s.capability for s in found} == {"throughput"}
    assert found[0].summary == "throughput at 2 of 3 rounds per cell"
    # A cell outside the default is held to the seeds' matrix.
    matrix = throughput_shortfalls(shapes="4096/128@4x4,128/128", rounds=3, cells=select_cells("4096/128@4x4,128/128"))
    assert [(s.measure, s.declared, s.ran) for s in matrix] == [("requests per round of 4096/128@4", 16, 4)]


def test_other_cells_in_place_of_the_defaults_are_a_shortfall_naming_both() -> None:
    # CI's smoke: as many cells as the default, none of them the default's.
    found = throughput_shortfalls(shapes="128/32@1x2,128/32@4x4", rounds=3, cells=select_cells("128/32@1x2,128/32@4x4"))
    assert [(s.measure, s.declared, s.ran) for s in found] == [("cells", 2, 0)]
    assert found[0].summary == "throughput at 0 of 2 cells"
    assert found[0].why == ("the default (smoke) measures 128/128@1, 128/128@4; this run measured 128/32@1, "
                            "128/32@4 instead")


def test_a_threshold_on_a_cell_the_run_did_not_measure_is_a_shortfall() -> None:
    found = throughput_shortfalls(shapes="smoke", rounds=3, cells=select_cells("smoke"),
                                  threshold_cells=["128/128@4", "4096/128@8"])
    assert [(s.measure, s.declared, s.ran) for s in found] == [("cells the thresholds name", 2, 1)]
    assert "4096/128@8, which this run did not measure" in found[0].why


def test_ci_media_throughput_is_short_of_rounds_cells_and_requests() -> None:
    found = media_shortfalls(shapes="image-512@1x2", rounds=2, cells=select_media_cells("image-512@1x2"))
    assert [(s.module, s.measure, s.declared, s.ran) for s in found] == [
        ("test_media_throughput.py", "rounds per cell", 3, 2),
        ("test_media_throughput.py", "cells", 8, 1),
        ("test_media_throughput.py", "requests per round of image-512@1", 16, 2),
    ]
    assert found[1].summary == "media throughput at 1 of 8 cells"


def _gate(*shortfalls) -> GateCollector:
    reference = load_model_profile("reference")
    return GateCollector(plans=plan_capabilities(reference, None, frozenset()), shortfalls=list(shortfalls))


def _report(gate: GateCollector, nodeid: str, marker: str, outcome: str = "passed") -> None:
    gate.add(nodeid, [marker], "call", outcome, None, "" if outcome == "passed" else "E   boom",
             [(COVERS_PROPERTY, "long_context" if marker.startswith("recall") else "")])


def test_the_verdict_shows_a_shortfall_in_the_row_gate_json_and_the_table_and_still_passes() -> None:
    found = _recall(requested=7000)
    gate = _gate(found["recall"], found["recall_1m"])
    _report(gate, "tests/test_recall.py::test_field_extraction_control_without_the_key_answers_not_found", "recall")
    _report(gate, "tests/test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json",
            "recall_1m")
    assert gate.passed, gate.gate_failures()
    row = next(row for row in gate.capability_rows() if row.name == "long_context")
    assert row.result == ("passed; recall at 7,000 of 32,768 declared tokens; "
                          "million-token recall at 7,000 of the 32,768 tokens the model declares")
    entries = gate_json.document(gate)["shortfalls"]
    assert [(e["capability"], e["check"], e["declared"], e["ran"], e["option"]) for e in entries] == [
        ("long_context", "recall", 32_768, 7000, "--recall-tokens=7000"),
        ("long_context", "recall_1m", 32_768, 7000, "--recall-tokens=7000"),
    ]
    assert entries[1]["checks"] == [{
        "id": "tests/test_recall.py::test_million_token_prompt_returns_the_three_codes_exactly_as_json",
        "outcome": "passed", "result": "passed at 7,000 of the 32,768 tokens the model declares"}]
    lines = gate_table.lines(gate)
    assert ("  SHORTFALL (long_context): million-token recall at 7,000 of the 32,768 tokens the model declares "
            "[--recall-tokens=7000: a 7,000-token prompt]; checks: 1 passed at 7,000 of the 32,768 tokens the "
            "model declares") in lines
    assert lines[-1] == "GATE: PASS"
    assert shortfall_facts(entries) == {
        "shortfall.1.recall": "recall at 7,000 of 32,768 declared tokens (--recall-tokens=7000: less than the "
                              "31,000-token prompt of the 32,768-token context declared by model profile 'gemma')",
        "shortfall.2.recall_1m": "million-token recall at 7,000 of the 32,768 tokens the model declares "
                                 "(--recall-tokens=7000: a 7,000-token prompt)",
    }


def test_a_shortfall_whose_checks_were_not_selected_is_not_listed() -> None:
    found = media_shortfalls(shapes="image-512@1x2", rounds=2, cells=select_media_cells("image-512@1x2"))
    gate = _gate(*_recall(requested=7000).values(), *found)
    # Only the fixed-length throughput check ran: neither the recall nor the media shortfalls concern it.
    _report(gate, "tests/test_throughput.py::test_fixed_length_load_is_served_in_full_and_passes_the_gate[128/128]",
            "throughput")
    assert gate_json.document(gate)["shortfalls"] == []
    assert not any("SHORTFALL" in line for line in gate_table.lines(gate))
    # The media check, even skipped, is under its shortfalls; the recall ones stay out.
    gate.add("tests/test_media_throughput.py::test_media[image-512]", ["throughput"], "setup", "skipped", None,
             "('x', 1, 'Skipped: not served')")
    assert [e["measure"] for e in gate_json.document(gate)["shortfalls"]] == [
        "rounds per cell", "cells", "requests per round of image-512@1"]
    # A cell's shortfall concerns only the check of its input.
    other = "tests/test_media_throughput.py::test_media[video-16frames]"
    gate.add(other, ["throughput"], "call", "passed", None, "")
    cell_entry = gate_json.document(gate)["shortfalls"][2]
    assert [c["id"] for c in cell_entry["checks"]] == ["tests/test_media_throughput.py::test_media[image-512]"]
    assert all(e["checks"][0]["outcome"] == "skipped" for e in gate_json.document(gate)["shortfalls"])


def test_a_check_failing_at_a_smaller_size_says_the_size_and_fails_the_gate() -> None:
    gate = _gate(_recall(requested=7000)["recall_1m"])
    _report(gate, "tests/test_recall.py::test_million_token_prompt_tokens_match_the_engines_count", "recall_1m",
            "failed")
    assert not gate.passed
    assert gate_json.document(gate)["shortfalls"][0]["checks"][0]["result"] == \
        "failed at 7,000 of the 32,768 tokens the model declares"


def test_trials_below_the_default_or_the_profile_are_a_shortfall_per_kind_saying_what_the_cut_costs() -> None:
    assert trials_shortfalls(requested=None, profile_trials={}, profile_name="reference") == []
    # CI's --trials=1: every kind asking more than one sample; recall asks one (each sample is the long prompt).
    found = {s.check: s for s in trials_shortfalls(requested=1, profile_trials={"tools": 2}, profile_name="gemma")}
    assert set(found) == {"answers", "thinking", "tools", "image"}
    thinking = found["thinking"]
    assert (thinking.capability, thinking.measure, thinking.declared, thinking.ran, thinking.option) == (
        "trials", "samples per check", 5, 1, "--trials=1")
    assert thinking.summary == "thinking trials at 1 of 5 samples per check"
    assert thinking.reason() == ("--trials=1: each thinking check sends 1 sample(s), not the 5 the default asks: all "
                                 "passing bounds its pass rate at 20.7% (95% Wilson lower bound), not 56.6%")
    assert thinking.check_result("passed") == "passed at 1 of 5 samples"
    # The profile's own count is the measure where it names one, and the cut says whose it is.
    assert found["tools"].declared == 2 and "model profile 'gemma' asks (trials: tools: 2)" in found["tools"].why
    # As many as asked, or more: no shortfall.
    assert trials_shortfalls(requested=5, profile_trials={}, profile_name="reference") == []
    assert [s.check for s in trials_shortfalls(requested=3, profile_trials={}, profile_name="r")] == ["thinking"]


def _trial(gate: GateCollector, nodeid: str, marker: str, kind: str, covers: str, outcome: str = "passed") -> None:
    when = "call" if outcome != "skipped" else "setup"
    gate.add(nodeid, [marker], when, outcome, None, "('x', 1, 'Skipped: not served')" if outcome == "skipped" else "",
             [(COVERS_PROPERTY, covers), (TRIAL_KIND_PROPERTY, kind)])


def test_a_trials_cut_is_shown_on_the_checks_of_its_kind_and_the_rows_they_cover() -> None:
    found = {s.check: s for s in trials_shortfalls(requested=1, profile_trials={}, profile_name="reference")}
    gate = _gate(*found.values())
    _trial(gate, "tests/test_image.py::test_chart_values[non-streamed]", "image", "image", "image")
    _trial(gate, "tests/test_video.py::test_video_background_colors_are_listed_in_order[mp4]", "video", "image",
           "video")
    _trial(gate, "tests/test_thinking.py::test_disabled[non-streamed]", "thinking", "thinking", "thinking_modes",
           "skipped")
    # A check of the same module that samples once (a protocol check) is not under the cut.
    gate.add("tests/test_image.py::test_corrupt", ["image"], "call", "passed", None, "", [(COVERS_PROPERTY, "image")])
    gate.allow_untested = frozenset({"thinking_modes"})
    assert gate.passed, gate.gate_failures()
    entries = gate_json.document(gate)["shortfalls"]
    # The thinking check skipped: it sent no sample, so its kind's cut is not listed.
    assert [(e["capability"], e["check"], [c["id"].split("::")[0] for c in e["checks"]]) for e in entries] == [
        ("trials", "image", ["tests/test_image.py", "tests/test_video.py"])]
    assert entries[0]["checks"][0]["result"] == "passed at 1 of 3 samples"
    rows = {row.name: row.result for row in gate.capability_rows()}
    assert rows["image"] == "passed; image trials at 1 of 3 samples per check"
    assert rows["video"] == "passed; image trials at 1 of 3 samples per check"
    assert "trials" not in rows["thinking_modes"]
    lines = gate_table.lines(gate)
    assert ("  SHORTFALL (trials): image trials at 1 of 3 samples per check [--trials=1: each image check sends 1 "
            "sample(s), not the 3 the default asks: all passing bounds its pass rate at 20.7% (95% Wilson lower "
            "bound), not 43.9%]; checks: 2 passed at 1 of 3 samples") in lines
    assert shortfall_facts(entries) == {
        "shortfall.1.image": "image trials at 1 of 3 samples per check (--trials=1: each image check sends 1 "
                             "sample(s), not the 3 the default asks: all passing bounds its pass rate at 20.7% (95% "
                             "Wilson lower bound), not 43.9%)"}
