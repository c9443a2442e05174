"""Nothing reads PASS that the suite did not see working (issue 39, parts 2 and 3), end to end.

Each run is the README's command against the reference engine under a model name no profile
knows (``qwen3-8b``: the generic model profile, every capability discovered), with two xdist
workers, where the verdict before issue 39 printed ``GATE: PASS``:

- ``tokenize-500``: ``POST /tokenize`` answers 500. Discovery said "tokenize broken", the
  measurements then said "no /tokenize and no --tokenizer" (false: it answered, broken) and
  the gate passed. Now tokenize has a row of its own whose broken fails the gate, quoting the
  engine and naming ``--tokenizer``, and every fallback says "broken" in the probe's words.
- ``tools-answered-in-text``: the model never calls a tool; records excuse every check that
  needs a call, and ``--expect tools`` requires tools. The row read "passed (9 known
  defect(s))" on the checks that found no call to look at ([] == [] passed). Now those skip,
  saying what the model answered, no *core* check (one that makes and parses a call) passed,
  and the required capability is known broken: the gate fails.
- ``tool-parser-400`` with ``-m text``: discovery found tools broken, ``-m`` selected none of
  its checks, and the row read "not selected in this run" under a green gate. Now it reads
  "broken (discovered); its checks were not selected" and the gate failure names
  ``--not-served tools``.

The default-selection runs' measurements are at suite_runner's smaller sizes with recall at 4,096
tokens: what is proven here is the verdict, not a measurement. They keep the engine's latency
model, which the cancellation checks need (a request answered at once cannot be abandoned).
"""

from __future__ import annotations

import json

import pytest
from suite_runner import NO_LATENCY, SMALLER_MEASUREMENTS, failed, run_suite

pytestmark = pytest.mark.e2e

UNPROFILED = "--reference-model=qwen3-8b"
# The default selection, its measurements smaller (see the module docstring), on two workers.
DEFAULT_SELECTION = (UNPROFILED, "-n", "2", "--recall-tokens=4096",
                     *(arg for arg in SMALLER_MEASUREMENTS if not arg.startswith("--recall-tokens=")))
TOKENIZE_CRASH = "POST /tokenize: HTTP 500: Internal server error: AttributeError: 'NoneType' object has no attribute"

# The checks that need a tool call fail on a model that never calls one; each failure is recorded.
NEVER_CALLS_RECORDS = """
records:
""" + "".join(f"""
  - check: "{check}"
    engine: vllm
    model: "^qwen3-8b$"
    reason: "the model answers in text instead of calling a tool (injected for the self-test)"
    source: selftest
    date: "2026-12-05"
    failure:
      message: "{message}"
""" for check, message in [
    ("test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn[*]",
     "expected parallel calls for 广州, 北京 in one turn, got no tool calls"),
    ("test_tools.py::test_tool_call_arguments_are_json_that_fits_the_schema[*]", "no tool calls to check"),
    ("test_tools.py::test_forced_named_tool_is_called[*]", "tool_choice forces get_weather, yet no call was made"),
    ("test_tool_accuracy.py::test_tool_call_arguments_fit_their_schemas_at_scale", "no tool call in \\\\d+ replies"),
    ("test_responses.py::test_function_call_round_trip_answers_the_result_in_text[*]",
     "tool_choice names get_weather, yet the response has no function_call item"),
    # The agent loop's first turn must call get_weather: without a call the loop cannot go on.
    *((f"test_agent_loop.py::{check}[*]", "turn 1: the model called no tool for '.*', so the loop cannot go on")
      for check in ("test_agent_loop_answers_from_the_tool_results_over_four_turns",
                    "test_agent_loop_keeps_reasoning_apart_from_content_in_every_turn",
                    "test_prompt_tokens_grow_with_the_history_and_count_it_all")),
])


def _gate(pytester: pytest.Pytester) -> tuple[dict, dict]:
    verdict = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    return verdict, {row["name"]: row for row in verdict["capabilities"]}


def _gate_json(pytester: pytest.Pytester) -> str:
    return f"--gate-json={pytester.path / 'gate.json'}"


def test_a_tokenize_endpoint_answering_500_fails_the_gate_and_is_never_called_absent(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *DEFAULT_SELECTION, "--inject", "tokenize-500", _gate_json(pytester),
                                 in_process=False)
    out = result.stdout.str()
    verdict, rows = _gate(pytester)
    assert result.ret == 1 and verdict["gate"] == "fail", out[-3000:]
    assert not failed(outcomes), failed(outcomes)  # every check passed or skipped: the probe alone fails it
    assert rows["tokenize"]["discovered"] == "broken" and TOKENIZE_CRASH in rows["tokenize"]["evidence"]
    assert verdict["gate_failures"] == [rows["tokenize"]["coverage_failure"]]
    assert rows["tokenize"]["coverage_failure"].startswith(f"capability 'tokenize' is broken (discovered: "
                                                           f"{TOKENIZE_CRASH}")
    assert "count locally with --tokenizer FILE" in rows["tokenize"]["coverage_failure"]
    # Where the measurements fall back to estimates, they say the endpoint is broken, in the probe's words.
    assert "no /tokenize" not in out and "no tokenize endpoint (" not in out
    broken = f"the engine's tokenize endpoint is broken ({TOKENIZE_CRASH}"
    result.stdout.fnmatch_lines([f"*throughput 128/128@1:*prompts from text cut to an estimated length ({broken}*"
                                 "and no --tokenizer)*",
                                 f"*recall prompt length:*approximate: {broken}*and no --tokenizer*"],
                                consecutive=False)
    skips = {entry["reason"] for entry in verdict["skipped"]}
    assert any(reason.startswith(broken) for reason in skips), skips
    result.stdout.fnmatch_lines(["tokenize *broken *FAIL: broken (discovered): POST /tokenize: HTTP 500: Internal*",
                                 "  GATE FAILURE: capability 'tokenize' is broken*", "GATE: FAIL*"])


def test_a_required_capability_whose_only_passes_found_nothing_to_look_at_is_known_broken(
        pytester: pytest.Pytester) -> None:
    profiles = pytester.path / "profiles"
    (profiles / "expectations").mkdir(parents=True)
    (profiles / "expectations" / "never-calls.yaml").write_text(NEVER_CALLS_RECORDS, encoding="utf-8")
    result, outcomes = run_suite(pytester, *DEFAULT_SELECTION, "--inject", "tools-answered-in-text",
                                 f"--profiles-dir={profiles}", "--expect", "tools", _gate_json(pytester),
                                 in_process=False)
    out = result.stdout.str()
    verdict, rows = _gate(pytester)
    assert result.ret == 1 and verdict["gate"] == "fail", out[-3000:]
    assert not failed(outcomes), failed(outcomes)  # each failure is a record's
    tools = rows["tools"]
    # 15 known: 9 of them core checks', and the agent loop's 6, which need a call but are no core check of tools.
    assert tools["known"] == 15 and tools["passed"] > 0 and not tools["tested"], tools
    assert verdict["gate_failures"] == [tools["coverage_failure"]]
    assert tools["coverage_failure"].startswith(
        "required capability 'tools' is known broken: no core check (one that exercises tools itself) passed, 9 failed "
        "as expected-failure records describe and 3 skipped (neither reply called a tool"), tools
    # The checks that compared no call with no call skip, quoting what the model answered.
    skipped = {entry["id"].split("/")[-1]: entry["reason"] for entry in verdict["skipped"]}
    reassembly = "test_tools.py::test_streamed_tool_calls_reassemble_to_the_non_streamed_calls"
    at_scale = "test_tool_accuracy.py::test_streamed_tool_calls_equal_non_streamed_at_scale"
    assert outcomes[reassembly] == outcomes[at_scale] == "skipped", outcomes
    assert outcomes["test_wire.py::test_tool_call_deltas_are_indexed_from_zero_in_call_order"] == "skipped"
    assert skipped[reassembly].startswith("neither reply called a tool, so there are no calls to compare "
                                          "(non-streamed finish_reason 'stop', content '"), skipped
    assert skipped[at_scale].startswith("no tool call in any of the 40 cases compared (streamed or not)"), skipped
    result.stdout.fnmatch_lines(["tools *served *yes *FAIL: required capability 'tools' is known broken*",
                                 "GATE: FAIL*"], consecutive=False)


def test_a_capability_found_broken_whose_checks_m_did_not_select_fails_the_gate(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, UNPROFILED, "-n", "2", *NO_LATENCY, "--inject", "tool-parser-400",
                                 "-m", "text", _gate_json(pytester), in_process=False)
    verdict, rows = _gate(pytester)
    assert result.ret == 1 and verdict["gate"] == "fail", result.stdout.str()[-3000:]
    assert outcomes and not failed(outcomes) and not any(test.startswith("test_tools") for test in outcomes)
    tools = rows["tools"]
    assert tools["result"] == "FAIL: broken (discovered); its checks were not selected", tools
    assert verdict["gate_failures"] == [tools["coverage_failure"]]
    assert "HTTP 400: Error in extracting tool call from response: JSONDecodeError" in tools["coverage_failure"]
    assert "--not-served tools" in tools["coverage_failure"]
    result.stdout.fnmatch_lines(["tools *broken *0 *0  FAIL: broken (discovered); its checks were not selected",
                                 "  GATE FAILURE: capability 'tools' is broken (discovered: HTTP 400: Error in "
                                 "extracting tool call*--not-served tools*", "GATE: FAIL*"], consecutive=False)
