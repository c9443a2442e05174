"""End to end: the thinking, tool and code checks run by pytest against the reference engine.

A clean engine passes them all, on both conventions; each injected defect fails
exactly the checks that exist for it; an effort sent where the engine does not read
it fails the effort check; and a model profile without the capabilities (what the
CI's real vLLM serving Gemma 3 270M gets: the generic profile) skips every one of
them with the capability as the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

from engine_acceptance.reference_engine.code_answers import HOSTILE_MARKER_PATH

pytestmark = pytest.mark.e2e

SELECTION = "thinking or tools or code_exec"


def _both(test: str) -> set[str]:
    return {f"{test}[non-streamed]", f"{test}[streamed]"}


EXPECTED_FAILURES = {
    "ignore-thinking-off": _both("test_thinking.py::test_disabled_mode_answers_in_content_without_reasoning"),
    "single-tool-call": _both("test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn"),
    "bad-tool-json": _both("test_tools.py::test_tool_call_arguments_are_json_that_fits_the_schema"),
    "tool-markup-in-content": _both("test_tools.py::test_content_has_no_tool_markup_or_guessed_weather"),
    # Merged fragments are one call with two argument objects: every streamed view of the calls breaks.
    "tool-stream-index-zero": {
        "test_tools.py::test_model_calls_get_weather_for_both_cities_in_one_turn[streamed]",
        "test_tools.py::test_tool_call_arguments_are_json_that_fits_the_schema[streamed]",
        "test_tools.py::test_streamed_tool_calls_reassemble_to_the_non_streamed_calls",
    },
    "ignore-tool-choice": _both("test_tools.py::test_tool_choice_none_answers_in_text_without_calls")
    | _both("test_tools.py::test_forced_named_tool_is_called"),
    "malicious-code": {"test_code_exec.py::test_unique_sorted_passes_the_hidden_cases_in_the_sandbox"},
}


def _attachments(pytester: pytest.Pytester, suffix: str) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in (pytester.path / "allure-results").glob(f"*{suffix}")]


def test_clean_engine_passes_and_the_report_has_the_240_table(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    assert set(outcomes.values()) == {"passed"}, outcomes
    tables = "\n".join(_attachments(pytester, "-attachment.csv"))
    for mode in ("disabled", "adaptive", "enabled"):
        # K = 5, the default trials of kind thinking.
        assert f"{mode},5/5,240 240 240 240 240" in tables, tables
    sandbox = "\n".join(_attachments(pytester, "-attachment.json"))
    assert '"landlock"' in sandbox and '"rlimits"' in sandbox, "the sandbox layers are not in the report"


def test_sglang_convention_passes(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--convention", "sglang")
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]


@pytest.mark.parametrize("defect", sorted(EXPECTED_FAILURES))
def test_injected_defect_fails_only_its_checks(pytester: pytest.Pytester, defect: str) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--inject", defect)
    assert failed(outcomes) == EXPECTED_FAILURES[defect], result.stdout.str()[-3000:]
    assert result.ret == 1


def test_reasoning_that_never_closes_is_named_not_only_empty_content(pytester: pytest.Pytester) -> None:
    # The real vLLM with its qwen3 parser and pretrained Gemma 3 270M (issue 40): thinking on, the model
    # never writes </think>, so the whole reply is reasoning and content is empty. The checks say why.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "--trials=1", "-m", "thinking or text",
                                 "-k", "enabled_mode or reasoning_arrives", "--inject", "reasoning-never-closes")
    assert failed(outcomes) == _both("test_thinking.py::test_enabled_mode_returns_reasoning_apart_from_content") \
        | _both("test_reasoning_separation.py::test_reasoning_arrives_in_the_reasoning_field_not_in_content"), \
        result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines_random([
        "*thinking enabled: the reasoning used up max_tokens (* completion tokens, finish_reason 'length') before any "
        "answer: content is empty after * characters of reasoning*",
        "*AssertionError: the reasoning used up max_tokens (*finish_reason 'length') before any answer: content is "
        "empty after * characters of reasoning*",
    ])
    assert result.ret == 1


def test_malicious_code_is_refused_by_the_allow_list_and_never_runs(pytester: pytest.Pytester) -> None:
    if os.path.exists(HOSTILE_MARKER_PATH):
        os.remove(HOSTILE_MARKER_PATH)
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "code_exec", "--inject", "malicious-code")
    result.stdout.fnmatch_lines(["*fails the allow-list and was not run*import of os, socket*"])
    assert not Path(HOSTILE_MARKER_PATH).exists()


def test_effort_sent_where_the_engine_does_not_read_it_fails_the_effort_check(pytester: pytest.Pytester) -> None:
    # An SGLang-like engine reads the top-level field; the vLLM profile puts it in chat_template_kwargs. The same
    # profile sends vLLM's thinking_token_budget, which that engine ignores as SGLang does: the budget is broken.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "thinking", "--convention", "sglang", "--engine", "vllm")
    budget = "test_reasoning_budget.py::test_reasoning_stays_within_the_thinking_budget_and_the_answer_still_comes"
    assert failed(outcomes) == {"test_thinking.py::test_high_effort_reasons_more_than_low_effort",
                                f"{budget}[non-streamed]", f"{budget}[streamed]"}, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*seems not to reach the model*"])
    result.stdout.fnmatch_lines(["*thinking_budget found broken by capability discovery (the reasoning ran * tokens "
                                 "with thinking_token_budget=32*"])


def test_a_profile_without_the_capabilities_skips_every_check_with_the_reason(pytester: pytest.Pytester) -> None:
    # No profile declares them and the deployment does not serve them: skipped in the engine's words.
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", SELECTION, "--profile", "generic",
                                 "--reference-serves=no-tool-parser", "--reference-serves=no-reasoning")
    code = "test_code_exec.py::test_unique_sorted_passes_the_hidden_cases_in_the_sandbox"
    # Writing code is a text task: tested on every deployment.
    assert outcomes.pop(code) == "passed", result.stdout.str()[-3000:]
    assert outcomes and set(outcomes.values()) == {"skipped"}, outcomes
    text = result.stdout.str()
    assert "not served by the engine: HTTP 400: \"auto\" tool choice requires" in text, text[-3000:]
    assert "not served by the engine: no reasoning in the reply" in text, text[-3000:]
    assert "does not declare 'reasoning_effort' and no probe found it" in text, text[-3000:]