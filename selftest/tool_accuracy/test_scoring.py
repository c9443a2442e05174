"""Scoring and baselines of the tool-accuracy run, on hand-made outcomes (no engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine_acceptance
from engine_acceptance.provenance import (
    AGAINST_ANOTHER,
    AGAINST_ITSELF,
    BASELINE_PROPERTY,
    UNKNOWN,
    baseline_entry,
    comparison,
    is_across_versions,
    provenance_of,
)
from engine_acceptance.pytest_plugin import gate_json, gate_table
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.tool_accuracy.baseline import BaselineError, load_baseline, set_digest, write_baseline
from engine_acceptance.tool_accuracy.dataset import CASES_FILE, ToolCase, ToolSetError, load_cases
from engine_acceptance.tool_accuracy.policy import BASELINES_DIR, ToolAccuracyPolicy
from engine_acceptance.tool_accuracy.report import comparison_text, error_kinds, summary_lines
from engine_acceptance.tool_accuracy.runner import CallOutcome, CaseOutcome, RunSettings
from engine_acceptance.tool_accuracy.scoring import Confusion, confusion, score
from engine_acceptance.wire.readiness import EngineInfo

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _case(case_id: str, expect: str = "call") -> ToolCase:
    return ToolCase(case_id, "flat", expect, ("get_weather",) if expect == "call" else (), "auto",
                    ({"role": "user", "content": "weather?"},), (TOOL,))


def _call(arguments: str = '{"city": "Paris"}', name: str = "get_weather") -> CallOutcome:
    problems = () if arguments.startswith('{"city"') and name == "get_weather" else ("bad",)
    return CallOutcome(name, arguments, problems)


def test_rates_count_calls_replies_and_cases_separately() -> None:
    cases = [_case("a"), _case("b"), _case("c", "no_call")]
    outcomes = [
        CaseOutcome("a", False, (_call(), _call('{"city": "Rome"}')), "tool_calls"),
        CaseOutcome("a", True, (_call(), _call('{"city": "Rome"}')), "tool_calls"),
        CaseOutcome("b", False, (_call("{'city': 'Paris'}"),), "tool_calls"),  # not JSON
        CaseOutcome("b", True, (_call(),), "stop"),  # calls, but finish_reason says stop
        CaseOutcome("c", False, (), "stop"),
        CaseOutcome("c", True, error="HTTP 500"),
    ]
    result = score(cases, outcomes)
    assert (result.calls, result.errors) == (6, 1)
    assert (result.schema_valid.successes, result.schema_valid.total) == (5, 6)
    # Over the answered replies: the HTTP error is the "answered" check's finding, counted there.
    assert (result.finish_consistent.successes, result.finish_consistent.total) == (4, 5)
    # a agrees; b differs in arguments; c has an error on one side, so it is left out.
    assert (result.stream_agreement.successes, result.stream_agreement.total) == (1, 2)
    assert result.stream_left_out == 1
    assert result.by_shape["flat"]["valid_calls"] == 5 and result.by_shape["flat"]["errors"] == 1


def test_a_reply_cut_by_max_tokens_is_not_judged_nor_counted_as_consistent() -> None:
    cut = CaseOutcome("a", True, (CallOutcome("get_weather", "{\"city\": \"Par", ("not JSON",)),), "length")
    assert not cut.finish_judged and not cut.finish_consistent and not cut.calls[0].valid
    assert not CaseOutcome("a", True, (), "tool_calls").finish_consistent
    # Two cut replies and one judged consistent one: 1/1 judged, the cut ones counted apart.
    outcomes = [cut, CaseOutcome("a", False, (), "length"), CaseOutcome("b", False, (_call(),), "tool_calls"),
                CaseOutcome("b", True, error="HTTP 500")]
    result = score([_case("a"), _case("b")], outcomes)
    assert (result.finish_consistent.successes, result.finish_consistent.total, result.finish_cut) == (1, 1, 2)
    assert result.by_shape["flat"]["finish_inconsistent"] == 0


def test_replies_cut_by_max_tokens_are_left_out_of_the_stream_comparison() -> None:
    # Streamed, the cut call's first half arrives as a call; non-streamed, the parser keeps it as text.
    outcomes = [CaseOutcome("a", False, (), "length", content="<tool_call>{..."),
                CaseOutcome("a", True, (CallOutcome("get_weather", '{"ci', ("not JSON",)),), "length")]
    result = score([_case("a")], outcomes)
    assert (result.stream_agreement.total, result.stream_left_out) == (0, 1)


def test_trigger_confusion_against_a_reference() -> None:
    candidate = {("a", False): True, ("b", False): True, ("c", False): False, ("d", False): False}
    reference = {("a", False): True, ("b", False): False, ("c", False): True, ("d", False): False}
    value = confusion(candidate, reference)
    assert value == Confusion(both=1, only_candidate=1, only_reference=1, neither=1)
    assert (value.precision, value.recall, value.f1) == (0.5, 0.5, 0.5)
    # Nobody called: F1 is undefined, not 0 and not 1; agreement is what is left.
    silent = confusion({("a", False): False}, {("a", False): False})
    assert silent.f1 is None and silent.agreement.rate == 1.0


def test_a_baseline_is_refused_on_another_set_or_other_settings(tmp_path: Path) -> None:
    cases = [_case("a")]
    result = score(cases, [CaseOutcome("a", False, (_call(),), "tool_calls"),
                           CaseOutcome("a", True, (), "stop")])
    path = write_baseline(tmp_path / "b.json", set_sha256="abc", settings=RunSettings(96),
                          provenance={"engine": "e", "model": "m"}, score=result)
    loaded = load_baseline(path, set_sha256="abc", settings=RunSettings(96, concurrency=4))
    assert loaded.triggers == {("a", False): True, ("a", True): False}
    with pytest.raises(BaselineError, match="another tool-accuracy set"):
        load_baseline(path, set_sha256="def", settings=RunSettings(96))
    with pytest.raises(BaselineError, match="max_tokens.: 96.*this run sends.*512"):
        load_baseline(path, set_sha256="abc", settings=RunSettings(512))
    (tmp_path / "junk.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BaselineError, match="not JSON"):
        load_baseline(tmp_path / "junk.json", set_sha256="abc", settings=RunSettings(96))
    (tmp_path / "other.json").write_text(json.dumps({"format": 1}), encoding="utf-8")
    with pytest.raises(BaselineError, match="not a tool-accuracy baseline"):
        load_baseline(tmp_path / "other.json", set_sha256="abc", settings=RunSettings(96))


def test_policy_defaults_and_profile_overrides() -> None:
    policy = ToolAccuracyPolicy.from_profile({"max_tokens": 96, "min_schema_valid": 0.5})
    assert (policy.max_tokens, policy.min_schema_valid, policy.min_trigger_f1) == (96, 0.5, 0.95)
    assert policy.settings.as_dict() == {"max_tokens": 96, "temperature": 0.0}


def test_a_malformed_set_names_the_file_and_line(tmp_path: Path) -> None:
    good = {"id": "x", "shape": "flat", "expect": "call", "messages": [], "tools": [TOOL],
            "expected_tools": ["get_weather"]}
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "shape": "round"}) + "\n", encoding="utf-8")
    with pytest.raises(ToolSetError, match=r"cases.jsonl:2: shape 'round'"):
        load_cases(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(ToolSetError, match="appears twice"):
        load_cases(path)
    path.write_text(json.dumps({**good, "expected_tools": ["nope"]}) + "\n", encoding="utf-8")
    with pytest.raises(ToolSetError, match="not offered"):
        load_cases(path)


def test_error_kinds_list_every_kind_with_its_count_modes_and_cases_most_frequent_first() -> None:
    refused = "HTTP 400: roles must alternate"
    outcomes = ([CaseOutcome(f"multi-{i}", stream, error=refused) for i in range(4) for stream in (False, True)]
                + [CaseOutcome("flat-7", True, error="HTTP 500: {}"), CaseOutcome("flat-8", False)])
    assert error_kinds(outcomes) == [
        f"8 x {refused} [non-streamed and streamed: multi-0, multi-1, multi-2, ... (4 cases)]",
        "1 x HTTP 500: {} [streamed: flat-7]"]


def _engine(kind: str = "vllm", version: str | None = "0.32.0", model: str = "gemma-3-270m",
            url: str = "http://user:secret@ci-host:8000/v1?token=abc") -> EngineInfo:
    return EngineInfo(url=url, kind=kind, kind_source="test", version=version, model=model, models=[model])


def test_a_baseline_keeps_its_provenance_and_says_whose_it_is(tmp_path: Path) -> None:
    result = score([_case("a")], [CaseOutcome("a", False, (_call(),), "tool_calls"), CaseOutcome("a", True, (), "stop")])
    engine = _engine()
    provenance = provenance_of(engine, model_profile="gemma-3-270m")
    # Where: scheme, host and port only; no user, password, path or query (they may hold secrets).
    assert provenance["where"] == "http://ci-host:8000" and "secret" not in json.dumps(provenance)
    assert provenance["suite_version"] == engine_acceptance.__version__
    assert (provenance["engine"], provenance["engine_version"], provenance["model"]) == ("vllm", "0.32.0",
                                                                                         "gemma-3-270m")
    path = write_baseline(tmp_path / "b.json", set_sha256="abc", settings=RunSettings(96), provenance=provenance,
                          score=result)
    loaded = load_baseline(path, set_sha256="abc", settings=RunSettings(96))
    assert loaded.provenance == provenance and "vllm 0.32.0, model gemma-3-270m, at http://ci-host:8000" in loaded.label
    # The same engine identity: a regression against itself, and the report says it is not accuracy.
    assert comparison(loaded.provenance, engine) == AGAINST_ITSELF
    assert comparison(loaded.provenance, _engine(url="http://elsewhere:1")) == AGAINST_ITSELF
    # The same engine kind and model at another version: a regression across versions, naming both.
    across = comparison(loaded.provenance, _engine(version="0.33.0"))
    assert across == "the same engine and model at another version (0.32.0 → 0.33.0): a regression across versions"
    assert is_across_versions(across) and not is_across_versions(AGAINST_ANOTHER)
    assert comparison_text(across) == (f"{across}: this shows what the upgrade changed in its triggers, not that "
                                       "they are accurate")
    assert comparison(loaded.provenance, _engine(version=None)) == AGAINST_ITSELF  # unknown: the weaker claim
    assert comparison(loaded.provenance, _engine(kind="sglang")) == AGAINST_ANOTHER
    assert comparison(loaded.provenance, _engine(model="qwen3-8b")) == AGAINST_ANOTHER
    lines = summary_lines(result, confusion(result.triggers, loaded.triggers), loaded.label, AGAINST_ITSELF)
    assert "regression against itself" in lines[-1] and "not that they are accurate" in lines[-1]


def test_a_baseline_without_provenance_still_loads_as_provenance_unknown(tmp_path: Path) -> None:
    result = score([_case("a")], [CaseOutcome("a", False, (_call(),), "tool_calls"), CaseOutcome("a", True, (), "stop")])
    path = write_baseline(tmp_path / "b.json", set_sha256="abc", settings=RunSettings(96),
                          provenance={"engine": "vllm", "model": "m"}, score=result)
    old = json.loads(path.read_text(encoding="utf-8"))
    del old["provenance"]
    old["recorded_from"] = {"model": "m", "engine": "vllm 0.32.0", "recorded_at": "2026-12-01T20:47:09+0000"}
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = load_baseline(path, set_sha256="abc", settings=RunSettings(96))
    assert loaded.provenance is None and loaded.label.startswith("b.json (provenance unknown; it says m on vllm 0.32.0")
    assert comparison(loaded.provenance, _engine(model="m")) == UNKNOWN


@pytest.mark.parametrize("name, engine", [
    ("gemma-3-270m-vllm-0.32-cpu.json", _engine()),
    ("reference.json", _engine(version="0.1.0+reference", model="reference-model")),
])
def test_the_shipped_baselines_say_whose_they_are(name: str, engine: EngineInfo) -> None:
    """The CI gates vLLM on a baseline of that same vLLM: it must read as a regression against itself."""
    loaded = load_baseline(BASELINES_DIR / name, set_sha256=set_digest(CASES_FILE),
                           settings=RunSettings(json.loads((BASELINES_DIR / name).read_text())["settings"]["max_tokens"]))
    assert loaded.provenance is not None and comparison(loaded.provenance, engine) == AGAINST_ITSELF


def test_gate_json_and_the_table_list_the_baseline_and_what_the_comparison_is() -> None:
    provenance = provenance_of(_engine())
    gate = GateCollector()
    entry = baseline_entry("tool_accuracy", "base.json", provenance, _engine())
    gate.add("tests/test_tool_accuracy.py::test_tool_call_triggers_match_the_baseline", ["tool_accuracy"], "call",
             "passed", None, "", [(BASELINE_PROPERTY, json.dumps(entry)), ("tool_trigger_vs_baseline", "{}")])
    verdict = gate_json.document(gate)
    assert verdict["baselines"] == [{"kind": "tool_accuracy", "path": "base.json", "provenance": provenance,
                                     "comparison": "regression against itself"}]
    assert BASELINE_PROPERTY not in json.dumps(verdict["figures"])
    assert any(line.startswith("  baseline (tool_accuracy): regression against itself, base.json: vllm 0.32.0, "
                               "model gemma-3-270m, at http://ci-host:8000") for line in gate_table.lines(gate))
