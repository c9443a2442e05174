"""Self-tests of reading the API contract out of replies (engine_acceptance/wire/contract.py).

Crafted bodies and events, no engine: the error shapes of vLLM, SGLang and the bodies that
are neither, JSON content against a schema, the choices of an ``n > 1`` reply streamed
and not, and token log-probabilities (their shape, and every chunk's entries in order).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.contract import (
    choices_of,
    error_body_of,
    error_shape_problem,
    json_object_prefix_problem,
    json_problems,
    logprob_problems,
    logprobs_of,
)
from engine_acceptance.wire.sse import SSEEvent

VLLM = {"error": {"message": "n must be at least 1, got 0.", "type": "BadRequestError", "param": "n", "code": 400}}
SGLANG = {"object": "error", "message": "n must be at least 1, got 0.", "type": "BadRequestError", "param": "n",
          "code": 400}


@pytest.mark.parametrize(
    ("body", "shape", "problem"),
    [
        pytest.param(VLLM, "nested", None, id="vllm-nested"),
        pytest.param(SGLANG, "flat", None, id="sglang-flat"),
        pytest.param(SGLANG, "nested", "is not an OpenAI error object", id="flat-where-nested"),
        pytest.param(VLLM, "flat", "is not a flat error object", id="nested-where-flat"),
        pytest.param("n must be at least 1", "nested", "the body is not a JSON object", id="plain-text"),
        pytest.param({"detail": "Bad Request"}, "nested", "is not an OpenAI error object", id="fastapi-detail"),
        pytest.param({"error": "Unauthorized"}, "nested", "is not an OpenAI error object", id="error-string"),
        pytest.param({"error": {"message": "x"}}, "nested", "lacks a string type", id="no-type"),
        pytest.param({"object": "error", "type": "t"}, "flat", "lacks a string message", id="flat-no-message"),
    ],
)
def test_error_shape_problem(body: Any, shape: str, problem: str | None) -> None:
    found = error_shape_problem(body, shape)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_an_unknown_error_shape_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown error shape 'xml'"):
        error_shape_problem(VLLM, "xml")


def test_error_body_is_read_from_the_raw_bytes_not_the_sdks_unwrapped_body() -> None:
    # The SDK's APIStatusError.body is the inner object of {"error": {...}}: the shape is in the bytes.
    made = Exchange("POST", "u", {}, False, status=400, body=VLLM["error"], raw=json.dumps(VLLM).encode())
    assert error_body_of(made) == VLLM
    plain = Exchange("POST", "u", {}, False, status=400, body="bad", raw=b"bad request")
    assert error_body_of(plain) == "bad request"


SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"],
          "additionalProperties": False}


@pytest.mark.parametrize(
    ("content", "schema", "problem"),
    [
        pytest.param('{"age": 3}', SCHEMA, None, id="fits"),
        pytest.param('{"age": "3"}', SCHEMA, "age: '3' is not of type 'integer'", id="wrong-type"),
        pytest.param('{"age": 3, "x": 1}', SCHEMA, "(top level): Additional properties", id="extra-key"),
        pytest.param('{}', SCHEMA, "'age' is a required property", id="missing"),
        pytest.param("Sure! Here is", SCHEMA, "the content is not JSON", id="free-text"),
        pytest.param('{"age": 3', SCHEMA, "the content is not JSON", id="cut"),
        pytest.param('{"a": 1}', None, None, id="object"),
        pytest.param("[1, 2]", None, "not an object", id="array-where-object"),
    ],
)
def test_json_problems(content: str, schema: dict[str, Any] | None, problem: str | None) -> None:
    found = json_problems(content, schema)
    assert (not found) if problem is None else any(problem in item for item in found), found



@pytest.mark.parametrize(("content", "problem"), [
    ('{\n "answer": "yes",\n "answer_key": "answer_', None),  # cut in a key (llama.cpp, Gemma 3 270M)
    ('{"a": 1, "b": [1, {"c": tr', None),
    ('{"a":', None),
    ('{"a"', None),
    ('{"a": 1,', None),
    ('{"a": "x\\u00', None),
    ('{"a": -1.5e', None),
    ('{', None),
    ('Sure! {"a": 1', "does not begin a JSON object"),  # what an engine ignoring response_format writes
    ('[1, 2', "does not begin a JSON object"),
    ('{"a": 1}}', "not the start of a JSON object"),
    ('{"a": 1} and more', "not the start of a JSON object"),
    ('{"a" 1', "not the start of a JSON object"),
    ('{"a": nope', "not the start of a JSON object"),
])
def test_json_object_prefix_problem(content: str, problem: str | None) -> None:
    found = json_object_prefix_problem(content)
    assert found is None if problem is None else (found is not None and problem in found), found

def _body(*choices: tuple[int, str, str]) -> dict[str, Any]:
    return {"choices": [{"index": index, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish} for index, content, finish in choices]}


def _event(index: int, delta: dict[str, Any], finish: str | None = None) -> SSEEvent:
    return SSEEvent(json.dumps({"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}))


def test_choices_of_a_non_streamed_reply() -> None:
    made = Exchange("POST", "u", {}, False, status=200, body=_body((0, "a", "length"), (1, "b", "stop")))
    assert [(c.index, c.content, c.finish_reason) for c in choices_of(made)] == [(0, "a", "length"), (1, "b", "stop")]


def test_choices_of_an_interleaved_stream_are_rebuilt_per_index() -> None:
    events = [_event(0, {"role": "assistant", "content": ""}), _event(1, {"role": "assistant", "content": ""}),
              _event(1, {"content": "b1"}), _event(0, {"content": "a1"}), _event(0, {"content": "a2"}),
              _event(1, {"content": "b2"}), _event(0, {}, "length"), _event(1, {}, "length"),
              SSEEvent(json.dumps({"choices": [], "usage": {"completion_tokens": 4}})), SSEEvent("not json"),
              SSEEvent("[DONE]")]
    made = Exchange("POST", "u", {}, True, status=200, events=events)
    assert [(c.index, c.content, c.finish_reason) for c in choices_of(made)] == [(0, "a1a2", "length"),
                                                                              (1, "b1b2", "length")]


def test_a_stream_of_one_choice_has_one_choice_whatever_n_asked() -> None:
    made = Exchange("POST", "u", {}, True, status=200, events=[_event(0, {"content": "x"}), _event(0, {}, "stop")])
    assert [choice.index for choice in choices_of(made)] == [0]


def _entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]}


GOOD = [_entry("Hi", -0.1, [("Hi", -0.1), ("Hello", -2.0)]), _entry("!", -0.2, [("!", -0.2), (".", -1.9)])]


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        pytest.param(GOOD, None, id="good"),
        # Two byte tokens of one character both decode to U+FFFD: same text, other logprobs.
        pytest.param([_entry("\ufffd", -0.3, [("\ufffd", -0.3), ("\ufffd", -1.2)])], None, id="same-text-other-token"),
        pytest.param([_entry("Hi", -0.1, [("Hi", -0.1), ("Hi", -0.1)])], "repeats a token", id="repeated"),
        pytest.param([_entry("Hi", -0.1, [("Hi", -0.1)])], "has 1 top_logprobs, 2 were asked", id="too-few"),
        pytest.param([_entry("Hi", 0.5, [("Hi", 0.5), ("x", -1.0)])], "logprob <= 0", id="positive-logprob"),
        pytest.param([{"token": "Hi", "logprob": -0.1}], "has null top_logprobs", id="no-top-list"),
        pytest.param(["Hi"], "is not an object", id="not-an-object"),
    ],
)
def test_logprob_problems(entries: list[Any], problem: str | None) -> None:
    found = logprob_problems(entries, 2)
    assert (not found) if problem is None else any(problem in p for p in found), found


def test_logprobs_of_a_stream_are_every_chunks_entries_in_order_and_none_for_the_role_chunk() -> None:
    def chunk(logprobs: Any, delta: dict[str, Any]) -> SSEEvent:
        return SSEEvent(json.dumps({"choices": [{"index": 0, "delta": delta, "logprobs": logprobs}]}))

    events = [chunk(None, {"role": "assistant", "content": ""}), chunk({"content": GOOD[:1]}, {"content": "Hi"}),
              chunk({"content": GOOD[1:]}, {"content": "!"}), SSEEvent("[DONE]")]
    made = Exchange("POST", "u", {}, True, status=200, events=events)
    assert logprobs_of(made) == {0: GOOD}
    plain = Exchange("POST", "u", {}, False, status=200,
                     body={"choices": [{"index": 0, "message": {"content": "Hi!"}, "logprobs": {"content": GOOD}}]})
    assert logprobs_of(plain) == {0: GOOD}
    assert logprobs_of(Exchange("POST", "u", {}, False, status=200, body=_body((0, "a", "stop")))) == {}
