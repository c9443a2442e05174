"""End to end: a chat template that drops the message is named as such, in those words.

``template-drops-messages`` makes the reference engine render only the role markers, as
llama.cpp's llama-server started with ``--jinja --chat-template gemma`` renders the literal
word (3 prompt tokens for a 2,700-character message). Usage and the engine's own count of
the conversation then agree with each other, so comparing them finds nothing: what is wrong
is that the conversation counts fewer tokens than its messages' text. The suite says "the
chat template or the prompt is broken" where it counts prompts exactly (the accounting checks,
with the engine's /tokenize) and where it can only calibrate an estimate from usage (recall
without /tokenize or a tokenizer: the longer sample counts no more than the shorter), where it
once said "the calibration made no sense".
"""

from __future__ import annotations

import pytest
from suite_runner import NO_LATENCY, failed, run_suite

pytestmark = pytest.mark.e2e

DEFECT = ("--inject", "template-drops-messages")
CHAT = {f"test_usage_accounting.py::test_chat_prompt_tokens_match_the_engines_count[{mode}]"
        for mode in ("non-streamed", "streamed")}
FIELD = "test_recall.py::test_field_extraction_returns_the_asked_key_exactly"
FIELD_KEYS = {f"{FIELD}[depth{depth}-key{key}]" for depth in (10, 50, 90) for key in (1, 2, 3)}
CONTROL = "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"


def test_the_accounting_checks_say_the_template_dropped_the_message(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *NO_LATENCY, "-m", "text", "-k", "test_usage_accounting", *DEFECT)
    output = result.stdout.str()
    # The completions prompt has no chat template: its count is right.
    assert failed(outcomes) == CHAT, output[-3000:]
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*the chat template or the prompt is broken: usage.prompt_tokens is * tokens but the message text (server "
        "POST /tokenize at *) alone counts *: the message text is not in what the engine counted*"])
    # The engine's own count of the conversation agrees with usage: only the new words catch it.
    assert "but the engine's own /tokenize counts" not in output


def test_recall_without_a_count_says_the_template_dropped_the_message(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall", "--recall-tokens=4096", "--reference-serves=no-tokenize",
                                 *DEFECT)
    output = result.stdout.str()
    assert failed(outcomes) == FIELD_KEYS | {CONTROL}, output[-3000:]
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*the 4096-token recall prompt could not be built: the chat template or the prompt is broken: the engine's "
        "usage.prompt_tokens counted * tokens for a *-character text and * for * characters (POST "
        "/v1/chat/completions): the text is not in what the engine counted*"])
    assert "the calibration made no sense" not in output
