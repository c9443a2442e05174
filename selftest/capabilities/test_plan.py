"""Capability planning and coverage: what is tested, what is skipped and why, what fails the gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine_acceptance.capabilities.plan import coverage_rows, effective_profile, plan_capabilities, \
    validate_capability_names
from engine_acceptance.pytest_plugin import gate_json
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY, RECORDS_PROPERTY, GateCollector
from engine_acceptance.profiles.profile import load_model_profile
from engine_acceptance.reporting.results import CheckOutcome

GENERIC = load_model_profile("generic")


@dataclass
class FakeProbe:
    state: str
    evidence: str = "seen"
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeDiscovery:
    probes: dict[str, FakeProbe]


def _check(covers: set[str], outcome: str, reason: str = "", core: set[str] | None = None) -> CheckOutcome:
    """A check's outcome covering `covers`, core for all of them unless `core` says otherwise."""
    return CheckOutcome("t::x", "other", outcome, reason, frozenset(covers),
                        frozenset(covers if core is None else core))


MODES = {"enabled": {"chat_template_kwargs": {"enable_thinking": True}},
         "disabled": {"chat_template_kwargs": {"enable_thinking": False}}}


def test_an_unknown_model_gets_what_the_probes_found_served_or_broken_tested() -> None:
    discovery = FakeDiscovery({"tools": FakeProbe("served"), "image": FakeProbe("broken", "HTTP 500"),
                               "video": FakeProbe("not_served", "HTTP 400: not a multimodal model"),
                               "reasoning": FakeProbe("served", settings={"default_on": True}),
                               "thinking_modes": FakeProbe("served", settings={"modes": MODES})})
    plans = plan_capabilities(GENERIC, discovery, frozenset())
    tested = {name for name, plan in plans.items() if plan.tested}
    assert tested == {"text", "streaming", "code", "long_context", "tools", "image", "reasoning", "thinking_modes"}
    assert plans["video"].reason == "not served by the engine: HTTP 400: not a multimodal model"
    assert "no probe can tell" in plans["reasoning_effort"].reason
    profile = effective_profile(GENERIC, plans, discovery)
    assert profile.thinking_modes == MODES and profile.reasoning_default_on and profile.has("tools")


def test_a_declared_capability_is_tested_even_when_a_probe_saw_no_reasoning() -> None:
    # A reasoning parser that leaks into content looks like "no reasoning" to a probe:
    # declared, the checks run and catch it.
    profile = load_model_profile("reference")
    plans = plan_capabilities(profile, FakeDiscovery({"reasoning": FakeProbe("not_served")}), frozenset())
    assert plans["reasoning"].tested


def test_required_and_not_served_fails_coverage_and_required_untested_fails_too() -> None:
    discovery = FakeDiscovery({"image": FakeProbe("not_served", "HTTP 400: not a multimodal model"),
                               "tools": FakeProbe("served")})
    plans = plan_capabilities(GENERIC, discovery, frozenset({"image", "tools"}))
    rows = {row.name: row for row in coverage_rows(plans, [_check({"text"}, "passed")])}
    assert rows["image"].coverage_failure == ("required capability 'image' is not served: "
                                              "HTTP 400: not a multimodal model")
    assert rows["tools"].coverage_failure == ("required capability 'tools' was not tested: none of its checks ran "
                                              "(none selected in this run)")
    rows = {row.name: row for row in coverage_rows(plans, [_check({"tools"}, "skipped", "engine said no")])}
    assert "(1 skipped: engine said no)" in rows["tools"].coverage_failure
    rows = {row.name: row for row in coverage_rows(plans, [_check({"tools"}, "passed")])}
    assert rows["tools"].coverage_failure is None and rows["tools"].result == "passed"


def test_unknown_capability_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="--expect: unknown capability 'imagex'; known: text, streaming"):
        validate_capability_names(["image", "imagex"], source="--expect")


def test_a_run_that_executed_no_check_never_passes() -> None:
    gate = GateCollector()
    assert not gate.passed and "no check ran" in gate.gate_failures()[0]
    gate.add("t::a", ["text"], "setup", "skipped", None, "('x', 1, 'Skipped: why')")
    assert not gate.passed
    gate.add("t::b", ["text"], "call", "passed", None, "")
    assert gate.passed


def test_figures_recorded_by_checks_reach_the_verdict_and_coverage_does_not() -> None:
    gate = GateCollector(plans=plan_capabilities(GENERIC, None, frozenset()))
    check = "tests/test_text.py::test_reply_has_content_and_a_valid_finish_reason[streamed]"
    gate.add(check, ["text"], "call", "passed", None, "",
             [(COVERS_PROPERTY, "text"), ("ttft_s", 0.25), ("cells", '{"128/128@1": {"output_tok_s": 15.2}}')])
    verdict = gate_json.document(gate)
    assert verdict["figures"] == {check: {"ttft_s": 0.25, "cells": {"128/128@1": {"output_tok_s": 15.2}}}}
    text = next(row for row in verdict["capabilities"] if row["name"] == "text")
    assert text["ran"] == 1 and text["result"] == "passed"


# --- tested means a genuine pass (issue 26, point 2) ---------------------------------------------

def _rows(plans: dict, outcomes: list[tuple[str, str]], allow: frozenset[str] = frozenset()) -> dict:
    """Coverage rows from (capability, outcome) pairs, each covering just that capability."""
    checks = [_check({name}, outcome, "the reason" if outcome == "skipped" else "") for name, outcome in outcomes]
    return {row.name: row for row in coverage_rows(plans, checks, allow)}


def test_a_capability_whose_checks_all_failed_as_records_is_known_broken_not_passed() -> None:
    plans = plan_capabilities(GENERIC, FakeDiscovery({"image": FakeProbe("broken", "image_url part dropped")}),
                              frozenset())
    rows = _rows(plans, [("text", "passed"), ("image", "known_defect"), ("image", "known_defect")])
    assert rows["image"].result == "known broken (2 records): no core check passed"
    assert not rows["image"].tested and rows["image"].coverage_failure is None  # not required: said, not failed
    assert rows["text"].tested and rows["text"].result == "passed"


def test_a_required_capability_with_only_known_defects_fails_the_gate() -> None:
    # The old verdict read "passed (2 known defect(s))" and counted it as tested.
    plans = plan_capabilities(GENERIC, FakeDiscovery({"image": FakeProbe("broken", "image_url part dropped")}),
                              frozenset({"image"}))
    rows = _rows(plans, [("text", "passed"), ("image", "known_defect"), ("image", "known_defect")])
    assert rows["image"].coverage_failure == (
        "required capability 'image' is known broken: no core check (one that exercises image itself) passed, 2 "
        "failed as expected-failure records describe")
    rows = _rows(plans, [("text", "passed"), ("image", "known_defect"), ("image", "passed")])
    assert rows["image"].coverage_failure is None and rows["image"].result == "passed (1 known defect(s))"


def test_a_served_capability_whose_checks_all_skipped_fails_unless_allowed() -> None:
    # The old verdict read "not tested: all 3 skipped" and passed the gate.
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("served")}), frozenset())
    rows = _rows(plans, [("text", "passed"), ("tools", "skipped"), ("tools", "skipped"), ("tools", "skipped")])
    assert rows["tools"].coverage_failure == (
        "capability 'tools' is served by the deployment but was not tested: all 3 of its selected checks were "
        "skipped (the reason); if that is intended, run with --allow-untested tools")
    allowed = _rows(plans, [("text", "passed"), ("tools", "skipped")], frozenset({"tools"}))
    assert allowed["tools"].coverage_failure is None and allowed["tools"].allowed_untested
    assert allowed["tools"].result == "not tested (allowed with --allow-untested): all 1 skipped (the reason)"
    # A capability whose checks -m did not select is not a failure, and one not served stays skipped.
    assert _rows(plans, [("text", "passed")])["tools"].result == "not selected in this run"
    refused = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("not_served", "HTTP 400: no parser")}),
                                frozenset())
    assert _rows(refused, [("text", "passed"), ("tools", "skipped")])["tools"].coverage_failure is None


def test_a_broken_capability_whose_checks_all_skipped_fails_in_the_engines_words() -> None:
    # A thinking switch answered 500 gives the checks no modes to send: they skip, and the gate quotes the engine.
    found = "chat_template_kwargs.enable_thinking=false: HTTP 500: Internal server error"
    plans = plan_capabilities(GENERIC, FakeDiscovery({"thinking_modes": FakeProbe("broken", found)}), frozenset())
    rows = _rows(plans, [("text", "passed"), ("thinking_modes", "skipped")])
    assert rows["thinking_modes"].coverage_failure == (
        f"capability 'thinking_modes' is broken (discovered: {found}); all 1 of its selected checks were skipped "
        "(the reason); if the deployment does not offer thinking_modes on purpose, run with --not-served "
        "thinking_modes (or not_served: [thinking_modes] in the model profile)")


def test_the_gate_fails_on_a_required_capability_known_only_as_broken() -> None:
    gate = GateCollector(plans=plan_capabilities(GENERIC, FakeDiscovery({}), frozenset({"tools"})))
    gate.add("t::a", ["text"], "call", "passed", None, "", [(COVERS_PROPERTY, "text")])
    gate.add("tests/test_tools.py::test_forced_named_tool_is_called[streamed]", ["tools"], "call", "skipped",
             "known defect (x): y", "", [(COVERS_PROPERTY, "tools"), (RECORDS_PROPERTY, "x.yaml#0")])
    assert not gate.passed
    assert "required capability 'tools' is known broken" in gate.gate_failures()[0]
    tools = next(row for row in gate_json.document(gate)["capabilities"] if row["name"] == "tools")
    assert not tools["tested"]


def test_a_capability_stated_not_served_is_skipped_whatever_the_probe_found_and_says_where() -> None:
    from engine_acceptance.capabilities.plan import STATED_NOT_SERVED, stated_not_served

    discovery = FakeDiscovery({"tools": FakeProbe("broken", "HTTP 400: Error in extracting tool call"),
                               "image": FakeProbe("served")})
    stated = stated_not_served(GENERIC, ["tools"])
    plans = plan_capabilities(GENERIC, discovery, frozenset(), stated)
    assert not plans["tools"].tested and plans["tools"].discovered == STATED_NOT_SERVED
    assert plans["tools"].reason == ("not served (stated with --not-served); probe found it broken: "
                                     "HTTP 400: Error in extracting tool call")
    assert plans["image"].tested
    rows = {row.name: row for row in coverage_rows(plans, [_check({"text"}, "passed")])}
    assert rows["tools"].result.startswith("not tested: not served (stated with --not-served)")
    assert rows["tools"].coverage_failure is None


def test_a_model_profiles_not_served_is_named_with_its_file() -> None:
    import dataclasses

    from engine_acceptance.capabilities.plan import stated_not_served

    profile = dataclasses.replace(GENERIC, not_served=frozenset({"image"}))
    assert stated_not_served(profile, []) == {"image": f"model profile 'generic' not_served ({GENERIC.source})"}
    # The command line says it for this deployment: it names --not-served.
    assert stated_not_served(profile, ["image"]) == {"image": "--not-served"}


def test_what_every_deployment_is_tested_on_cannot_be_stated_off() -> None:
    from engine_acceptance.capabilities.plan import stated_not_served

    with pytest.raises(ValueError, match="'text' cannot be stated not served"):
        stated_not_served(GENERIC, ["text"])


# --- issue 39: core checks, every broken fails the gate, tokenize's own row ------------------------

def test_only_a_core_checks_pass_makes_a_capability_tested() -> None:
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("served")}), frozenset({"tools"}))
    # Markup kept out of content and tool_choice "none" hold for a model that never calls a tool: not core.
    rows = {row.name: row for row in coverage_rows(plans, [
        _check({"tools"}, "passed", core=set()), _check({"tools"}, "passed", core=set()),
        _check({"tools"}, "known_defect"), _check({"tools"}, "skipped", "neither reply called a tool")])}
    tools = rows["tools"]
    assert not tools.tested and tools.passed == 2 and tools.known == 1
    assert tools.coverage_failure == (
        "required capability 'tools' is known broken: no core check (one that exercises tools itself) passed, 1 "
        "failed as expected-failure records describe and 1 skipped (neither reply called a tool)")
    rows = {row.name: row for row in coverage_rows(plans, [_check({"tools"}, "passed", core=set()),
                                                           _check({"tools"}, "passed")])}
    assert rows["tools"].tested and rows["tools"].result == "passed" and rows["tools"].coverage_failure is None


def test_a_served_capability_whose_core_checks_all_skipped_fails_though_others_passed() -> None:
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("served")}), frozenset())
    checks = [_check({"tools"}, "passed", core=set()), _check({"tools"}, "skipped", "no call to compare")]
    tools = {row.name: row for row in coverage_rows(plans, checks)}["tools"]
    assert tools.coverage_failure == (
        "capability 'tools' is served by the deployment but was not tested: all 1 of its selected core checks "
        "(those that exercise tools itself) were skipped (no call to compare) (1 other check(s) ran: 1 passed); if "
        "that is intended, run with --allow-untested tools")
    allowed = {row.name: row for row in coverage_rows(plans, checks, frozenset({"tools"}))}["tools"]
    assert allowed.coverage_failure is None and allowed.result.startswith("not tested (allowed with --allow-untested)")
    # Only non-core checks selected (-k): not tested, and not a failure unless required.
    only_others = {row.name: row for row in coverage_rows(plans, checks[:1])}["tools"]
    assert only_others.coverage_failure is None
    assert only_others.result == "not tested: its core checks were not selected in this run (1 other check(s) ran: " \
                                 "1 passed)"


@pytest.mark.parametrize(("checks", "what"), [
    ([], "its checks were not selected"),
    ([_check({"tools"}, "skipped", "a reason")], "all 1 of its selected checks were skipped (a reason)"),
    ([_check({"tools"}, "passed")], "none of the 1 of its checks that ran failed"),
], ids=["not-selected", "all-skipped", "all-passed"])
def test_a_capability_found_broken_fails_the_gate_unless_a_check_shows_it(checks: list, what: str) -> None:
    evidence = "HTTP 500: Internal Server Error"
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("broken", evidence)}), frozenset())
    tools = {row.name: row for row in coverage_rows(plans, [_check({"text"}, "passed"), *checks])}["tools"]
    assert tools.result == f"FAIL: broken (discovered); {what}"
    assert tools.coverage_failure == (
        f"capability 'tools' is broken (discovered: {evidence}); {what}; if the deployment does not offer tools on "
        "purpose, run with --not-served tools (or not_served: [tools] in the model profile)")
    # A check that failed, or failed as a record describes, shows the breakage: no second failure.
    for shown in ("failed", "known_defect"):
        row = {r.name: r for r in coverage_rows(plans, [_check({"tools"}, shown)])}["tools"]
        assert row.coverage_failure is None, shown
    # An unrecognized 4xx's evidence already names the command: it is not said twice.
    said = "HTTP 400: boom: not a refusal engine profile 'vllm' recognizes for tools; " + \
        "if the deployment does not offer tools on purpose, run with --not-served tools (or not_served: [tools] in " \
        "the model profile)"
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("broken", said)}), frozenset())
    row = {r.name: r for r in coverage_rows(plans, [])}["tools"]
    assert row.coverage_failure == f"capability 'tools' is broken (discovered: {said}); its checks were not selected"


@pytest.mark.parametrize(("state", "evidence", "result"), [
    ("served", "POST /tokenize: 5 token(s) for 'hello'", "served: the measurements count prompt tokens with it"),
    ("not_served", "POST /tokenize: HTTP 404: Not Found",
     "not served (POST /tokenize: HTTP 404: Not Found): the measurements count with --tokenizer where given, else "
     "estimate"),
], ids=["served", "not-served"])
def test_tokenize_has_a_row_of_its_own_that_is_its_probes_finding(state: str, evidence: str, result: str) -> None:
    plans = plan_capabilities(GENERIC, FakeDiscovery({"tokenize": FakeProbe(state, evidence)}), frozenset())
    assert list(plans)[-1] == "tokenize" and not plans["tokenize"].tested
    row = {r.name: r for r in coverage_rows(plans, [_check({"text"}, "passed")])}["tokenize"]
    assert row.discovered == state and row.result == result and row.coverage_failure is None
    # No model capability: effective profiles never list it.
    assert not effective_profile(GENERIC, plans, None).has("tokenize")


def test_a_broken_tokenize_fails_the_gate_unless_the_run_counts_with_a_local_tokenizer() -> None:
    evidence = "POST /tokenize: HTTP 500: Internal server error: AttributeError: boom"
    discovery = FakeDiscovery({"tokenize": FakeProbe("broken", evidence)})
    row = {r.name: r for r in coverage_rows(plan_capabilities(GENERIC, discovery, frozenset()), [])}["tokenize"]
    assert row.result == f"FAIL: broken (discovered): {evidence}"
    assert row.coverage_failure == (
        f"capability 'tokenize' is broken (discovered: {evidence}); if the deployment has no tokenize endpoint on "
        "purpose, count locally with --tokenizer FILE (the served model's tokenizer.json) or add the refusal to the "
        "engine profile's refusals.tokenize")
    stated = plan_capabilities(GENERIC, discovery, frozenset(), {"tokenize": "--tokenizer /t/tokenizer.json"})
    row = {r.name: r for r in coverage_rows(stated, [])}["tokenize"]
    assert row.coverage_failure is None and row.discovered == "not_served (stated)"
    assert row.result == f"not used (stated with --tokenizer /t/tokenizer.json); probe found it broken: {evidence}"
    # A served one stays served: the measurements still use it.
    served = FakeDiscovery({"tokenize": FakeProbe("served", "POST /tokenize: 5 token(s)")})
    plans = plan_capabilities(GENERIC, served, frozenset(), {"tokenize": "--tokenizer /t/tokenizer.json"})
    assert plans["tokenize"].discovered == "served"


def test_the_gate_reads_core_checks_from_the_registry_by_check_id() -> None:
    gate = GateCollector(plans=plan_capabilities(GENERIC, FakeDiscovery({"tools": FakeProbe("served")}),
                                                 frozenset({"tools"})))
    core = "tests/test_tools.py::test_streamed_tool_calls_reassemble_to_the_non_streamed_calls"
    # Wherever the suite is installed: the check is read as records name it, module::test[param].
    other = ("/venv/site-packages/engine_acceptance/suite/tests/test_tools.py::"
             "test_tool_choice_none_answers_in_text_without_calls[streamed]")
    gate.add(other, ["tools"], "call", "passed", None, "", [(COVERS_PROPERTY, "tools")])
    assert gate.outcomes[other].core == frozenset()
    assert "required capability 'tools' was not tested" in gate.gate_failures()[0]
    gate.add(core, ["tools"], "call", "passed", None, "", [(COVERS_PROPERTY, "tools")])
    assert gate.outcomes[core].core == {"tools"} and not gate.gate_failures()


def test_a_capability_its_probe_could_not_ask_about_says_why_first() -> None:
    # The engine profile names no way to send a video: the row leads with that, not with the model profile's silence.
    why = "engine profile 'plain' names no video content type: set features.video_content_type ..."
    plans = plan_capabilities(GENERIC, FakeDiscovery({"video": FakeProbe("not_probed", why)}), frozenset())
    assert not plans["video"].tested and plans["video"].reason == f"not probed: {why}"
    assert _rows(plans, [])["video"].result == f"not tested: not probed: {why}"
    # Declared, it is tested all the same (and its checks say why they cannot send a video).
    reference = plan_capabilities(load_model_profile("reference"),
                                  FakeDiscovery({"video": FakeProbe("not_probed", why)}), frozenset())
    assert reference["video"].tested


def test_a_warned_stale_record_counts_as_the_pass_it_was_and_is_said_apart() -> None:
    plans = plan_capabilities(load_model_profile("reference"), None, frozenset())
    outcomes = [_check({"tools"}, "stale_record"), _check({"tools"}, "stale_record")]
    [warned] = [row for row in coverage_rows(plans, outcomes, stale_warned=True) if row.name == "tools"]
    assert (warned.failed, warned.passed, warned.stale, warned.tested, warned.coverage_failure) == (0, 2, 2, True, None)
    assert warned.result == "passed; 2 stale records warned (the checks passed: --stale-records=warn)"
    [strict] = [row for row in coverage_rows(plans, outcomes) if row.name == "tools"]
    assert (strict.failed, strict.passed, strict.stale, strict.result) == (2, 0, 2, "2 failed")
