"""End to end: the Responses API checks (issue 15) run by pytest against the reference engine.

A clean engine passes them all on both conventions (SGLang serves /v1/responses too, from
``entrypoints/openai/serving_responses.py``); each injected defect fails exactly the checks
that exist for it; an engine without the endpoint skips them with its own words (404).
"""

from __future__ import annotations

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

pytestmark = pytest.mark.e2e

MODULE = "test_responses.py::"
TEXT = f"{MODULE}test_text_answer_is_a_message_with_output_text_and_usage_that_adds_up"
ROUND_TRIP = f"{MODULE}test_function_call_round_trip_answers_the_result_in_text"
REASONING = f"{MODULE}test_reasoning_is_an_item_apart_from_the_output_text"


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


EXPECTED_FAILURES = {
    "responses-bad-usage": _both(TEXT),
    "responses-events-out-of-order": {f"{MODULE}test_streamed_events_come_in_order"},
    "responses-completed-text-truncated": {f"{MODULE}test_streamed_text_deltas_add_up_to_the_final_text"},
    # Only a stream has two places to name a call: non-streamed there is one call_id.
    "responses-call-id-changed": {f"{ROUND_TRIP}[streamed]"},
    "responses-reasoning-in-output": _both(REASONING),
}
CHECKS = 8


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_clean_engine_passes_every_responses_check(pytester: pytest.Pytester, convention: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "responses", "--convention", convention)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    assert len(outcomes) == CHECKS and set(outcomes.values()) == {"passed"}, outcomes
    result.stdout.fnmatch_lines(["*responses*yes*served*passed*"])


@pytest.mark.parametrize("defect", sorted(EXPECTED_FAILURES))
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "responses", "--inject", defect)
    assert failed(outcomes) == EXPECTED_FAILURES[defect], result.stdout.str()[-3000:]
    assert result.ret == 1


def test_failures_say_what_broke(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "responses", "-k", "deltas or round_trip", "--inject",
                          "responses-completed-text-truncated", "--inject", "responses-call-id-changed")
    result.stdout.fnmatch_lines([
        "*the final response's text has * characters *, the deltas * (*",
        # fnmatch reads [...] as a character class: the call_id lists are matched by *.
        "*the stream's function_call items have call_id *'call_*, response.completed has *'call_*",
    ], consecutive=False)


def test_an_engine_without_the_responses_api_skips_the_checks_in_its_words(pytester: pytest.Pytester) -> None:
    # No profile declares the capability and the probe got a 404: not served, skipped with the reason.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "responses", "--profile", "generic",
                                 "--reference-serves=no-responses")
    assert len(outcomes) == CHECKS and set(outcomes.values()) == {"skipped"}, outcomes
    # Alone in the selection, a run that skipped everything is no pass: "no check ran".
    assert result.ret == 1 and "no check ran" in result.stdout.str(), result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*not served by the engine: POST /v1/responses: HTTP 404: Not Found*"])


def test_a_required_responses_api_that_is_not_served_fails_the_gate(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "responses", "--profile", "generic",
                                 "--reference-serves=no-responses", "--expect", "responses")
    assert result.ret == 1 and failed(outcomes), outcomes
    result.stdout.fnmatch_lines(["*required capability 'responses'*404*"])
