"""Expected-failure records cover only the failure they describe (issue 13, point 5).

A record's ``failure`` (a message regex and/or the report's failure category) must fit
how the check failed; any other failure of a recorded check is a gate failure whose
first line names the record and the real failure, in the terminal, gate.json and Allure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from allure_results import read_results
from suite_runner import NO_LATENCY, REPO, run_suite

from engine_acceptance.profiles.expectations import EXPECTATIONS_DIR, FailureDescription, load_expectations
from engine_acceptance.profiles.problem_text import discovery_lead
from engine_acceptance.profiles.profile import ProfileError
from engine_acceptance.assertions import SeveralProblems, problems_failure
from engine_acceptance.pytest_plugin.records import MISMATCH, judge, mismatch_line
from engine_acceptance.pytest_plugin.allure_report import FAILURE_CATEGORIES, failure_category
from engine_acceptance.reporting.allure_files import write_categories

# Failure messages as allure-pytest and the records see them (ExceptionInfo.exconly()),
# worded as tests/test_corrupt_media.py words them through media_checks.refusal_problem.
SAMPLE = "AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as image_url: "
HTTP_500 = (SAMPLE + 'server error on client data: HTTP 500, body {"object": "error", "message": "Internal server '
            'error: RuntimeError: cannot identify image file"}\nassert \'server error…\' is None')
HANG = SAMPLE + "no answer within the idle timeout: the engine hangs on it (total timeout after 60 s)\nassert ..."
ACCEPTED = SAMPLE + "the engine accepted it: HTTP 200, content 'A red square on a white page'\nassert ..."
CRASHED = SAMPLE + "the connection failed, the engine may have crashed (APIConnectionError: Connection error.)"

USAGE_CHECK = "tests/test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion"


def _records(tmp_path: Path, records: list[dict], name: str = "records.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"records": records}, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def _record(check: str, failure: dict | None, **extra: str) -> dict:
    record = {"check": check, "engine": "*", "model": "^reference-model$",
              "reason": "a defect injected for the self-test", "source": "selftest", "date": "2026-11-29", **extra}
    if failure is not None:
        record["failure"] = failure
    return record


# --- matching -------------------------------------------------------------------------

def test_failure_matches_by_message_by_category_by_both_and_not_otherwise() -> None:
    by_message = FailureDescription(message=r"server error on client data: HTTP 500\b")
    by_category = FailureDescription(category="Engine error (5xx)")
    both = FailureDescription(message=r"server error on client data: HTTP 500\b", category="Engine error (5xx)")
    for description in (by_message, by_category, both):
        assert description.matches(HTTP_500)
        for other in (HANG, ACCEPTED, CRASHED):  # neither the message nor the category fits
            assert not description.matches(other), (description, other)
    # Both given, both must hold: the message fits the hang, its category is not the one named.
    assert not FailureDescription(message="corrupt sample", category="Engine error (5xx)").matches(HANG)
    assert FailureDescription(message="corrupt sample", category="Timeout or hang").matches(HANG)
    assert FailureDescription(category="Wrong answer").matches(ACCEPTED)
    # The message regex is searched, not anchored, and case-sensitive unless it says (?i).
    assert FailureDescription(message="HTTP 500").matches(HTTP_500)
    assert not FailureDescription(message="http 500").matches(HTTP_500)


def test_category_is_the_one_allure_reads_from_categories_json(tmp_path: Path) -> None:
    """A record's category and the report's come from one table, so they never disagree."""
    rules = json.loads(write_categories(tmp_path).read_text(encoding="utf-8"))

    def as_allure_reads_it(message: str, status: str) -> str | None:  # Allure 2: first rule, String.matches
        return next((rule["name"] for rule in rules if status in rule["matchedStatuses"]
                     and ("messageRegex" not in rule or re.fullmatch(rule["messageRegex"], message))), None)

    assert set(FAILURE_CATEGORIES) <= {rule["name"] for rule in rules}
    samples = [(HTTP_500, "failed"), (HANG, "failed"), (ACCEPTED, "failed"), (CRASHED, "failed"),
               ("AssertionError: the stream did not end with data: [DONE]", "failed"),
               ("Failed: engine unreachable since 12:00:01 (connection refused)", "failed"),
               ("RuntimeError: fixture blew up", "broken")]
    for message, status in samples:
        assert failure_category(message, status) == as_allure_reads_it(message, status), message
    assert [failure_category(m) for m in (HTTP_500, HANG, ACCEPTED)] == [
        "Engine error (5xx)", "Timeout or hang", "Wrong answer"]
    assert failure_category("RuntimeError: fixture blew up", "broken") == "Broken test (suite error)"


def test_mismatch_line_names_the_record_and_the_real_failure(tmp_path: Path) -> None:
    path = _records(tmp_path, [_record("test_corrupt_media.py::*", {"category": "Engine error (5xx)",
                                                                    "message": "server error on client data"})])
    line = mismatch_line(load_expectations([path]), HANG)
    assert line == (f"{MISMATCH}: record records.yaml#0 expects category 'Engine error (5xx)' and a message matching "
                    f"/server error on client data/; got: [Timeout or hang] {HANG.splitlines()[0]}")


# --- a record excuses only its own problem (issue 26, point 3) ---------------------------

NO_USAGE = ("128/128@1: 8/8 requests reported no usage.prompt_tokens: with text prompts of an estimated length it "
            "is the only measure of their input length")
HTTP_500_CELL = "128/128@1: 2/8 measured requests failed: http_500 x2 (e.g. HTTP 500: {})"


def _as_pytest_shows(failure: AssertionError) -> str:
    return pytest.raises(AssertionError, lambda: (_ for _ in ()).throw(failure)).exconly()


def test_a_record_for_one_of_two_problems_in_one_message_leaves_the_check_failing(tmp_path: Path) -> None:
    """llamacpp-0.3-contract.yaml's "no usage" record must not excuse a cell's HTTP 500s beside it."""
    records = load_expectations([_records(tmp_path, [_record("test_throughput.py::*", {
        "message": "requests reported no usage.prompt_tokens: with text prompts"})])])
    failure = problems_failure([NO_USAGE, HTTP_500_CELL])
    message = _as_pytest_shows(failure)
    # The old reading: the record's pattern is somewhere in the whole message.
    assert records[0].failure.matches(message)
    matched, line = judge(records, failure, message)
    assert matched == records and line is not None
    assert line == (f"{MISMATCH}: record records.yaml#0 expects a message matching /requests reported no "
                    f"usage.prompt_tokens: with text prompts/; got: {HTTP_500_CELL} "
                    f"(1 of 2 problems described by no record)")
    # The same problem in two cells: each line is described, the failure is the record's.
    both = problems_failure([NO_USAGE, NO_USAGE.replace("@1", "@4")])
    assert judge(records, both, _as_pytest_shows(both)) == (records, None)


def test_each_problem_is_matched_in_its_own_words_and_only_matching_records_are_named(tmp_path: Path) -> None:
    records = load_expectations([_records(tmp_path, [
        _record("test_throughput.py::*", {"message": "reported no usage"}),
        _record("test_throughput.py::*", {"message": "measured requests failed: http_500", "category":
                                          "Engine error (5xx)"}),
        _record("test_throughput.py::*", {"message": "output length not honored"}),
    ])])
    failure = problems_failure([NO_USAGE, HTTP_500_CELL])
    matched, line = judge(records, failure, _as_pytest_shows(failure))
    assert line is None and [r.origin for r in matched] == ["records.yaml#0", "records.yaml#1"]
    # A category is read from the problem it is matched in: the second cell's http_500 kind came from a
    # timeout (no "HTTP 5xx" in its words), so the 5xx record does not describe it, although the
    # whole message, with the first cell's HTTP 500 in it, reads as an engine error.
    timed_out = "128/128@4: 1/8 measured requests failed: http_500 x1 (e.g. the engine timed out)"
    failure = problems_failure([HTTP_500_CELL, timed_out])
    assert records[1].failure.matches(_as_pytest_shows(failure))  # the old, whole-message reading
    matched, line = judge(records[1:2], failure, _as_pytest_shows(failure))
    assert line is not None and line.endswith(f"got: [Timeout or hang] {timed_out} (1 of 2 problems described by "
                                              f"no record)"), line


def test_a_failure_of_several_problems_names_them_all_on_its_first_line_and_each_whole_below() -> None:
    """The gate and pytest's summary read only the first line: it must say what failed."""
    failure = problems_failure([NO_USAGE, HTTP_500_CELL + "\nmore of the engine's words"], detail=" [counts]")
    assert isinstance(failure, SeveralProblems) and failure.problems == (NO_USAGE, HTTP_500_CELL +
                                                                          "\nmore of the engine's words")
    assert str(failure).splitlines() == [f"problems (2): {NO_USAGE} | {HTTP_500_CELL}", f"  - {NO_USAGE}",
                                         f"  - {HTTP_500_CELL}", "    more of the engine's words", "[counts]"]


def test_a_single_problem_is_matched_in_the_whole_message_without_its_exception_type(tmp_path: Path) -> None:
    records = load_expectations([_records(tmp_path, [_record("test_throughput.py::*", {
        "message": "^128/128@1: 8/8 requests reported no usage"})])])
    failure = problems_failure([NO_USAGE])
    assert type(failure) is AssertionError and str(failure) == NO_USAGE
    assert judge(records, failure, _as_pytest_shows(failure)) == (records, None)


# What a check of image input starts with where discovery found it broken (session.broken_reason).
LLAMA_LEAD = discovery_lead("image", "pure-red-512.png: image_url part dropped: prompt_tokens 7 with the image, 7 "
                                     "without (the engine answered 200 but did not read the image)")

# What llama-server b11312 answers an image part without an mmproj (the body as the checks print it).
LLAMA_SERVER_NO_IMAGE = ('{"code": 500, "message": "image input is not supported - hint: if this is unexpected, you may '
                         'need to provide the mmproj", "type": "server_error"}')
# Each shipped record against a failure worded as its check words it (tests/), and against
# failures of the same check the record must not cover. Gemma and MiniMax cannot run here:
# these messages follow the assertions' f-strings and the records' `evidence`.
SHIPPED = {
    "gemma3-270m-vllm-cpu.yaml#0": (
        "AssertionError: expected 703 in the answer, got '计算 19×37，只输出结果。icional\\n下次…'\nassert 703 in [19, 37]",
        ["Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {'message': 'boom'}"]),
    "gemma3-270m-vllm-cpu.yaml#1": (
        "AssertionError: turn 2 should repeat the codename 'jade-628' from turn 1, got '请记住本次对话的代号：jade-631。'",
        ["Failed: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "gemma3-270m-vllm-cpu.yaml#2": (
        "AssertionError: asked for the key jade-50-1-…: the code at 50% depth, jade-50-1-259920, is missing "
        "(the reply was cut at max_tokens); the answer was '下面 <document> 与 </document> 之间…'",
        ["AssertionError: asked for the key jade-50-1-…: the code at 50% depth is wrong: jade-50-1-259921 instead "
         "of jade-50-1-259920 (character 16 is '1', expected '0'); the answer was 'jade-50-1-259921'",
         "AssertionError: the stream did not end with data: [DONE] (stream cut)"]),
    "gemma3-270m-vllm-cpu.yaml#3": (
        "AssertionError: the document has no key jade-30-2-…, so the answer must be NOT_FOUND; it was '下面…' "
        "(the reply was cut at max_tokens)",
        ["Failed: the 4,096-token recall request failed after 60.0 s: timeout: no byte for 60 s"]),
    "gemma3-270m-vllm-cpu.yaml#4": (
        "AssertionError: the answer holds no JSON object (the reply was cut at max_tokens): '下面 <document>…'",
        ["AssertionError: in a 4,096-token prompt: the code at 10% depth, jade-10-0-123456, is missing; the answer "
         "was '{}'"]),
    "gemma3-270m-vllm-cpu.yaml#5": (
        "AssertionError: no Python code defining unique_sorted in the reply: '编写Python函数unique_sorted(values)…'",
        ["Failed: non-streamed request to http://127.0.0.1:8011/v1/chat/completions failed: timeout: total timeout",
         "AssertionError: the code fails the allow-list and was not run: imports are not allowed"]),
    # Tools on the CI real engine (hermes parser): messages as the CI run of 2026-12-01 printed them.
    "gemma3-270m-vllm-cpu.yaml#6": (
        "AssertionError: expected parallel calls for 广州, 北京 in one turn, got no tool calls (content: '请在本轮同时调用"
        " get_weather 查询广州和北京的天气，不要猜测结果。 mendatang…')\nassert 0 >= 2",
        ["AssertionError: expected parallel calls for 广州, 北京 in one turn, got get_weather({\"city\": \"广州\"})",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-vllm-cpu.yaml#7": (
        "AssertionError: no tool calls to check (content: '请在本轮同时调用 get_weather…')\nassert []",
        ["AssertionError: function_call.arguments: arguments are not JSON (Expecting value): '{city'",
         "Failed: non-streamed request to http://h/v1/chat/completions failed: HTTP 400: {}"]),
    "gemma3-270m-vllm-cpu.yaml#8": (
        "AssertionError: non-streamed request to http://127.0.0.1:8011/v1/chat/completions failed: HTTP 400: "
        "{\"message\": \"Conversation roles must alternate user/assistant/user/assistant/...\", \"type\": "
        "\"BadRequestError\", \"param\": null, \"code\": 400}",
        ["AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}",
         "AssertionError: the final answer does not use the tool results for 广州 (stub results: {}): ''"]),
    "gemma3-270m-vllm-cpu.yaml#9": (
        "AssertionError: function_call.arguments: arguments are not JSON (Unterminated string starting at at "
        "position 696): '[\\n    {\\n        \"name\": \"weather\"…'",
        ["AssertionError: tool_choice names get_weather, yet the response has no function_call item (message; "
         "status 'incomplete'; output_text '<tool_call>…')",
         "AssertionError: function_call.arguments: arguments are not JSON (Expecting value): ''"]),
    # The tool-accuracy set on the CI's vLLM (tests/test_tool_accuracy.py's _below words them).
    "gemma3-270m-vllm-cpu.yaml#10": (
        "AssertionError: tool-accuracy requests answered with 2xx: 586/638 = 91.8% (95% Wilson 89.5-93.7%), below "
        "the required 100.0%. Errors by kind (1): 52 x HTTP 400: {\"message\": \"Conversation roles must alternate "
        "user/assistant/user/assistant/...\", \"type\": \"BadRequestError\", \"param\": null, \"code\": 400} "
        "[non-streamed and streamed: multi-turn-results-001, multi-turn-results-002, multi-turn-results-003, ... "
        "(26 cases)]",
        # An error of another kind beside them is a problem of its own (SeveralProblems): not covered.
        ["1 x HTTP 500: {} [streamed: flat-001]",
         "AssertionError: tool-accuracy requests answered with 2xx: 586/638 = 91.8% (95% Wilson 89.5-93.7%), below "
         "the required 100.0%. Errors by kind (1): 52 x HTTP 500: {} [non-streamed and streamed: flat-001, "
         "flat-002, flat-003, ... (26 cases)]",
         # The old wording (five examples) is not the shape this record describes.
         "AssertionError: tool-accuracy requests answered with 2xx: 586/638 = 91.8% (95% Wilson 89.5-93.7%), below "
         "the required 100.0%. For example: multi-turn-results-001 (non-streamed): HTTP 400: {\"message\": "
         "\"Conversation roles must alternate user/assistant/user/assistant/...\"}"]),
    "gemma3-270m-vllm-cpu.yaml#11": (
        "AssertionError: tool-call arguments that are JSON fitting the tool's schema: 0/65 = 0.0% (95% Wilson "
        "0.0-5.6%), below the required 99.0%. For example: flat-005 (streamed) convert_currency: arguments are not "
        "JSON (Unterminated string starting at at position 73): '[\\n    {'",
        ["AssertionError: tool-call arguments that are JSON fitting the tool's schema: 60/65 = 92.3% (95% Wilson "
         "83.2-96.7%), below the required 99.0%. For example: flat-005 (streamed) convert_currency: arguments are "
         "not JSON",
         "Failed: no tool call in 638 replies, 67 cases of which force a call (tool_choice required or named): "
         "nothing to validate"]),
    "gemma3-270m-vllm-cpu.yaml#12": (
        "Failed: only 2 of 319 cases had both replies run to their end (317: an HTTP error or a reply cut by "
        "max_tokens 64 on one side), fewer than the 30 needed to judge streamed = non-streamed",
        ["AssertionError: cases whose streamed tool calls equal the non-streamed ones (17 cases left out: an HTTP "
         "error or a reply cut by max_tokens): 200/302 = 66.2% (95% Wilson 60.7-71.3%), below the required 95.0%"]),
    "gemma3-270m-vllm-cpu.yaml#13": (
        "Failed: only 4 of 586 answered replies ended before max_tokens 64 (582 cut, not judged: their finish_reason "
        "'length' says nothing about their calls), fewer than the 30 needed to judge finish_reason against the calls",
        # Enough replies judged and too few consistent is another failure: not covered.
        ["AssertionError: replies whose finish_reason is 'tool_calls' exactly when they call tools (200 cut by "
         "max_tokens, not judged): 300/386 = 77.7% (95% Wilson 73.3-81.6%), below the required 95.0%"]),
    # The agent loop on the CI's vLLM (issue 41; tests/test_agent_loop.py words them), as the real run of 2026-12-05.
    "gemma3-270m-vllm-cpu.yaml#14": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', "
        "so the loop cannot go on: content '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。…'",
        # A reasoning that used up max_tokens (a reasoning parser on this template) is another finding.
        ["AssertionError: turn 1: the model called no tool for '请调用 get_weather …', so the loop cannot go on: the "
         "reasoning used up max_tokens (128 completion tokens, finish_reason 'length') before any answer: content is "
         "empty after 277 characters of reasoning",
         "AssertionError: turn 1, the ask: the engine refused the history the loop built (2 messages): HTTP 500: {}",
         "AssertionError: turn 3, the follow-up: the follow-up's answer lacks 37, which only the tool result in the "
         "history holds: '…'"]),
    "gemma3-270m-vllm-cpu.yaml#15": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', "
        "so the loop cannot go on: content '请调用 get_weather…'",
        ["AssertionError: usage.prompt_tokens does not grow with the history: turn 1, the ask 99, turn 2, after the "
         "tool results 68, turn 3, the follow-up 101",
         "AssertionError: turn 2, after the tool results: usage.prompt_tokens 665 but the engine's /tokenize counts "
         "761 for the same history and tools (-96)"]),
    "gemma3-270m-vllm-cpu.yaml#16": (
        "AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
        "OpenAI API allows) was refused: HTTP 400: {\"message\": \"Conversation roles must alternate "
        "user/assistant/user/assistant/...\", \"type\": \"BadRequestError\", \"param\": null, \"code\": 400}",
        ["AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
         "OpenAI API allows) was refused: HTTP 400: {\"message\": \"1 validation error for ChatCompletionRequest: "
         "messages.2.content: Input should be a valid string\"}",
         "AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null): the "
         "answer does not use the tool results for 广州: '…'"]),
    # Thinking on (vLLM's qwen3 reasoning parser) on the CI's vLLM, as the run of 2026-12-05 saw it: the
    # pretrained model never closes its reasoning, so every answer check names a reasoning that used up max_tokens.
    "gemma3-270m-vllm-cpu.yaml#17": (
        "AssertionError: the reasoning used up max_tokens (48 completion tokens, finish_reason 'length') before any "
        "answer: content is empty after 96 characters of reasoning",
        ["AssertionError: content is empty: the answer is missing next to the reasoning (finish_reason='stop')",
         "AssertionError: the reasoning field (reasoning / reasoning_content) is empty and content holds reasoning "
         "markers ['<think>', '</think>']: '<think>\\n计算 19×37…'",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-vllm-cpu.yaml#18": (
        "sample 1: thinking enabled: the reasoning used up max_tokens (128 completion tokens, finish_reason 'length') "
        "before any answer: content is empty after 262 characters of reasoning",
        ["sample 1: thinking enabled: content is empty next to the reasoning (finish_reason='stop')",
         "sample 2: thinking enabled, yet the reasoning field (reasoning / reasoning_content) is empty and content "
         "holds reasoning markers ['<think>', '</think>']",
         "sample 3: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-vllm-cpu.yaml#19": (
        "AssertionError: thinking enabled: 0/1 correct answers to the 240 question; the reasoning used up max_tokens "
        "(128 completion tokens, finish_reason 'length') before any answer: content is empty after 301 characters of "
        "reasoning [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: thinking enabled: 0/1 correct answers to the 240 question (answers: None; contents: ['']) "
         "[trials: 0/1 passed, rule: all 1]",
         "AssertionError: thinking enabled: 1/5 correct answers to the 240 question (answers: 240, None, None, None, "
         "None; contents: ['240', '', '', '', ''])",
         "AssertionError: thinking enabled: 0/5 correct answers to the 240 question (answers: 36, 36, 36, 36, 36; "
         "contents: ['一个仓库有240件货物，先发走15%，又入库36件…'])",
         "sample 2: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-vllm-cpu.yaml#20": (
        "AssertionError: thinking disabled: 0/5 correct answers to the 240 question (answers: 36, 36, 36, 36, 36; "
        "contents: ['一个仓库有240件货物，先发走15%，又入库36件…', '一个仓库有240件货物，先发走15%，又入库36件…', "
        "'一个仓库有240件货物，先发走15%，又入库36件…', '一个仓库有240件货物，先发走15%，又入库36件…', "
        "'一个仓库有240件货物，先发走15%，又入库36件…']) [trials: 0/5 passed, rule: all 5]",
        ["AssertionError: thinking disabled: 3/5 correct answers to the 240 question (answers: 240, 36, 240, 36, 240; "
         "contents: [])",
         "AssertionError: thinking disabled: 0/5 correct answers to the 240 question; the reasoning used up max_tokens "
         "(128 completion tokens, finish_reason 'length') before any answer: content is empty after 300 characters "
         "of reasoning",
         "sample 4: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "gemma3-270m-vllm-cpu.yaml#21": (
        "AssertionError: response_format asked for the schema, the content does not fit: the content is not JSON "
        "(Expecting value: line 1 column 1 (char 0)): ''; the reasoning used up max_tokens (128 completion tokens, "
        "finish_reason 'length') before any answer: content is empty after 305 characters of reasoning",
        ["AssertionError: response_format asked for the schema, the content does not fit: the content is not JSON "
         "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): '{'; the reply was cut at "
         "max_tokens=128 (finish_reason 'length') before the JSON was complete",
         "AssertionError: thinking is on, yet the reasoning field (reasoning / reasoning_content) is empty; content: "
         "'{\"name\": \"x\"}'",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "vllm-0.32-contract.yaml#0": (
        "AssertionError: a tool result that answers no tool call: the engine accepted it: HTTP 200, content '{}命题'",
        ["AssertionError: a tool result that answers no tool call: server error on client data: HTTP 500",
         "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'x'"]),
    "vllm-0.32-contract.yaml#1": (
        "Failed: a tool result that answers no tool call: the engine accepted it (HTTP 200), so there is no error body"
        " to read",
        ["AssertionError: a tool result that answers no tool call got HTTP 400, and the body 'x' is not an OpenAI "
         "error object"]),
    "vllm-0.32-contract.yaml#2": (
        "AssertionError: HTTP 200 stream with an unusable event: error event in stream: {\"message\": \"Grammar "
        "error: Invalid type: nonsense\", \"code\": 400}",
        ["AssertionError: an uncompilable schema: server error on client data: HTTP 500",
         "AssertionError: HTTP 200 stream with an unusable event: error event in stream: {\"message\": \"boom\"}"]),
    "vllm-0.32-contract.yaml#3": (
        "AssertionError: tool_choice forces get_weather, yet no call was made (content: '<tool_call>\\n{\"name\": "
        "\"get_weather\"…')\nassert []",
        ["AssertionError: tool_choice forces get_weather, yet no call was made (content: 'I cannot')",
         "AssertionError: tool_choice forces get_weather, the reply calls ['other']"]),
    "vllm-0.32-contract.yaml#4": (
        "AssertionError: tool_choice names get_weather, yet the response has no function_call item (message; status "
        "'incomplete'; output_text '<tool_call>\\n{\"name\": \"get_weather\"…')\nassert []",
        ["AssertionError: tool_choice names get_weather, yet the response has no function_call item (message; "
         "status 'completed'; output_text 'It is sunny')",
         "AssertionError: function_call.arguments: arguments are not JSON (Unterminated string): '{'"]),
    # vLLM 0.32 with media (the tiny Qwen2-VL, scripts/multimodal_engine.sh): messages built from the records'
    # evidence of the run of 2026-12-05.
    "vllm-0.32-contract.yaml#5": (
        "AssertionError: an image at a URL the engine cannot fetch: server error on client data: HTTP 500, body "
        "{\"message\": \"Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed ('127.0.0.1', 9)]\", "
        "\"type\": \"InternalServerError\", \"code\": 500}\nassert 'server error…' is None",
        ["AssertionError: an image at a URL the engine cannot fetch: server error on client data: HTTP 500, body "
         "{\"message\": \"Internal server error\", \"type\": \"InternalServerError\", \"code\": 500}",
         "AssertionError: an image at a URL the engine cannot fetch: the engine accepted it: HTTP 200, content 'x'",
         "AssertionError: an image at a URL the engine cannot fetch: no answer within the idle timeout: the engine "
         "hangs on it (total timeout after 60 s)"]),
    "vllm-0.32-contract.yaml#6": (
        "AssertionError: mislabelled sample png-bytes-as-mp4 (a valid PNG (bordered-red-512.png) sent as a video part "
        "labelled video/mp4: the bytes are no video), sent as video_url: server error on client data: HTTP 500, body "
        "{\"message\": \"upper bound and lower bound inconsistent with step sign\", \"type\": "
        "\"InternalServerError\", \"code\": 500}\nassert 'server error…' is None",
        ["AssertionError: mislabelled sample png-bytes-as-mp4 (a valid PNG (bordered-red-512.png) sent as a video "
         "part labelled video/mp4: the bytes are no video), sent as video_url: server error on client data: HTTP "
         "500, body {\"message\": \"Internal server error\", \"code\": 500}",
         "AssertionError: mislabelled sample png-bytes-as-mp4 (a valid PNG (bordered-red-512.png) sent as a video "
         "part labelled video/mp4: the bytes are no video), sent as video_url: the engine accepted it: HTTP 200, "
         "content 'red'",
         "AssertionError: corrupt sample truncated-mp4 (the first half of video-rgb-16f.mp4), sent as video_url: "
         "server error on client data: HTTP 500, body {\"message\": \"upper bound and lower bound inconsistent with "
         "step sign\"}"]),
    "vllm-0.32-contract.yaml#7": (
        "AssertionError: mislabelled sample png-labelled-text-plain (a valid PNG (bordered-red-512.png) in an image "
        "part whose data URL declares text/plain, not an image type), sent as image_url: the engine accepted it: HTTP "
        "200, content ' lovely lovely lovely'\nassert 'the engine a…' is None",
        ["AssertionError: mislabelled sample png-labelled-text-plain (a valid PNG (bordered-red-512.png) in an image "
         "part whose data URL declares text/plain, not an image type), sent as image_url: server error on client "
         "data: HTTP 500, body {}",
         "AssertionError: mislabelled sample png-labelled-text-plain (a valid PNG (bordered-red-512.png) in an image "
         "part whose data URL declares text/plain, not an image type), sent as image_url: HTTP 400 but no error body "
         "with a message: body ''",
         "AssertionError: mislabelled sample png-bytes-as-mp4 (a valid PNG (bordered-red-512.png) sent as a video "
         "part labelled video/mp4: the bytes are no video), sent as video_url: the engine accepted it: HTTP 200, "
         "content 'x'"]),
    "vllm-0.32-contract.yaml#8": (
        "AssertionError: corrupt sample png-header-broken-body (valid PNG signature and IHDR, IDAT replaced by "
        "non-zlib bytes (CRCs valid)), sent as image_url: the engine accepted it: HTTP 200, content ' Chem Chem "
        "Chem'\nassert 'the engine a…' is None",
        ["AssertionError: corrupt sample png-header-broken-body (valid PNG signature and IHDR, IDAT replaced by "
         "non-zlib bytes (CRCs valid)), sent as image_url: server error on client data: HTTP 500, body "
         "{\"message\": \"broken data stream when reading image file\"}",
         "AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as image_url: "
         "the engine accepted it: HTTP 200, content 'x'",
         "AssertionError: corrupt sample png-header-broken-body (valid PNG signature and IHDR, IDAT replaced by "
         "non-zlib bytes (CRCs valid)), sent as image_url: the connection failed, the engine may have crashed "
         "(APIConnectionError: Connection error.)"]),
    # The tiny random-weight Qwen2-VL on vLLM 0.32 (scripts/multimodal_engine.sh): it reads no media and writes
    # noise to max_tokens; one sample of each model-behaviour check (its profile's trials). Built from the
    # records' evidence of the run of 2026-12-05.
    "qwen2-vl-tiny-vllm-cpu.yaml#0": (
        "AssertionError: expected the largest area of bordered-red-512.png named red (红/紅/red); the answer names no "
        "colour: ' lovely lovely lovely lovely…' [trials: 0/1 passed, rule: at least 60% of 1]\nassert (False)",
        ["AssertionError: content is empty (reasoning='') (finish_reason='length') [trials: 0/1 passed, rule: at "
         "least 60% of 1]",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {\"message\": "
         "\"Failed to load image\"}",
         "AssertionError: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#1": (
        "AssertionError: pure-blue-512.png is one single colour, blue (蓝/藍/blue); the answer names no colour: ' эфи "
        "эфи эфи…' [trials: 0/1 passed, rule: at least 60% of 1]\nassert [] == ['blue']",
        ["AssertionError: content is empty (reasoning='') (finish_reason='stop') [trials: 0/1 passed, rule: at least "
         "60% of 1]",
         "AssertionError: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#2": (
        "sample 1: expected the values Q1=120, Q2=90, Q3=150 in this order; the answer has the numbers []: "
        "'流流流流流流流流…'",
        # The other reading of the same answer is a problem of its own.
        ["sample 1: expected Q2 named as the quarter that dropped from the one before; no sentence names it with a "
         "word for a drop: '流流流流流流流流…'",
         "AssertionError: content is empty (reasoning='') (finish_reason='length') [trials: 0/1 passed, rule: at "
         "least 60% of 1]",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#13": (
        "sample 1: expected Q2 named as the quarter that dropped from the one before; no sentence names it with a "
        "word for a drop: '流流流流流流流流…'",
        ["sample 1: expected the values Q1=120, Q2=90, Q3=150 in this order; the answer has the numbers []: "
         "'流流流流流流流流…'",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#3": (
        "AssertionError: expected the images' main colours in order, red then blue; the answer names no colour (white "
        "and black ignored): ' envol envol envol…' [trials: 0/1 passed, rule: at least 60% of 1]\nassert [] == "
        "['red', 'blue']",
        ["AssertionError: content is empty (reasoning='') (finish_reason='length') [trials: 0/1 passed, rule: at "
         "least 60% of 1]",
         "AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#4": (
        "AssertionError: expected the background colours in order, red then green then blue; the answer names none of "
        "them in that order: 'WebAppWebAppWebApp…' [trials: 0/1 passed, rule: at least 60% of 1]\nassert [] == "
        "['red', 'green', 'blue']",
        ["AssertionError: expected the background colours in order, red then green then blue; the answer names "
         "['red'] in that order: 'red'",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {\"message\": \"upper "
         "bound and lower bound inconsistent with step sign\"}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#5": (
        "AssertionError: image-512@1: 48/48 replies named the wrong colours under load, e.g. named no colour instead "
        "of red: ' lovely lovely lovely lovely lovely'",
        # Some replies wrong, or requests that failed, are other findings.
        ["AssertionError: image-512@1: 3/48 replies named the wrong colours under load, e.g. named no colour instead "
         "of red: ' lovely'",
         "AssertionError: image-512@1: 2/48 measured requests failed: http_500 x2 (e.g. HTTP 500: {})",
         "AssertionError: video-16frames@4: 48/48 measured requests failed: connection x48 (e.g. "
         "ServerDisconnectedError)"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#6": (
        "AssertionError: expected 703 in the answer, got 'SVSVSVSVSV…诖诖诖' [trials: 0/1 passed, rule: all 1]\n"
        "assert 703 in []",
        ["AssertionError: expected 703 in the answer, the reasoning used up max_tokens (32 completion tokens, "
         "finish_reason 'length') before any answer: content is empty after 90 characters of reasoning",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#7": (
        "AssertionError: turn 2 should repeat the codename 'jade-628' from turn 1, got 'ఋఋఋఋఋఋ…' [trials: 0/1 "
        "passed, rule: all 1]\nassert 'jade-628' in 'ఋఋఋఋఋఋ'",
        ["AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 400: {\"message\": "
         "\"This model's maximum context length is 8192 tokens\"}",
         "AssertionError: turn 2 should repeat the codename 'jade-628' from turn 1, the reasoning used up max_tokens "
         "(32 completion tokens, finish_reason 'length') before any answer: content is empty after 80 characters of "
         "reasoning"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#8": (
        "AssertionError: no Python code defining unique_sorted in the reply: '\\n\\n\\n राउंड राउंड राउंड…'\nassert "
        "None is not None",
        ["AssertionError: the code fails the allow-list and was not run: imports are not allowed",
         "AssertionError: the sandbox gave no verdict: timeout: no verdict within 10 s",
         "AssertionError: non-streamed request to http://h/v1/chat/completions failed: timeout: total timeout"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#9": (
        "AssertionError: response_format asked for the schema, the content does not fit: the content is not JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): '{'; the reply was cut at "
        "max_tokens=128 (finish_reason 'length') before the JSON was complete",
        # JSON that misses the schema, or free text that was not cut, is not the grammar's unfinished object.
        ["AssertionError: response_format asked for the schema, the content does not fit: (top level): 'name' is a "
         "required property",
         "AssertionError: response_format asked for the schema, the content does not fit: the content is not JSON "
         "(Expecting value: line 1 column 1 (char 0)): 'hello'",
         "AssertionError: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#10": (
        "AssertionError: asked for the key jade-50-1-…: the code at 50% depth, jade-50-1-259920, is missing (the reply "
        "was cut at max_tokens); the answer was '\\n\\n\\n\\n\\n\\n…' [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: asked for the key jade-50-1-…: the code at 50% depth is wrong: jade-50-1-259921 instead of "
         "jade-50-1-259920 (character 16 is '1', expected '0'); the answer was 'jade-50-1-259921'",
         "AssertionError: asked for the key jade-50-1-…: jade-10-1-435121 is another key's code, not one asked for; "
         "the answer was 'jade-10-1-435121'",
         "Failed: the recall request (7,104 tokens) failed after 60.0 s: timeout: no byte for 60 s"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#11": (
        "AssertionError: the document has no key jade-30-2-…, so the answer must be NOT_FOUND; it was "
        "'\\n\\n\\n\\n\\n\\n…' (the reply was cut at max_tokens) [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: the streamed reply has no usage although stream_options.include_usage was set",
         "Failed: the recall request (7,104 tokens) failed after 60.0 s: HTTP 400: {\"message\": \"This model's "
         "maximum context length is 8192 tokens\"}"]),
    "qwen2-vl-tiny-vllm-cpu.yaml#12": (
        "AssertionError: the answer holds no JSON object (the reply was cut at max_tokens): '\\n\\n\\n\\n\\n\\n…' "
        "[trials: 0/1 passed, rule: all 1]",
        ["AssertionError: in a prompt of about 7,104 tokens: the code at 10% depth, jade-10-0-123456, is missing; the "
         "answer was '{}'",
         "AssertionError: the stream did not end with data: [DONE] (stream cut)",
         "Failed: the recall request (7,104 tokens) failed after 60.0 s: timeout: no byte for 60 s"]),
    # llama.cpp's Python server (the second real engine): messages as its CI run of 2026-12-01 printed them.
    "llamacpp-0.3-contract.yaml#0": (
        "AssertionError: no usage in the reply (stream_options.include_usage was set)\nassert None is not None",
        ["AssertionError: usage.total_tokens 30 is not prompt_tokens 14 + completion_tokens 17",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "llamacpp-0.3-contract.yaml#1": (
        "AssertionError: no usage in the reply (stream_options.include_usage was set)\nassert None is not None",
        ["AssertionError: usage.total_tokens 30 is not prompt_tokens 14 + completion_tokens 17",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "llamacpp-0.3-contract.yaml#2": (
        "AssertionError: no usage in the reply (stream_options.include_usage was set)\nassert None is not None",
        ["AssertionError: usage.total_tokens 30 is not prompt_tokens 14 + completion_tokens 17",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "llamacpp-0.3-contract.yaml#3": (
        "AssertionError: no usage in the reply (stream_options.include_usage was set)",
        ["AssertionError: n=3 asks for 3 choices indexed 0..2, the reply has 1 with indexes [0]",
         "AssertionError: 3 choices each cut at max_tokens=16 are 48 completion tokens, usage.completion_tokens says "
         "16"]),
    "llamacpp-0.3-contract.yaml#4": (
        "AssertionError: no usage in the reply (stream_options.include_usage was set)\nassert None is not None",
        ["AssertionError: usage.total_tokens 30 is not prompt_tokens 14 + completion_tokens 17",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    # A recall check's problems one by one (tests/test_recall.py): the usage record excuses the usage alone.
    "llamacpp-0.3-contract.yaml#5": (
        "AssertionError: the streamed reply has no usage although stream_options.include_usage was set",
        ["AssertionError: asked for the key jade-50-1-…: the code at 50% depth, jade-50-1-259920, is missing",
         "Failed: the 7,000-token recall request failed after 60.0 s: timeout: no byte for 60 s"]),
    "llamacpp-0.3-contract.yaml#6": (
        "AssertionError: the reply has no usage.prompt_tokens to compare [prompt tokens: text 1,024 (local "
        "tokenizer.json); usage.prompt_tokens none]",
        ["AssertionError: usage.prompt_tokens is 1040 and the message text counts 1024: the chat template would add "
         "+16 tokens, outside the declared 0..12",
         "AssertionError: the streamed reply has no usage although stream_options.include_usage was set"]),
    "llamacpp-0.3-contract.yaml#7": (
        "AssertionError: 128/128@1: 8/8 requests reported no usage.prompt_tokens: with text prompts of an estimated "
        "length it is the only measure of their input length",
        ["AssertionError: 128/128@1: 2/8 measured requests failed: http_500 x2 (e.g. HTTP 500)",
         "AssertionError: 128/128@1: input tokens 160 against 128 asked, beyond the tolerance"]),
    "llamacpp-0.3-contract.yaml#8": (
        "AssertionError: stream_options.include_usage was set, yet none of the 18 chunks carries usage",
        ["AssertionError: usage arrived in 2 chunks, not once", "AssertionError: the stream did not end with [DONE]"]),
    "llamacpp-0.3-contract.yaml#9": (
        "AssertionError: n=3 asks for 3 choices indexed 0..2, the reply has 1 with indexes [0]\nassert [0] == [0, 1, 2]",
        ["AssertionError: n=3 asks for 3 choices indexed 0..2, the reply has 3 with indexes [0, 0, 0]",
         "AssertionError: usage.completion_tokens 12 counts one choice of 3"]),
    "llamacpp-0.3-contract.yaml#10": (
        "AssertionError: no chunk carries a finish_reason for choice 1\nassert not ['no chunk carries a finish_reason "
        "for choice 1']",
        ["AssertionError: choice 0 has 2 finish_reason chunks"]),
    "llamacpp-0.3-contract.yaml#11": (
        "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'If you have a problem'",
        ["AssertionError: temperature -1: server error on client data: HTTP 500",
         "AssertionError: n 0: the engine accepted it: HTTP 200, content 'x'"]),
    "llamacpp-0.3-contract.yaml#12": (
        "Failed: n 0: the engine accepted it (HTTP 200), so there is no error body to read",
        ["AssertionError: n 0 got HTTP 400 with the message 'bad request', which does not name the problem",
         "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'x'"]),
    "llamacpp-0.3-contract.yaml#13": (
        "AssertionError: a tool result that answers no tool call: the engine accepted it: HTTP 200, content 'Say "
        "hello. mendatanguser'",
        ["AssertionError: a tool result that answers no tool call: server error on client data: HTTP 500"]),
    "llamacpp-0.3-contract.yaml#14": (
        "AssertionError: a message without a role: server error on client data: HTTP 500, body {\"message\": \"7 "
        "validation errors:\\n  {'type': 'missing', 'loc': ('body', 'messages', 0, 'ChatCompletionRequestSystemMessage',"
        " 'role'), 'msg': 'Field required'}",
        ["AssertionError: a message without a role: server error on client data: HTTP 502, body 'Bad Gateway'",
         "AssertionError: a message without a role: the engine accepted it: HTTP 200, content 'x'"]),
    "llamacpp-0.3-contract.yaml#15": (
        "AssertionError: non-streamed request to http://127.0.0.1:8012/v1/chat/completions failed: HTTP 500: "
        "{\"message\": \"1 validation error:\\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \\\"Input should be 'text' or 'json_object'\\\", 'input': 'json_schema'}",
        ["AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}",
         "AssertionError: the content is not JSON (Expecting value): 'x'"]),
    "llamacpp-0.3-contract.yaml#16": (
        "AssertionError: response_format with the invalid JSON Schema {\"type\": \"nonsense\"}: server error on client "
        "data: HTTP 500, body {\"message\": \"1 validation error:\\n  {'type': 'literal_error', 'msg': \\\"Input should "
        "be 'text' or 'json_object'\\\"}",
        ["AssertionError: response_format with the invalid JSON Schema {\"type\": \"nonsense\"}: server error on "
         "client data: HTTP 500, body {\"message\": \"compile failed\"}",
         "AssertionError: response_format with the invalid JSON Schema {\"type\": \"nonsense\"}: the engine accepted "
         "it: HTTP 200, content '{}'"]),
    "llamacpp-0.3-contract.yaml#17": (
        "AssertionError: corrupt sample zero-byte-png (an empty file labelled image/png), sent as image_url: the "
        "engine accepted it: HTTP 200, content '(1)\\n(2)'",
        ["AssertionError: corrupt sample zero-byte-png (an empty file labelled image/png), sent as image_url: server "
         "error on client data: HTTP 500"]),
    "llamacpp-0.3-contract.yaml#18": (
        "Failed: an image at a URL the engine cannot fetch: the engine accepted it (HTTP 200), so there is no error "
        "body to read",
        ["AssertionError: an image at a URL the engine cannot fetch: server error on client data: HTTP 500",
         "AssertionError: an image at a URL the engine cannot fetch: no answer: timeout: total timeout"]),
    "llamacpp-0.3-contract.yaml#19": (
        "AssertionError: image-512@1: 48/48 replies named the wrong colours under load, e.g. named no colour instead "
        "of red: '(1)\\n(2)'",
        ["AssertionError: image-512@1: 3/48 measured requests failed: http_500 x3 (e.g. HTTP 500)",
         "AssertionError: image-512@1: 2/48 replies named the wrong colours under load, e.g. named blue instead of "
         "red: 'blue'"]),
    "llamacpp-0.3-contract.yaml#20": (
        "AssertionError: tool_choice forces get_weather, the reply calls ['get_weatherget_weatherget_weather']",
        ["AssertionError: tool_choice forces get_weather, the reply calls ['get_time']",
         "AssertionError: tool_choice forces get_weather, yet no call was made (content: 'x')"]),
    "llamacpp-0.3-contract.yaml#21": (
        "AssertionError: expected parallel calls for 广州, 北京 in one turn, got no tool calls (content: '请在本轮同时调用"
        " get_weather…')\nassert 0 >= 2",
        ["AssertionError: expected parallel calls for 广州, 北京 in one turn, got get_weather({\"city\": \"广州\"})"]),
    "llamacpp-0.3-contract.yaml#22": (
        "AssertionError: no tool calls to check (content: '请在本轮同时调用 get_weather…')\nassert []",
        ["AssertionError: get_weather arguments do not fit the schema: 'city' is a required property"]),
    "llamacpp-0.3-contract.yaml#23": (
        "AssertionError: non-streamed request to http://127.0.0.1:8012/v1/chat/completions failed: HTTP 500: "
        "{\"message\": \"7 validation errors:\\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, "
        "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \\\"Input should be 'system'\\\", 'input': 'assistant'}",
        ["AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}",
         "AssertionError: the final answer does not use the tool results for 广州 (stub results: {}): ''"]),
    "gemma3-270m-llamacpp.yaml#0": (
        "AssertionError: expected 703 in the answer, got '计算 19×37，只输出结果。icional\\n下次…'\nassert 703 in [19, 37]",
        ["Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {'message': 'boom'}"]),
    "gemma3-270m-llamacpp.yaml#1": (
        "AssertionError: turn 2 should repeat the codename 'jade-628' from turn 1, got '请记住本次对话的代号：jade-631。'",
        ["Failed: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "gemma3-270m-llamacpp.yaml#2": (
        "AssertionError: no Python code defining unique_sorted in the reply: '编写Python函数unique_sorted(values)…'",
        ["AssertionError: the code fails the allow-list and was not run: imports are not allowed"]),
    # Recall and images on llama.cpp: each problem in its check's words, the stream's and discovery's apart.
    "gemma3-270m-llamacpp.yaml#3": (
        "AssertionError: asked for the key jade-50-1-…: the code at 50% depth, jade-50-1-259920, is missing (the "
        "reply was cut at max_tokens); the answer was '下面 <document> 与 </document> 之间…'",
        ["AssertionError: the streamed reply has no usage although stream_options.include_usage was set",
         "AssertionError: asked for the key jade-50-1-…: the code at 50% depth is wrong: jade-50-1-259921 instead "
         "of jade-50-1-259920 (character 16 is '1', expected '0')"]),
    "gemma3-270m-llamacpp.yaml#4": (
        "AssertionError: the document has no key jade-30-2-…, so the answer must be NOT_FOUND; it was '下面…' "
        "(the reply was cut at max_tokens)",
        ["AssertionError: the streamed reply has no usage although stream_options.include_usage was set"]),
    "gemma3-270m-llamacpp.yaml#5": (
        "AssertionError: the answer holds no JSON object (the reply was cut at max_tokens): '下面 <document>…'",
        ["AssertionError: the streamed reply has no usage although stream_options.include_usage was set",
         "AssertionError: in a prompt of about 1,024 tokens: the code at 10% depth, jade-10-0-123456, is missing"]),
    "gemma3-270m-llamacpp.yaml#6": (
        f"AssertionError: {LLAMA_LEAD}expected the values Q1=120, Q2=90, Q3=150 in this order; the answer has the "
        "numbers [1, 2, 3]: '(1)\\n(2)\\n(3)'",
        [f"AssertionError: {LLAMA_LEAD}expected Q2 named as the quarter that dropped from the one before; no sentence "
         "names it with a word for a drop: '(1)'",
         f"AssertionError: {LLAMA_LEAD}content is empty (finish_reason='length', reasoning='')",
         # The lead alone is no longer the problem (llamacpp-0.3-contract.yaml's old test_image.py::* record).
         f"AssertionError: {LLAMA_LEAD}"]),
    "gemma3-270m-llamacpp.yaml#7": (
        f"sample 1: {LLAMA_LEAD}expected Q2 named as the quarter that dropped from the one before; no sentence names "
        "it with a word for a drop: '(1)'",
        [f"sample 1: {LLAMA_LEAD}expected the values Q1=120, Q2=90, Q3=150 in this order; the answer has the numbers "
         "[1, 2, 3]: '(1)'"]),
    "gemma3-270m-llamacpp.yaml#8": (
        f"AssertionError: {LLAMA_LEAD}expected the largest area of bordered-red-512.png named red (红/紅/red); the "
        "answer names no colour: '(1)'",
        [f"AssertionError: {LLAMA_LEAD}expected the largest area of bordered-red-512.png named red (红/紅/red); the "
         "answer names ['blue']: 'blue'",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-llamacpp.yaml#9": (
        f"sample 2: {LLAMA_LEAD}pure-blue-512.png is one single colour, blue (蓝/藍/blue); the answer names no colour: "
        "'(1)'",
        [f"sample 2: {LLAMA_LEAD}pure-blue-512.png is one single colour, blue (蓝/藍/blue); the answer names ['black']"
         ": '黑色'"]),
    "gemma3-270m-llamacpp.yaml#10": (
        f"AssertionError: {LLAMA_LEAD}expected the images' main colours in order, red then blue; the answer names no "
        "colour (white and black ignored): '(1)'",
        [f"AssertionError: {LLAMA_LEAD}expected the images' main colours in order, red then blue; the answer names "
         "['blue', 'red'] (white and black ignored): 'blue, red'"]),
    # llama.cpp's own llama-server b11312 (the second real engine since issue 40): messages as its run of
    # 2026-12-05 printed them, after the discovery lead a broken capability's checks start with.
    "llama-server-b11312-contract.yaml#0": (
        "image found broken by capability discovery (pure-red-512.png: HTTP 500: image input is not supported - "
        "hint: if this is unexpected, you may need to provide the mmproj); non-streamed request to "
        "http://127.0.0.1:8051/v1/chat/completions failed: HTTP 500: " + LLAMA_SERVER_NO_IMAGE,
        ["image found broken by capability discovery (pure-red-512.png: HTTP 500: image input is not supported - "
         "hint: if this is unexpected, you may need to provide the mmproj); non-streamed request to "
         "http://h/v1/chat/completions failed: HTTP 500: {\"code\": 500, \"message\": \"boom\"}",
         "AssertionError: pure-red-512.png is one single colour, red (红/紅/red); the answer names ['black']: '1. 黑色'"]),
    "llama-server-b11312-contract.yaml#1": (
        "video found broken by capability discovery (video-rgb-16f.mp4: HTTP 500: video input is not supported - "
        "hint: if this is unexpected, you may need to provide the mmproj); streamed request to "
        "http://127.0.0.1:8051/v1/chat/completions failed: HTTP 500: "
        + LLAMA_SERVER_NO_IMAGE.replace("image", "video"),
        ["Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {\"message\": \"boom\"}",
         "AssertionError: the background colours in order are red, green, blue; the answer names ['red']: 'red'"]),
    "llama-server-b11312-contract.yaml#2": (
        "AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as image_url: "
        "server error on client data: HTTP 500, body " + LLAMA_SERVER_NO_IMAGE,
        ["AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as image_url: "
         "server error on client data: HTTP 500, body {\"message\": \"Failed to load image\"}",
         "AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as image_url: "
         "the engine accepted it: HTTP 200"]),
    "llama-server-b11312-contract.yaml#3": (
        "image found broken by capability discovery (pure-red-512.png: HTTP 500: image input is not supported - "
        "hint: if this is unexpected, you may need to provide the mmproj); an image at a URL the engine cannot "
        "fetch: server error on client data: HTTP 500, body " + LLAMA_SERVER_NO_IMAGE,
        ["AssertionError: an image at a URL the engine cannot fetch: server error on client data: HTTP 500, body "
         "{\"message\": \"Failed to fetch image\"}",
         "AssertionError: an image at a URL the engine cannot fetch: the engine accepted it: HTTP 200, content 'x'"]),
    "llama-server-b11312-contract.yaml#4": (
        "image found broken by capability discovery (pure-red-512.png: HTTP 500: image input is not supported - "
        "hint: if this is unexpected, you may need to provide the mmproj); image-512@1: 2/2 measured requests "
        "failed: http_500 x2 (e.g. application/json: {\"error\":{\"code\":500,\"message\":\"image input is not "
        "supported - hint: if this is unexpected, you may need to provide the mmproj\",\"type\":\"server_error\"}})",
        ["AssertionError: two-images-512@4: 48/48 measured requests failed: connection x48 (e.g. ServerDisconnectedError)",
         "AssertionError: image-512@1: 2/2 measured requests failed: connection x2 (e.g. ServerDisconnectedError)",
         "AssertionError: replies named the wrong colours under load, e.g. named no colour instead of red"]),
    "llama-server-b11312-contract.yaml#5": (
        "AssertionError: a message without a role: server error on client data: HTTP 500, body {\"code\": 500, "
        "\"message\": \"Failed to parse messages: Missing 'role' in message: {\\\"content\\\":\\\"hello\\\"}\", "
        "\"type\": \"server_error\"}",
        ["AssertionError: a message without a role: server error on client data: HTTP 500, body {\"message\": \"x\"}",
         "AssertionError: a message without a role: the engine accepted it: HTTP 200, content 'hello'"]),
    "llama-server-b11312-contract.yaml#6": (
        "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'Say hello. mendatanguser'",
        ["AssertionError: temperature -1: server error on client data: HTTP 500, body {}",
         "AssertionError: max_tokens 0: the engine accepted it: HTTP 200, content 'Say'"]),
    "llama-server-b11312-contract.yaml#7": (
        "Failed: max_tokens 0: the engine accepted it (HTTP 200), so there is no error body to read",
        ["AssertionError: max_tokens 0: server error on client data: HTTP 500, body {}",
         "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'x'"]),
    "llama-server-b11312-contract.yaml#8": (
        "AssertionError: a tool result that answers no tool call: the engine accepted it: HTTP 200, content "
        "'Say hello. mendatang\\n{}\".futuremodel'",
        ["AssertionError: a tool result that answers no tool call: server error on client data: HTTP 500",
         "AssertionError: temperature -1: the engine accepted it: HTTP 200, content 'x'"]),
    "llama-server-b11312-contract.yaml#9": (
        "AssertionError: 3 choices each cut at max_tokens=12 are 36 completion tokens, usage.completion_tokens says "
        "12\nassert 12 == (3 * 12)",
        ["AssertionError: 3 choices each cut at max_tokens=12 are 36 completion tokens, usage.completion_tokens says "
         "24",
         "AssertionError: n=3 asks for 3 choices indexed 0..2, the reply has 1 with indexes [0]"]),
    "llama-server-b11312-contract.yaml#10": (
        "AssertionError: tool_choice forces get_weather, yet no call was made (content: '用一句话介绍北京。 "
        "mendatang\\n向来(北京)…')\nassert []",
        ["AssertionError: tool_choice forces get_weather, the reply calls ['other']",
         "Failed: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "llama-server-b11312-contract.yaml#11": (
        "AssertionError: tool_choice names get_weather, yet the response has no function_call item (message; status "
        "'completed'; output_text 'What is the weather in Paris right now? Use the tool. mendatang…')\nassert []",
        ["AssertionError: function_call.arguments: arguments are not JSON (Unterminated string): '{'",
         "Failed: non-streamed request to http://h/v1/responses failed: HTTP 500: {}"]),
    "llama-server-b11312-contract.yaml#12": (
        "AssertionError: the engine closed the connection after a streamed reply without saying so (no 'Connection: "
        "close') (its headers said Keep-Alive: timeout=5, max=100): the next request on it failed: ClientOSError: "
        "[Errno None] Can not write request body for http://127.0.0.1:8051/v1/chat/completions",
        ["AssertionError: the streamed request itself failed (HTTP 500), so what follows it on its connection cannot "
         "be judged",
         "AssertionError: the next request on the streamed reply's connection was answered HTTP 500"]),
    "llama-server-b11312-contract.yaml#13": (
        "video-16frames@1: 48/48 measured requests failed: http_500 x48 (e.g. application/json: {\"error\":{\"code\":"
        "500,\"message\":\"video input is not supported - hint: if this is unexpected, you may need to provide the "
        "mmproj\",\"type\":\"server_error\"}})",
        ["AssertionError: video-16frames@1: 48/48 measured requests failed: connection x48 (e.g. ServerDisconnectedError)",
         "AssertionError: image-512@1: 2/2 measured requests failed: http_500 x2 (e.g. application/json: "
         "{\"error\":{\"code\":500,\"message\":\"image input is not supported - hint: if this is unexpected\"}})"]),
    "gemma3-270m-llama-server.yaml#0": (
        "AssertionError: expected 703 in the answer, got '计算 19×37，只输出结果。icional\\n下次…'\nassert 703 in [19, 37]",
        ["Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {'message': 'boom'}"]),
    "gemma3-270m-llama-server.yaml#1": (
        "AssertionError: turn 2 should repeat the codename 'jade-628' from turn 1, got '请记住本次对话的代号：jade-631。'",
        ["Failed: non-streamed request to http://h/v1/chat/completions failed: timeout: no byte for 60 s"]),
    "gemma3-270m-llama-server.yaml#2": (
        "AssertionError: no Python code defining unique_sorted in the reply: '编写Python函数unique_sorted(values)…'",
        ["AssertionError: the code fails the allow-list and was not run: imports are not allowed"]),
    "gemma3-270m-llama-server.yaml#3": (
        "AssertionError: expected parallel calls for 广州, 北京 in one turn, got no tool calls (content: '请在本轮同时调用"
        " get_weather 查询广州和北京的天气，不要猜测结果。 mendatang…')\nassert 0 >= 2",
        ["AssertionError: expected parallel calls for 广州, 北京 in one turn, got get_weather({\"city\": \"广州\"})"]),
    "gemma3-270m-llama-server.yaml#4": (
        "AssertionError: no tool calls to check (content: '请在本轮同时调用 get_weather…')\nassert []",
        ["AssertionError: function_call.arguments: arguments are not JSON (Expecting value): '{city'"]),
    "gemma3-270m-llama-server.yaml#5": (
        "AssertionError: non-streamed request to http://127.0.0.1:8051/v1/chat/completions failed: HTTP 400: "
        "{\"code\": 400, \"message\": \"Unable to generate parser for this template. Automatic parser generation "
        "failed: \\n------------\\nWhile executing CallExpression at line 15, column 27 in source:\\n...% 2 == 0) "
        "-%}↵        {{ raise_exception(\\\"Conversation roles must alternate user...\"}",
        ["AssertionError: non-streamed request to http://h/v1/chat/completions failed: HTTP 400: {\"message\": "
         "\"Unable to generate parser for this template.\"}",
         "AssertionError: the final answer does not use the tool results for 广州 (stub results: {}): ''"]),
    "gemma3-270m-llama-server.yaml#6": (
        "AssertionError: asked for the key jade-10-1-…: the code at 10% depth, jade-10-1-435121, is missing "
        "(the reply was cut at max_tokens); the answer was '<document>\\n<document>…'",
        ["AssertionError: asked for the key jade-50-1-…: the code at 50% depth is wrong: jade-50-1-259921 instead "
         "of jade-50-1-259920 (character 16 is '1', expected '0'); the answer was 'jade-50-1-259921'"]),
    "gemma3-270m-llama-server.yaml#7": (
        "AssertionError: the document has no key jade-30-2-…, so the answer must be NOT_FOUND; it was "
        "'<document>…' (the reply was cut at max_tokens)",
        ["Failed: the 1,024-token recall request failed after 60.0 s: timeout: no byte for 60 s"]),
    "gemma3-270m-llama-server.yaml#8": (
        "AssertionError: the answer holds no JSON object (the reply was cut at max_tokens): '下面 <document>…'",
        ["AssertionError: in a 1,024-token prompt: the code at 10% depth, jade-10-0-123456, is missing; the answer "
         "was '{}'"]),
    # The tool-accuracy set on llama-server (the README's one command), as that run printed it.
    "gemma3-270m-llama-server.yaml#9": (
        "AssertionError: tool-accuracy requests answered with 2xx: 586/638 = 91.8% (95% Wilson 89.5-93.7%), below the "
        "required 100.0%. Errors by kind (1): 52 x HTTP 400: {\"code\": 400, \"message\": \"Unable to generate parser "
        "for this template. Automatic parser generation failed: \\n------------\\nWhile executing CallExpress "
        "[non-streamed and streamed: multi-turn-results-001, multi-turn-results-002, multi-turn-results-003, ... (26 "
        "cases)]",
        # Another kind beside the template's 400s (that run's idle timeouts) is not the record's.
        ["AssertionError: tool-accuracy requests answered with 2xx: 520/638 = 81.5% (95% Wilson 78.3-84.3%), below the "
         "required 100.0%. Errors by kind (2): 66 x timeout: idle timeout: the engine accepted the request and sent no "
         "response within 60s [streamed: any-of-015, ... (66 cases)]; 52 x HTTP 400: {\"code\": 400, \"message\": "
         "\"Unable to generate parser for this template. Automatic parser generation failed: \\n\" [non-streamed and "
         "streamed: multi-turn-results-001, ... (26 cases)]",
         "AssertionError: tool-accuracy requests answered with 2xx: 586/638 = 91.8% (95% Wilson 89.5-93.7%), below the "
         "required 100.0%. Errors by kind (1): 52 x HTTP 500: {} [non-streamed and streamed: multi-turn-results-001, "
         "... (26 cases)]"]),
    "gemma3-270m-llama-server.yaml#10": (
        "Failed: no tool call in 638 replies, 67 cases of which force a call (tool_choice required or named): nothing to "
        "validate",
        ["AssertionError: tool-call arguments that are JSON fitting the tool's schema: 0/10 = 0.0%"]),
    "gemma3-270m-llama-server.yaml#11": (
        "Failed: only 0 of 520 answered replies ended before max_tokens 64 (520 cut, not judged: their finish_reason "
        "'length' says nothing about their calls), fewer than the 30 needed to judge finish_reason against the calls",
        ["AssertionError: finish_reason 'tool_calls' exactly when the reply calls a tool: 12/40 = 30.0%"]),
    "gemma3-270m-llama-server.yaml#12": (
        "Failed: only 0 of 319 cases had both replies run to their end (319: an HTTP error or a reply cut by max_tokens "
        "64 on one side), fewer than the 30 needed to judge streamed = non-streamed",
        ["AssertionError: streamed calls = non-streamed calls: 20/40 = 50.0%"]),
    # Issue 41's agent loop and issue 40's think-aware template on llama-server, first seen at their merge.
    "gemma3-270m-llama-server.yaml#13": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: content '请调用 get_weather 查询广州和北京的天气…'",
        ["AssertionError: turn 3: no answer after the tool results (finish_reason='length')",
         "Failed: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-llama-server.yaml#14": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: content '请调用 get_weather…'",
        ["AssertionError: usage.prompt_tokens does not grow with the history: [120, 118, 140]"]),
    "gemma3-270m-llama-server.yaml#15": (
        "AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
        "OpenAI API allows) was refused: HTTP 400: {\"code\": 400, \"message\": \"Unable to generate parser for this template. Automatic parser generation failed: \\n------------\\nWhile executing CallExpression at line 15, column 27 in source:\\n...% 2 == 0) -%}↵        {{ raise_exception(\\\"Conversation roles must alternate user...\"}",
        ["AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
         "OpenAI API allows) was refused: HTTP 500: {\"message\": \"boom\"}",
         "AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
         "OpenAI API allows) was refused: HTTP 400: {\"message\": \"Conversation roles must alternate user/assistant\"}"]),
    "gemma3-270m-llama-server.yaml#16": (
        "AssertionError: the tool loop in progress, with reasoning: the engine refused the history (5 messages): "
        "HTTP 400: {\"code\": 400, \"message\": \"Unable to generate parser for this template. Automatic parser generation failed: \\n------------\\nWhile executing CallExpression at line 15, column 27 in source:\\n...% 2 == 0) -%}↵        {{ raise_exception(\\\"Conversation roles must alternate user...\"}",
        ["AssertionError: the tool loop in progress, with reasoning: the engine refused the history (5 messages): "
         "HTTP 500: {}",
         "AssertionError: the reasoning sent back is not in the prompt: 140 prompt tokens with it and 140 without"]),
    "gemma3-270m-llama-server.yaml#17": (
        "AssertionError: the reasoning field (reasoning / reasoning_content) is empty and content holds reasoning "
        "markers ['<think>']: '<think>\\n<think>\\n<think>\\n'",
        ["AssertionError: the reasoning field (reasoning / reasoning_content) is empty",
         "AssertionError: the reasoning used up max_tokens (128 completion tokens, finish_reason 'length') before any "
         "answer: content is empty after 300 characters of reasoning"]),
    "gemma3-270m-llama-server.yaml#18": (
        "AssertionError: thinking enabled, yet the reasoning field (reasoning / reasoning_content) is empty and content "
        "holds reasoning markers ['<think>'] [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: reasoning markers ['<think>'] in content: '<think>x'",
         "AssertionError: thinking enabled: the reasoning used up max_tokens (128 completion tokens, finish_reason "
         "'length') before any answer: content is empty after 300 characters of reasoning"]),
    "gemma3-270m-llama-server.yaml#19": (
        "AssertionError: thinking disabled: 0/1 correct answers to the 240 question (answers: 36; contents: "
        "['一个仓库有240件货物，先发走15%，又入库36件…']) [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: thinking disabled: 1/1 correct answers to the 240 question, yet reasoning came back: '…'",
         "sample 1: non-streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-llama-server.yaml#20": (
        "AssertionError: thinking is on, yet the reasoning field (reasoning / reasoning_content) is empty; content: "
        "'{\\n    \"name\": \"Person 1\",\\n    \"age\": 100\\n  }'",
        ["AssertionError: reasoning markers ['<think>'] in the JSON content: '<think>{}'",
         "Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
    "gemma3-270m-llama-server.yaml#21": (
        "sample 1: in a 1,024-token prompt: the code at 50% depth, jade-50-1-473115, is missing",
        ["sample 1: the answer holds no JSON object (the reply was cut at max_tokens): '<document>…'",
         "sample 1: in a 1,024-token prompt: the code at 50% depth is wrong: jade-50-1-473116 instead of "
         "jade-50-1-473115"]),
    "gemma3-270m-llama-server.yaml#22": (
        "AssertionError: thinking enabled: 0/1 correct answers to the 240 question (answers: 36; contents: "
        "['一个仓库有240件货物，先发走15%，又入库36件…\\n<think>\\n…']) [trials: 0/1 passed, rule: all 1]",
        ["AssertionError: thinking enabled, yet the reasoning field (reasoning / reasoning_content) is empty",
         "AssertionError: thinking enabled: 0/1 correct answers to the 240 question; the reasoning used up max_tokens "
         "(128 completion tokens, finish_reason 'length') before any answer: content is empty after 301 characters "
         "of reasoning [trials: 0/1 passed, rule: all 1]"]),
    "gemma3-270m-llama-server.yaml#23": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: content '<think>\\n<think>\\n…'",
        ["AssertionError: turn 2, after the tool results: the reasoning field (reasoning / reasoning_content) is empty",
         "AssertionError: turn 1, the ask: the engine refused the history the loop built (2 messages): HTTP 500: {}"]),
    "gemma3-270m-vllm-cpu.yaml#23": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: the reasoning used up max_tokens (128 completion tokens, finish_reason 'length') before "
        "any answer: content is empty after 300 characters of reasoning",
        ["AssertionError: turn 3, the follow-up: reasoning markers ['</think>'] in content, with </think> in the prompt "
         "(the system prompt, the history): '</think>x'",
         "AssertionError: turn 1, the ask: the engine refused the history the loop built (2 messages): HTTP 500: {}"]),
    # Issue 41's agent loop and issue 40's media count on llama-cpp-python's server, first run after their merge.
    "llamacpp-0.3-contract.yaml#24": (
        "AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
        "OpenAI API allows) was refused: HTTP 500: {\"message\": \"7 validation errors:\\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role')\"}",
        ["AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
         "OpenAI API allows) was refused: HTTP 400: {\"message\": \"bad request\"}",
         "AssertionError: history shape 'content-empty' (an assistant message with tool_calls and content ''): the "
         "answer does not use the tool results for 广州, 北京: '请调用…'"]),
    "llamacpp-0.3-contract.yaml#25": (
        "image found broken by capability discovery (pure-red-512.png: image_url part dropped: prompt_tokens 7 with the "
        "image, 7 without (the engine answered 200 but did not read the image)); the engine's handling of "
        "bordered-red-512.png: usage.prompt_tokens is 7 with bordered-red-512.png and 7 without: the engine did not "
        "count the bordered-red-512.png (dropped before the prompt?)",
        ["AssertionError: the engine's handling of bordered-red-512.png: the request with bordered-red-512.png failed: "
         "HTTP 500: {}",
         "AssertionError: the engine's handling of bordered-red-512.png: the streamed reply has no usage although "
         "stream_options.include_usage was set"]),
    "llamacpp-0.3-contract.yaml#26": (
        "AssertionError: history shape 'content-omitted': no answer after the tool results (finish_reason=None)",
        ["AssertionError: history shape 'content-omitted': no answer after the tool results (finish_reason='length')",
         "AssertionError: history shape 'content-omitted' (an assistant message with tool_calls and no content field): "
         "the answer does not use the tool results for 广州, 北京: 'x'"]),
    "llamacpp-0.3-contract.yaml#27": (
        "the reply with bordered-red-512.png has no usage although stream_options.include_usage was set | the reply "
        "without bordered-red-512.png has no usage although stream_options.include_usage was set",
        ["AssertionError: the engine's handling of bordered-red-512.png: usage.prompt_tokens is 7 with "
         "bordered-red-512.png and 7 without: the engine did not count the bordered-red-512.png",
         "AssertionError: the engine's handling of bordered-red-512.png: the request with bordered-red-512.png failed: "
         "HTTP 500: {}"]),
    "gemma3-270m-llamacpp.yaml#11": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: content '请调用 get_weather 查询广州和北京的天气…'",
        ["AssertionError: turn 2, after the tool results: the engine refused the history the loop built (4 messages): "
         "HTTP 500: {}"]),
    "gemma3-270m-llamacpp.yaml#12": (
        "AssertionError: turn 1: the model called no tool for '请调用 get_weather 查询广州和北京的天气，然后告诉我哪个城市更暖和。', so "
        "the loop cannot go on: content '请调用 get_weather…'",
        ["AssertionError: usage.prompt_tokens does not grow with the history: [120, 118, 140]"]),
    "gemma3-270m-llamacpp.yaml#13": (
        "AssertionError: history shape 'content-empty' (an assistant message with tool_calls and content ''): the answer "
        "does not use the tool results for 广州, 北京: '请调用 get_weather 查询广州和北京的天气…'",
        ["AssertionError: history shape 'content-null' (an assistant message with tool_calls and content null, as the "
         "OpenAI API allows) was refused: HTTP 500: {}"]),
    "llama-server-b11312-contract.yaml#14": (
        "image found broken by capability discovery (pure-red-512.png: HTTP 500: image input is not supported - hint: "
        "if this is unexpected, you may need to provide the mmproj); the engine's handling of bordered-red-512.png: the "
        "request with bordered-red-512.png failed: HTTP 500: {\"code\": 500, \"message\": \"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj\", \"type\": \"server_error\"}",
        ["AssertionError: the engine's handling of bordered-red-512.png: usage.prompt_tokens is 62 with "
         "bordered-red-512.png and 62 without: the engine did not count the bordered-red-512.png",
         "AssertionError: the engine's handling of bordered-red-512.png: the request with bordered-red-512.png failed: "
         "HTTP 500: {\"message\": \"Failed to load image\"}"]),
    "llama-server-b11312-contract.yaml#15": (
        "video found broken by capability discovery (video-rgb-16f.mp4: HTTP 500: video input is not supported - hint: "
        "if this is unexpected, you may need to provide the mmproj); the engine's handling of video-rgb-16f.mp4: the "
        "request with video-rgb-16f.mp4 failed: HTTP 500: {\"code\": 500, \"message\": \"video input is not supported - hint: if this is unexpected, you may need to provide the mmproj\", \"type\": \"server_error\"}",
        ["AssertionError: the engine's handling of video-rgb-16f.mp4: usage.prompt_tokens is 40 with video-rgb-16f.mp4 "
         "and 40 without: the engine did not count the video-rgb-16f.mp4",
         "AssertionError: the engine's handling of video-rgb-16f.mp4: the request with video-rgb-16f.mp4 failed: "
         "HTTP 500: {\"message\": \"Could not open video stream\"}"]),
    "llama-server-b11312-contract.yaml#16": (
        "AssertionError: 16 images of media/pure-red-512.png in one prompt: server error on client data: HTTP 500, body "
        "{\"code\": 500, \"message\": \"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj\", \"type\": \"server_error\"}",
        ["AssertionError: 16 images of media/pure-red-512.png in one prompt: server error on client data: HTTP 500, "
         "body {\"message\": \"At most 8 image(s) may be provided in one prompt.\"}",
         "AssertionError: the engine stopped serving: after 16 images in one prompt (HTTP 500) a normal request failed: "
         "connection refused"]),
    "gemma3-270m-vllm-cpu.yaml#22": (
        "AssertionError: the tool loop in progress, with reasoning: the engine refused the history (5 messages): HTTP "
        "400: {\"message\": \"Conversation roles must alternate user/assistant/user/assistant/...\", \"type\": "
        "\"BadRequestError\", \"param\": null, \"code\": 400}",
        ["AssertionError: the tool loop in progress, with reasoning: the engine refused the history (5 messages): HTTP "
         "500: {}",
         "AssertionError: the reasoning sent back is not in the prompt: 140 prompt tokens with it and 140 without"]),
    "seed-001-media.yaml#0": (
        "AssertionError: pure-red-512.png is one single colour, red (红/紅/red); the answer names ['black']: '1. 黑色'",
        ["AssertionError: pure-red-512.png is one single colour, red (红/紅/red); the answer names ['white']: '白色'",
         "AssertionError: pure-red-512.png is one single colour, red (红/紅/red); the answer names no colour: ''"]),
    "seed-001-media.yaml#1": (HTTP_500, [HANG, ACCEPTED, CRASHED]),
    "seed-001-media.yaml#2": (HTTP_500.replace("truncated-png", "invalid-base64"), [HANG, ACCEPTED, CRASHED]),
    "seed-001-media.yaml#3": (HTTP_500.replace("image_url", "video_url"), [HANG, ACCEPTED, CRASHED]),
    "seed-minimax-m3.yaml#0": (
        "AssertionError: thinking disabled: 0/3 correct answers to the 240 question (answers: 264, 264, 264; "
        "contents: ['264', '264', '264'])",
        ["AssertionError: thinking disabled: 1/3 correct answers to the 240 question (answers: 240, 264, 264; "
         "contents: [])",
         "AssertionError: thinking disabled: 0/3 correct answers to the 240 question (answers: None, None, None; "
         "contents: [])"]),
    "seed-minimax-m3.yaml#1": (
        "AssertionError: the reasoning field (reasoning / reasoning_content) is empty and content holds reasoning "
        "markers ['<think>', '</think>']: '<think>\\n19×37…'",
        ["AssertionError: the reasoning field (reasoning / reasoning_content) is empty",
         "AssertionError: content is empty: the answer is missing next to the reasoning"]),
    "seed-minimax-m3.yaml#2": (
        "AssertionError: reasoning markers ['<think>', '</think>'] in content: '<think>\\n19×37…'",
        ["Failed: streamed request to http://h/v1/chat/completions failed: HTTP 500: {}"]),
}


def test_shipped_records_describe_exactly_the_failure_they_record() -> None:
    records = {record.origin: record for record in load_expectations()}
    assert set(records) == set(SHIPPED), "a shipped record was added or removed: add its failures here"
    for origin, (recorded, others) in SHIPPED.items():
        failure = records[origin].failure
        assert failure.matches(recorded), (origin, failure, recorded)
        for other in others:
            assert not failure.matches(other), (origin, failure, other)


# --- loading --------------------------------------------------------------------------

@pytest.mark.parametrize(("failure", "expected"), [
    (None, r"records/0: 'failure' is a required property"),
    ({}, r"records/0/failure"),
    ({"message": "HTTP (500"}, r"records/0/failure/message: 'HTTP \(500' is not a valid regular expression"),
    ({"message": "server error on client data", "category": "Server error"},
     r"records/0/failure/category: 'Server error' is not one of the report's failure "
                                   r"categories: Engine error \(5xx\), Timeout or hang"),
    ({"message": "x", "status": 500}, r"records/0/failure: Additional properties are not allowed"),
], ids=["missing", "empty", "bad-regex", "unknown-category", "unknown-field"])
def test_a_bad_failure_description_is_rejected_naming_file_and_record(tmp_path: Path, failure, expected) -> None:
    path = _records(tmp_path, [_record("test_corrupt_media.py::*", failure)])
    with pytest.raises(ProfileError, match=expected) as excinfo:
        load_expectations([path])
    assert str(path) in str(excinfo.value)


@pytest.mark.e2e
@pytest.mark.parametrize("failure", [None, {"message": "HTTP (500"}], ids=["no-failure", "bad-regex"])
def test_a_bad_record_file_is_a_usage_error_naming_it(pytester: pytest.Pytester, failure) -> None:
    path = _records(pytester.path, [_record(f"{USAGE_CHECK}[*]", failure)])
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "text", f"--expectations={path}")
    assert result.ret == 4, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([f"*--expectations: {path}: field records/0*"])


# --- end to end -----------------------------------------------------------------------

def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


@pytest.mark.e2e
def test_a_record_for_another_failure_leaves_the_check_failing(pytester: pytest.Pytester) -> None:
    """bad-usage breaks total_tokens; a record expecting "no usage" does not cover that (under xdist too)."""
    records = _records(pytester.path, [
        _record(f"{USAGE_CHECK}[non-streamed]", {"message": "no usage in the reply"}),
        _record(f"{USAGE_CHECK}[streamed]", {"message": r"usage\.total_tokens=\d+ but prompt_tokens",
                                             "category": "Protocol violation"}),
    ])
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "text", "-k", "usage", "--inject", "bad-usage", "-n", "2",
                          f"--expectations={records}", f"--gate-json={pytester.path / 'gate.json'}")
    assert result.ret == 1, result.stdout.str()[-3000:]
    verdict = _gate(pytester)
    assert verdict["gate"] == "fail"
    [failing] = verdict["failing_checks"]
    assert failing["id"] == f"{USAGE_CHECK}[non-streamed]"
    assert failing["reason"].startswith(
        f"{MISMATCH}: record records.yaml#0 expects a message matching /no usage in the reply/; "
        "got: AssertionError: usage.total_tokens="), failing["reason"]
    [known] = verdict["known_defects"]
    assert known["id"] == f"{USAGE_CHECK}[streamed]" and "[record records.yaml#1]" in known["record"]
    result.stdout.fnmatch_lines([f"E   {MISMATCH}: record records.yaml#0 *; got: AssertionError: usage.total_tokens=*",
                                 "*GATE: FAIL*"])
    allure = read_results(pytester.path / "allure-results")
    mismatched = allure["test_usage_is_present_and_total_is_prompt_plus_completion[non-streamed]"]
    assert mismatched.status == "failed"
    assert mismatched.raw["statusDetails"]["trace"].startswith(f"E   {MISMATCH}: record records.yaml#0")
    assert mismatched.message.startswith("AssertionError: usage.total_tokens=")  # its category: Protocol violation
    assert allure["test_usage_is_present_and_total_is_prompt_plus_completion[streamed]"].status == "skipped"


@pytest.mark.e2e
@pytest.mark.parametrize(("defect", "category"), [
    (("--inject", "never-answer", "--request-timeout", "1", "--idle-timeout", "1"), "Timeout or hang"),
    (("--inject", "media-crash"), None),
], ids=["hang", "crash"])
def test_shipped_sglang_500_records_do_not_cover_another_corrupt_media_failure(pytester: pytest.Pytester, defect,
                                                                              category) -> None:
    """Seed 001's "HTTP 500 on corrupt media" records, on an SGLang-like engine that hangs or crashes instead."""
    shipped = yaml.safe_load((EXPECTATIONS_DIR / "seed-001-media.yaml").read_text(encoding="utf-8"))
    sglang = [dict(record, model="^reference-model$") for record in shipped["records"] if record["engine"] == "sglang"]
    for record in sglang:
        record.pop("versions", None)  # the reference engine's version is not the seed's build
    records = _records(pytester.path, sglang, "sglang-records.yaml")
    check = "tests/test_corrupt_media.py::test_corrupt_media_is_rejected_with_4xx_and_an_error_body[truncated-png]"
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "corrupt_media", "-k", "truncated-png", "--convention", "sglang", *defect,
                          f"--expectations={records}", f"--gate-json={pytester.path / 'gate.json'}")
    assert result.ret == 1, result.stdout.str()[-3000:]
    verdict = _gate(pytester)
    assert verdict["gate"] == "fail" and not verdict["known_defects"]
    [failing] = verdict["failing_checks"]
    assert failing["id"] == check
    expects = (f"{MISMATCH}: record sglang-records.yaml#0 expects category 'Engine error (5xx)' and a message "
               r"matching /server error on client data: HTTP 500\b/; got: ")
    assert failing["reason"].startswith(expects), failing["reason"]
    got = failing["reason"][len(expects):]
    assert "AssertionError: corrupt sample truncated-png" in got
    assert ("no answer within the idle timeout" if category else "the connection failed") in got
    if category:
        assert got.startswith(f"[{category}] ")
    allure = read_results(pytester.path / "allure-results")
    assert allure["test_corrupt_media_is_rejected_with_4xx_and_an_error_body[truncated-png]"].status == "failed"


@pytest.mark.e2e
def test_a_record_for_one_of_two_wire_problems_does_not_excuse_the_other(pytester: pytest.Pytester) -> None:
    """n-ignored and finish-reason-twice together: one message, two problems; the record covers the first only.

    The record is llamacpp-0.3-contract.yaml#10's ("no chunk carries a finish_reason for choice 1");
    searched in the whole message it would also excuse choice 0's repeated finish_reason.
    """
    check = "tests/test_wire.py::test_each_choice_gets_exactly_one_finish_reason[n2]"
    records = _records(pytester.path, [_record("test_wire.py::test_each_choice_gets_exactly_one_finish_reason[n2]",
                                               {"message": "no chunk carries a finish_reason for choice 1"})])
    result, _ = run_suite(pytester, *NO_LATENCY, "-m", "wire", "-k", "exactly_one_finish_reason and n2", "--inject", "n-ignored",
                          "--inject", "finish-reason-twice", f"--expectations={records}",
                          f"--gate-json={pytester.path / 'gate.json'}")
    assert result.ret == 1, result.stdout.str()[-3000:]
    verdict = _gate(pytester)
    assert verdict["gate"] == "fail" and not verdict["known_defects"]
    [failing] = verdict["failing_checks"]
    assert failing["id"] == check
    assert failing["reason"].startswith(
        f"{MISMATCH}: record records.yaml#0 expects a message matching /no chunk carries a finish_reason for choice "
        f"1/; got: choice 0 gets a finish_reason 2 times"), failing["reason"]
    assert failing["reason"].endswith("(1 of 2 problems described by no record)"), failing["reason"]


# --- a record cannot over-reach (issue 39) ----------------------------------------------------

@pytest.mark.e2e
def test_a_record_whose_pattern_is_error_is_refused_before_anything_runs(pytester: pytest.Pytester) -> None:
    """`message: "Error"` matched every failure's `AssertionError: ` and excused bad-usage's wrong total.

    Before (main 21ada8b) the same command printed GATE: PASS with both usage checks XFAIL.
    """
    team = pytester.path / "team"
    (team / "expectations").mkdir(parents=True)
    path = _records(team / "expectations", [_record(f"{USAGE_CHECK}[*]", {"message": "Error"})], name="too-broad.yaml")
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "text", "-k", "usage", "--inject", "bad-usage",
                                 f"--profiles-dir={team}")
    assert result.ret == 4 and not outcomes, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    result.stderr.fnmatch_lines([
        f"*{path}: record too-broad.yaml#0 ({USAGE_CHECK}[[]*[]]): field records/0/failure/message 'Error' does not "
        "describe one problem: it matches 'AssertionError: ' in the sample problem a usage problem (*), a part "
        "records are not matched against*; write the check's own words for the one problem the record excuses*"])


@pytest.mark.e2e
def test_a_teams_refusal_that_matches_any_text_is_refused_before_anything_runs(pytester: pytest.Pytester) -> None:
    """`message: "."` under tools would turn a crashing tool parser (tool-parser-400) into "not served"."""
    team = pytester.path / "team"
    (team / "engines").mkdir(parents=True)
    vllm = (REPO / "fixtures/profiles/engines/vllm.yaml").read_text(encoding="utf-8")
    engine = team / "engines" / "vllm.yaml"
    engine.write_text(vllm.replace("  tools:\n", "  tools:\n    - status: 400\n      message: '.'\n", 1),
                      encoding="utf-8")
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "tools", "--inject", "tool-parser-400",
                                 f"--profiles-dir={team}")
    assert result.ret == 4 and not outcomes, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    result.stderr.fnmatch_lines([f"*{engine}: field refusals/tools/0/message: '.' matches 'Internal Server Error', "
                                 "what an engine or a proxy answers when something fails*"])


@pytest.mark.e2e
def test_a_record_of_a_recall_checks_first_problem_leaves_its_second_failing(pytester: pytest.Pytester) -> None:
    """no-stream-usage and corrupt-code: the stream has no usage *and* the recalled code is wrong.

    A record of the missing usage (llamacpp-0.3-contract.yaml's, for the reference engine's model)
    excused the whole check on main, which stopped at its first assertion; now the check reports
    both, the record excuses the usage, and the wrong code fails the gate. The control, whose
    answer is right, fails on the usage alone: that stays the record's.
    """
    records = _records(pytester.path, [_record("test_recall.py::*", {
        "message": "the streamed reply has no usage although stream_options.include_usage was set"})])
    field = "test_recall.py::test_field_extraction_returns_the_asked_key_exactly[depth10-key1]"
    control = "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"
    result, outcomes = run_suite(pytester, "-m", "recall", "--recall-tokens=8192", "-k", "depth10-key1 or control",
                                 "--inject", "no-stream-usage", "--inject", "corrupt-code", f"--expectations={records}",
                                 f"--gate-json={pytester.path / 'gate.json'}")
    assert outcomes == {field: "failed", control: "skipped"}, result.stdout.str()[-3000:]
    assert result.ret == 1
    verdict = _gate(pytester)
    [failing] = verdict["failing_checks"]
    assert failing["id"] == f"tests/{field}"
    assert failing["reason"].startswith(f"{MISMATCH}: record records.yaml#0 expects a message matching /the streamed "
                                        "reply has no usage"), failing["reason"]
    assert "got: sample 1: asked for the key jade-10-1-…: the code at 10% depth is wrong: jade-10-1-" in \
        failing["reason"]
    assert failing["reason"].endswith("(1 of 2 problems described by no record)"), failing["reason"]
    [known] = verdict["known_defects"]
    assert known["id"] == f"tests/{control}" and "[record records.yaml#0]" in known["record"]
    result.stdout.fnmatch_lines(["*GATE: FAIL*"])
