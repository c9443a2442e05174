"""Self-tests of the reference engine's API-contract rules, without a server.

The request validation (vLLM's wording for invalid values, response_format, a tool result
without its call, n at temperature 0), the JSON it writes for a schema, and stop strings.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.conventions import get_convention
from engine_acceptance.reference_engine.generation import generate_chat
from engine_acceptance.reference_engine.protocol import RequestError, ResponseFormat, parse_chat_request
from engine_acceptance.reference_engine.structured import structured_answer
from engine_acceptance.reference_engine.tokenizer import get_tokenizer

USER = {"role": "user", "content": "hi"}


def parse(**fields: Any):
    body = {"model": "reference-model", "messages": [USER], **fields}
    return parse_chat_request(body, config=ReferenceEngineConfig(), convention=get_convention("vllm"))


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        pytest.param({"temperature": -1}, "temperature", "temperature must be non-negative, got -1.0.",
                     id="temperature"),
        pytest.param({"n": 0}, "n", "n must be at least 1, got 0.", id="n-zero"),
        pytest.param({"n": 2, "temperature": 0}, "n", "n must be 1 when using greedy sampling, got 2.", id="n-greedy"),
        pytest.param({"max_tokens": 0}, "max_tokens", "max_tokens must be at least 1, got 0.", id="max-tokens"),
        pytest.param({"stop": [""]}, "stop", "stop cannot contain an empty string.", id="empty-stop"),
        pytest.param({"messages": [USER, {"role": "tool", "tool_call_id": "c1", "content": "{}"}]}, "messages",
                     "must answer a tool call of an earlier assistant message", id="tool-without-call"),
        pytest.param({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}},
                     "response_format", "Invalid JSON schema in response_format", id="uncompilable-schema"),
        pytest.param({"response_format": {"type": "json_schema", "schema": {"type": "object"}}}, "response_format",
                     "'json_schema' must be provided", id="schema-not-wrapped"),
        pytest.param({"response_format": {"type": "yaml"}}, "response_format", "got 'yaml'", id="unknown-type"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(fields: dict[str, Any], param: str, message: str) -> None:
    with pytest.raises(RequestError) as refused:
        parse(**fields)
    assert refused.value.status == 400 and refused.value.param == param and message in refused.value.message


def test_a_tool_result_answering_an_earlier_call_is_accepted() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    request = parse(messages=[USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                              {"role": "tool", "tool_call_id": "c1", "content": "{}"}])
    assert len(request.messages) == 3


def test_sampling_and_response_format_are_read() -> None:
    request = parse(n=3, temperature=0.7, stop="END", response_format={"type": "json_object"})
    assert (request.sampling.n, request.sampling.stop, request.response_format) == (3, ("END",),
                                                                                  ResponseFormat("json_object"))


SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
                                           "ok": {"type": "boolean"}},
          "required": ["name", "age"], "additionalProperties": False}


def test_structured_answer_fits_the_schema() -> None:
    text = structured_answer(ResponseFormat("json_schema", SCHEMA), "The answer is 200 years")
    instance = json.loads(text)
    jsonschema.validate(instance, SCHEMA)
    assert instance["name"] == "The answer" and instance["age"] == 150


def test_json_object_wraps_the_answer() -> None:
    assert json.loads(structured_answer(ResponseFormat("json_object"), "hi")) == {"answer": "hi"}


def test_a_schema_the_rules_cannot_satisfy_is_refused_not_answered_with_invalid_json() -> None:
    with pytest.raises(RequestError, match="cannot satisfy"):
        structured_answer(ResponseFormat("json_schema", {"type": "string", "pattern": "^[0-9]+$"}), "words")


def test_a_stop_string_ends_the_answer_and_is_left_out_but_counted() -> None:
    tokenizer = get_tokenizer()
    plain = generate_chat(None, "one two three", max_tokens=100, tokenizer=tokenizer)
    stopped = generate_chat(None, "one two three", max_tokens=100, tokenizer=tokenizer, stop=["two"])
    assert (plain.content, plain.finish_reason) == ("one two three", "stop")
    assert (stopped.content, stopped.finish_reason, stopped.completion_tokens) == ("one ", "stop", len("one two"))
    kept = generate_chat(None, "one two three", max_tokens=100, tokenizer=tokenizer, stop=["two"], include_stop=True)
    assert kept.content == "one two"
    # The earliest stop wins, whichever is listed first.
    assert generate_chat(None, "one two three", max_tokens=100, tokenizer=tokenizer,
                         stop=["three", "two"]).content == "one "


def test_max_tokens_before_the_stop_string_cuts_with_length() -> None:
    cut = generate_chat(None, "one two three", max_tokens=3, tokenizer=get_tokenizer(), stop=["two"])
    assert (cut.content, cut.finish_reason, cut.completion_tokens) == ("one", "length", 3)
