"""What records are matched against: a problem's own words, without exception type and discovery lead (issue 39)."""

from __future__ import annotations

import pytest

from engine_acceptance.profiles.expectations import FailureDescription
from engine_acceptance.profiles.generic_texts import GENERIC_PROBLEMS
from engine_acceptance.profiles.problem_text import discovery_lead, exception_type, problem_text, split_problem

EVIDENCE = ("pure-red-512.png: image_url part dropped: prompt_tokens 7 with the image, 7 without (the engine answered "
            "200 but did not read the image)")
LEAD = discovery_lead("image", EVIDENCE)


@pytest.mark.parametrize(("text", "words"), [
    ("AssertionError: no usage in the reply", "no usage in the reply"),
    ("Failed: only 2 of 319 cases", "only 2 of 319 cases"),
    ("openai.InternalServerError: Error code: 500 - {}", "Error code: 500 - {}"),
    ("engine_acceptance.assertions.SeveralProblems: problems (2): a | b", "problems (2): a | b"),
    ("AssertionError", ""),
    # A problem's own words may start with a name and a colon: only exception types are taken off.
    ("function_call.arguments: arguments are not JSON", "function_call.arguments: arguments are not JSON"),
    ("usage.total_tokens=3 but 1 + 1 = 2", "usage.total_tokens=3 but 1 + 1 = 2"),
    (f"AssertionError: {LEAD}the answer names no colour: '(1)'", "the answer names no colour: '(1)'"),
    (f"sample 2: {LEAD}expected the values", "sample 2: expected the values"),
    # Evidence cut in the middle of a parenthesis of its own: the first "); " closes the lead.
    ("video found broken by capability discovery (HTTP 400: {\"message\": \"bad (unclosed…); expected red",
     "expected red"),
], ids=["assertion", "failed", "sdk", "several", "bare-type", "word-and-colon", "usage", "lead", "sample-lead",
        "cut-evidence"])
def test_problem_text_is_the_failure_without_its_type_and_leads(text: str, words: str) -> None:
    assert problem_text(text) == words


def test_split_problem_says_what_it_took_off() -> None:
    removed, words = split_problem(f"AssertionError: {LEAD}expected red")
    assert removed == ["AssertionError: ", LEAD] and words == "expected red"
    assert exception_type("Failed: only") == "Failed: " and exception_type("only 2 of 3") is None


def test_session_leads_a_broken_capabilitys_failures_with_the_shape_that_is_taken_off() -> None:
    assert LEAD == f"image found broken by capability discovery ({EVIDENCE}); "


def test_a_record_matches_the_problem_not_the_prefixes_every_failure_carries() -> None:
    lead_only = FailureDescription(message="found broken by capability discovery")
    type_only = FailureDescription(message="AssertionError")
    problem = FailureDescription(message="the answer names no colour")
    message = f"AssertionError: {LEAD}the answer names no colour: '(1)'"
    assert problem.matches(message)
    assert not lead_only.matches(message) and not type_only.matches(message)
    # The category is read from the words too: the HTTP 400 of the probe's evidence is not this problem's.
    tools_lead = discovery_lead("tools", "POST /v1/chat/completions: HTTP 400: Error in extracting tool call")
    wrong_city = f"AssertionError: {tools_lead}no get_weather call for 北京: get_weather(city='广州')"
    assert FailureDescription(message="no get_weather call for 北京", category="Wrong answer").matches(wrong_city)
    assert not FailureDescription(message="no get_weather call", category="Protocol violation").matches(wrong_city)


def test_every_sample_problem_has_words_of_its_own_and_the_kinds_differ() -> None:
    assert all(sample.words.strip() for sample in GENERIC_PROBLEMS)
    kinds = [sample.kind for sample in GENERIC_PROBLEMS]
    assert len(set(kinds)) == len(kinds)
