"""End to end: the API-contract checks (issue 15) run by pytest against the reference engine.

A clean engine passes them all, on both conventions (SGLang's flat error bodies, its model
name not checked); each injected defect fails exactly the checks that exist for it; an engine
that dies on an invalid value fails the keeps-serving check and the run still ends.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

from engine_acceptance.failure_categories import failure_category

pytestmark = pytest.mark.e2e

SELECTION = "structured_outputs or error_codes or sampling"
# The cases of invalid values (a request error); "image-url-unreachable" is a media refusal, apart.
ERROR_CASES = ("temperature-below-zero", "n-zero", "max-tokens-zero", "unknown-model", "message-without-role",
               "tool-result-without-call", "prompt-over-context")


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


def _fields(test: str, *fields: str) -> set[str]:
    return {f"{test}[{mode}-{field}]" for mode in ("non-streamed", "streamed") for field in fields}


def _every_case(test: str) -> set[str]:
    return {f"test_error_codes.py::{test}[{mode}-{case}]" for mode in ("non-streamed", "streamed")
            for case in ERROR_CASES}


STATUS = "test_invalid_request_is_refused_with_4xx"
BODY = "test_refusal_has_an_error_body_that_names_the_problem"
STRUCTURED = "test_structured_outputs.py::"
LOGPROBS = "test_logprobs_have_one_entry_per_token_with_k_distinct_alternatives"
MAX_TOKENS = "test_sampling.py::test_max_tokens_ends_the_reply_with_length_at_exactly_that_many_tokens"
EXPECTED_FAILURES = {
    "ignore-response-format": _both(f"{STRUCTURED}test_json_schema_reply_is_json_that_fits_the_schema")
    | _both(f"{STRUCTURED}test_json_object_reply_is_a_json_object")
    | _both(f"{STRUCTURED}test_with_thinking_on_reasoning_stays_out_of_the_json"),
    "structured-reasoning-in-content": _both(f"{STRUCTURED}test_with_thinking_on_reasoning_stays_out_of_the_json"),
    "schema-500": _both(f"{STRUCTURED}test_schema_the_engine_cannot_compile_is_refused_with_4xx"),
    "bad-params-500": _every_case(STATUS),
    # Answered 200: no refusal, and so no error body either.
    "accept-bad-params": _every_case(STATUS) | _every_case(BODY),
    "error-body-plain": _every_case(BODY),
    "stop-included": _both("test_sampling.py::test_stop_string_ends_the_reply_and_is_not_included"),
    # The n check counts each choice's tokens by max_tokens: an engine ignoring it fails there too.
    "max-tokens-ignored": _fields(MAX_TOKENS, "max_tokens", "max_completion_tokens")
    | _both("test_sampling.py::test_n_choices_are_indexed_and_usage_counts_them_all"),
    "max-completion-tokens-ignored": _fields(MAX_TOKENS, "max_completion_tokens"),
    "n-ignored": _both("test_sampling.py::test_n_choices_are_indexed_and_usage_counts_them_all"),
    "top-logprobs-duplicated": _both(f"test_sampling.py::{LOGPROBS}"),
    # The deltas' entries are right; only the stream's finish chunk repeats them.
    "stream-logprobs-repeated": {f"test_sampling.py::{LOGPROBS}[streamed]"},
    # Of the error cases, only an image the engine cannot fetch is a media refusal.
    "media-500": {f"test_error_codes.py::{STATUS}[{mode}-image-url-unreachable]"
                  for mode in ("non-streamed", "streamed")},
}


def test_clean_engine_passes_every_contract_check(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    assert outcomes and set(outcomes.values()) == {"passed"}, outcomes
    result.stdout.fnmatch_lines(["*structured_outputs*yes*served*passed*"])


def test_sglang_convention_passes_and_skips_only_the_unknown_model_with_the_reason(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--convention", "sglang")
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    skipped = {test for test, outcome in outcomes.items() if outcome == "skipped"}
    assert skipped == {f"test_error_codes.py::{test}[{mode}-unknown-model]" for test in (STATUS, BODY)
                       for mode in ("non-streamed", "streamed")}, outcomes
    result.stdout.fnmatch_lines(["*features.rejects_unknown_model: false*"])


@pytest.mark.parametrize("defect", sorted(EXPECTED_FAILURES))
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--inject", defect)
    assert failed(outcomes) == EXPECTED_FAILURES[defect], result.stdout.str()[-3000:]
    assert result.ret == 1


def test_a_500_on_invalid_values_is_filed_as_an_engine_error(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "error_codes", "-k", "refused_with_4xx and temperature",
                          "--inject", "bad-params-500")
    result.stdout.fnmatch_lines(["*temperature -1: server error on client data: HTTP 500*"])
    messages = [json.loads(path.read_text(encoding="utf-8"))["statusDetails"]["message"]
                for path in (pytester.path / "allure-results").glob("*-result.json")]
    assert len(messages) == 2, messages
    assert {failure_category(message) for message in messages} == {"Engine error (5xx)"}, messages


def test_an_engine_that_dies_on_an_invalid_value_fails_the_keeps_serving_check(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "error_codes", "-k", "keeps_serving", "--inject",
                                 "bad-params-crash", "--idle-timeout", "10", "--request-timeout", "20")
    assert result.ret == 1, result.stdout.str()[-3000:]
    assert outcomes == {"test_error_codes.py::test_engine_keeps_serving_after_invalid_requests": "failed"}, outcomes
    result.stdout.fnmatch_lines(["*the engine stopped serving: after temperature -1*"])


def test_an_engine_that_refuses_response_format_skips_the_structured_checks_in_its_words(
        pytester: pytest.Pytester) -> None:
    # No profile declares structured outputs and the probe got a clear 400: not served, skipped with the reason.
    # SGLang's refusal (--grammar-backend none): vLLM 0.32 has none, so under its convention this is broken.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "structured_outputs", "--profile", "generic", "--convention",
                                 "sglang", "--reference-serves=no-structured-outputs")
    assert outcomes and set(outcomes.values()) == {"skipped"}, outcomes
    # Alone in the selection, a run that skipped everything is no pass: "no check ran".
    assert result.ret == 1 and "no check ran" in result.stdout.str(), result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*not served by the engine: HTTP 400: Grammar-based generation (json_schema, regex, "
                                 "ebnf, structural_tag) is not supported when the server is launched with "
                                 "--grammar-backend none*"])


def test_a_seed_that_does_not_repeat_is_a_warning_not_a_failure(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "sampling", "-k", "seed", "--inject", "seed-ignored")
    assert result.ret == 0 and outcomes and set(outcomes.values()) == {"passed"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*ObservationWarning: seed 1234 at temperature 1.0 gave two different replies*"])
    figures = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))["figures"]
    assert [f["seed_repeated"] for f in figures.values() if "seed_repeated" in f] == [False, False], figures


def test_an_image_the_engine_cannot_fetch_is_asked_only_where_images_are_served(pytester: pytest.Pytester) -> None:
    # A model no profile names: what it serves is discovered, and image input is not.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "error_codes", "-k", "unreachable or keeps_serving",
                                 "--reference-model=acme-chat-7b", "--reference-serves=text-only")
    assert result.ret == 0, result.stdout.str()[-3000:]
    unreachable = {test: outcome for test, outcome in outcomes.items() if "unreachable" in test}
    assert len(unreachable) == 4 and set(unreachable.values()) == {"skipped"}, outcomes
    assert outcomes["test_error_codes.py::test_engine_keeps_serving_after_invalid_requests"] == "passed", outcomes
    result.stdout.fnmatch_lines(["*skipped: not served by the engine: *acme-chat-7b is not a multimodal model*"])
