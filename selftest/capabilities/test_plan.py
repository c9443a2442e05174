"""Capability planning and coverage: what is tested, what is skipped and why, what fails the gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine_acceptance.capabilities.plan import coverage_rows, effective_profile, plan_capabilities, \
    validate_capability_names
from engine_acceptance.pytest_plugin import gate_json
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY, GateCollector
from engine_acceptance.profiles.profile import load_model_profile

GENERIC = load_model_profile("generic")


@dataclass
class FakeProbe:
    state: str
    evidence: str = "seen"
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeDiscovery:
    probes: dict[str, FakeProbe]


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
    rows = {row.name: row for row in coverage_rows(plans, [(frozenset({"text"}), "passed", "")])}
    assert rows["image"].coverage_failure == ("required capability 'image' is not served: "
                                              "HTTP 400: not a multimodal model")
    assert rows["tools"].coverage_failure == ("required capability 'tools' was not tested: none of its checks ran "
                                              "(none selected in this run)")
    rows = {row.name: row for row in coverage_rows(plans, [(frozenset({"tools"}), "skipped", "engine said no")])}
    assert "(1 skipped: engine said no)" in rows["tools"].coverage_failure
    rows = {row.name: row for row in coverage_rows(plans, [(frozenset({"tools"}), "passed", "")])}
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
    gate.add("t::a", ["text"], "call", "passed", None, "",
             [(COVERS_PROPERTY, "text"), ("ttft_s", 0.25), ("cells", '{"128/128@1": {"output_tok_s": 15.2}}')])
    verdict = gate_json.document(gate)
    assert verdict["figures"] == {"t::a": {"ttft_s": 0.25, "cells": {"128/128@1": {"output_tok_s": 15.2}}}}
    text = next(row for row in verdict["capabilities"] if row["name"] == "text")
    assert text["ran"] == 1 and text["result"] == "passed"


# --- tested means a genuine pass (issue 26, point 2) ---------------------------------------------

def _rows(plans: dict, outcomes: list[tuple[str, str]], allow: frozenset[str] = frozenset()) -> dict:
    """Coverage rows from (capability, outcome) pairs, each covering just that capability."""
    pairs = [(frozenset({name}), outcome, "the reason" if outcome == "skipped" else "") for name, outcome in outcomes]
    return {row.name: row for row in coverage_rows(plans, pairs, allow)}


def test_a_capability_whose_checks_all_failed_as_records_is_known_broken_not_passed() -> None:
    plans = plan_capabilities(GENERIC, FakeDiscovery({"image": FakeProbe("broken", "image_url part dropped")}),
                              frozenset())
    rows = _rows(plans, [("text", "passed"), ("image", "known_defect"), ("image", "known_defect")])
    assert rows["image"].result == "known broken (2 records): no check passed"
    assert not rows["image"].tested and rows["image"].coverage_failure is None  # not required: said, not failed
    assert rows["text"].tested and rows["text"].result == "passed"


def test_a_required_capability_with_only_known_defects_fails_the_gate() -> None:
    # The old verdict read "passed (2 known defect(s))" and counted it as tested.
    plans = plan_capabilities(GENERIC, FakeDiscovery({"image": FakeProbe("broken", "image_url part dropped")}),
                              frozenset({"image"}))
    rows = _rows(plans, [("text", "passed"), ("image", "known_defect"), ("image", "known_defect")])
    assert rows["image"].coverage_failure == (
        "required capability 'image' is known broken: all 2 of its executed checks failed as expected-failure "
        "records describe, none passed")
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
        f"capability 'thinking_modes' is broken by the deployment ({found}) but was not tested: all 1 of its "
        "selected checks were skipped (the reason); if that is intended, run with --allow-untested thinking_modes")


def test_the_gate_fails_on_a_required_capability_known_only_as_broken() -> None:
    gate = GateCollector(plans=plan_capabilities(GENERIC, FakeDiscovery({}), frozenset({"tools"})))
    gate.add("t::a", ["text"], "call", "passed", None, "", [(COVERS_PROPERTY, "text")])
    gate.add("t::b", ["tools"], "call", "skipped", "known defect (x): y", "", [(COVERS_PROPERTY, "tools")])
    assert not gate.passed
    assert "required capability 'tools' is known broken" in gate.gate_failures()[0]
    assert gate_json.document(gate)["capabilities"][5]["name"] == "tools" and not gate_json.document(gate)["capabilities"][5]["tested"]


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
    rows = {row.name: row for row in coverage_rows(plans, [(frozenset({"text"}), "passed", "")])}
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
