"""End to end: the wire checks (issue 15, tests/test_wire.py) run by pytest against the reference engine.

A clean engine passes them all on both conventions (vLLM's usage in every chunk under
continuous_usage_stats, SGLang's in the output chunks only; SGLang's explicit nulls); an engine
profile without continuous_usage_stats skips that check in its own words; each injected defect
fails exactly the checks that exist for it. The streaming and tool checks run alongside, so a
wire defect that broke them would show, and ``tool-stream-index-zero`` fails its tool check too.
"""

from __future__ import annotations

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

pytestmark = pytest.mark.e2e

SELECTION = "wire or streaming or tools"
WIRE = "test_wire.py::"


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


EXPECTED_FAILURES = {
    "no-role-first-chunk": {f"{WIRE}test_first_chunk_of_the_stream_carries_the_assistant_role"},
    "usage-on-finish-chunk": {f"{WIRE}test_include_usage_sends_usage_once_in_a_final_chunk_without_choices"},
    "no-continuous-usage": {f"{WIRE}test_continuous_usage_stats_put_running_usage_in_the_chunks"},
    "finish-reason-twice": {f"{WIRE}test_each_choice_gets_exactly_one_finish_reason[n1]",
                            f"{WIRE}test_each_choice_gets_exactly_one_finish_reason[n2]"},
    "split-char-replacement": _both(f"{WIRE}test_cjk_and_emoji_reply_has_no_replacement_character"),
    "stream-content-type-json": {f"{WIRE}test_reply_has_the_content_type_and_framing_of_its_mode[streamed]"},
    # Parallel calls merged at index 0: the wire check, and every streamed view of the calls in test_tools.py.
    "tool-stream-index-zero": {f"{WIRE}test_tool_call_deltas_are_indexed_from_zero_in_call_order",
                               "test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn[streamed]",
                               "test_tools.py::test_tool_call_arguments_are_json_that_fits_the_schema[streamed]",
                               "test_tools.py::test_streamed_tool_calls_reassemble_to_the_non_streamed_calls"},
    # Reassembled by index the calls are right: only the raw indexes show it.
    "tool-index-from-one": {f"{WIRE}test_tool_call_deltas_are_indexed_from_zero_in_call_order"},
    # Every other client of the suite opens a connection per request: only the check that reuses one sees it.
    "stream-drops-connection": {f"{WIRE}test_a_streamed_reply_leaves_its_connection_open_for_the_next_request"},
}
# What a failure says, where the defect's words are the point (llama-server b11312's record matches them).
MESSAGES = {
    "stream-drops-connection": ["*the engine closed the connection after a streamed reply without saying so (no "
                                "'Connection: close')*"],
}


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_clean_engine_passes_every_wire_check(pytester: pytest.Pytester, convention: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--convention", convention)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    wire = {test: outcome for test, outcome in outcomes.items() if test.startswith(WIRE)}
    # 1 role + 1 usage + 1 continuous + 2 finish + 1 tools + 2 U+FFFD + 2 framing + 1 connection: each ran and passed.
    assert len(wire) == 11 and set(wire.values()) == {"passed"}, wire


def test_an_engine_profile_without_continuous_usage_skips_that_check_naming_the_key(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "wire", "-k", "continuous_usage", "--engine", "generic")
    assert outcomes == {f"{WIRE}test_continuous_usage_stats_put_running_usage_in_the_chunks": "skipped"}, outcomes
    result.stdout.fnmatch_lines(["*engine profile 'generic'*features.continuous_usage_stats: false*"])


@pytest.mark.parametrize("defect", sorted(EXPECTED_FAILURES))
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--inject", defect)
    assert failed(outcomes) == EXPECTED_FAILURES[defect], result.stdout.str()[-3000:]
    assert result.ret == 1
    if defect in MESSAGES:
        result.stdout.fnmatch_lines(MESSAGES[defect])
