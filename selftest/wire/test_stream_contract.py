"""Self-tests of reading the wire contract out of raw streams (engine_acceptance/wire/stream_contract.py).

Crafted chunks and bytes, no engine: vLLM's and SGLang's shapes pass, and each fault the wire
checks exist for (role late, usage on the finish chunk, usage missing or going down, a second
finish_reason, tool-call indexes that start elsewhere or go back, U+FFFD, framing garbage) is named.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.sse import parse_sse
from engine_acceptance.wire.stream_contract import (
    chunks_of,
    continuous_usage_problems,
    finish_reason_problems,
    framing_problems,
    media_type,
    multibyte_characters,
    replacement_problems,
    role_problems,
    stream_events,
    tool_call_fragments,
    tool_index_problems,
    usage_chunk_problems,
)


def _usage(completion: int) -> dict[str, int]:
    return {"prompt_tokens": 5, "completion_tokens": completion, "total_tokens": 5 + completion}


def _chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, index: int = 0,
           usage: Any = "absent") -> dict[str, Any]:
    body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk",
                            "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}]}
    if usage != "absent":
        body["usage"] = usage
    return body


def _stream(*bodies: dict[str, Any], done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(body, ensure_ascii=False)}\n\n" for body in bodies)
    return (text + ("data: [DONE]\n\n" if done else "")).encode("utf-8")


def _chunks(*bodies: dict[str, Any]):
    return chunks_of(parse_sse(_stream(*bodies))[0])


USAGE_ONLY = {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": _usage(2)}
VLLM_STREAM = (_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Hi"}), _chunk({"content": "!"}),
               _chunk({}, finish="stop"), USAGE_ONLY)


def test_vllm_shaped_stream_passes_role_usage_and_finish_reason() -> None:
    chunks = _chunks(*VLLM_STREAM)
    assert role_problems(chunks) == []
    assert usage_chunk_problems(chunks) == []
    assert finish_reason_problems(chunks, 1) == []


def test_role_arriving_after_the_first_chunk_is_named() -> None:
    chunks = _chunks(_chunk({"content": ""}), _chunk({"role": "assistant", "content": "Hi"}), _chunk(finish="stop"))
    assert "the first chunk of choice 0 carries role None" in role_problems(chunks)[0]


def test_usage_on_the_finish_chunk_is_named() -> None:
    chunks = _chunks(_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Hi"}),
                     _chunk(finish="stop", usage=_usage(2)))
    assert "the usage chunk has choices" in " ".join(usage_chunk_problems(chunks))


def test_usage_in_several_chunks_or_missing_is_named() -> None:
    twice = _chunks(_chunk({"role": "assistant"}, usage=_usage(0)), _chunk(finish="stop"), USAGE_ONLY)
    assert "2 chunks carry usage" in usage_chunk_problems(twice)[0]
    assert "none of the 2 chunks carries usage" in usage_chunk_problems(_chunks(_chunk({"role": "assistant"}),
                                                                               _chunk(finish="stop")))[0]


def test_sglang_null_usage_counts_as_no_usage() -> None:
    chunks = _chunks(_chunk({"role": "assistant", "content": ""}, usage=None), _chunk(finish="stop", usage=None),
                     USAGE_ONLY)
    assert usage_chunk_problems(chunks) == []


def test_continuous_usage_every_chunk_and_output_chunks() -> None:
    vllm = _chunks(_chunk({"role": "assistant", "content": ""}, usage=_usage(0)),
                   _chunk({"content": "Hi"}, usage=_usage(1)), _chunk(finish="stop", usage=_usage(2)), USAGE_ONLY)
    assert continuous_usage_problems(vllm, "every_chunk") == []
    sglang = _chunks(_chunk({"role": "assistant", "content": ""}, usage=None),
                     _chunk({"content": "Hi"}, usage=_usage(1)), _chunk(finish="stop", usage=None), USAGE_ONLY)
    assert continuous_usage_problems(sglang, "output_chunks") == []
    assert "2 of 3 chunks lack usage" in continuous_usage_problems(sglang, "every_chunk")[0]


def test_continuous_usage_missing_going_down_or_final_differing_is_named() -> None:
    ignored = _chunks(*VLLM_STREAM)
    assert "lack usage" in continuous_usage_problems(ignored, "output_chunks")[0]
    down = _chunks(_chunk({"content": "Hi"}, usage=_usage(3)), _chunk({"content": "!"}, usage=_usage(1)),
                   USAGE_ONLY)
    assert any("goes down from 3" in problem for problem in continuous_usage_problems(down, "output_chunks"))
    differs = _chunks(_chunk({"content": "Hi"}, usage=_usage(1)), _chunk(finish="stop", usage=_usage(1)),
                      USAGE_ONLY)
    assert any("differs from the last chunk" in p for p in continuous_usage_problems(differs, "every_chunk"))
    with pytest.raises(ValueError, match="unknown continuous usage mode"):
        continuous_usage_problems(differs, "sometimes")


def test_finish_reason_twice_missing_or_for_a_stranger_index_is_named() -> None:
    twice = _chunks(_chunk({"content": "Hi"}, finish="stop"), _chunk(finish="stop"))
    assert "choice 0 gets a finish_reason 2 times" in finish_reason_problems(twice, 1)[0]
    two = _chunks(_chunk({"content": "a"}, index=0), _chunk({"content": "b"}, index=1), _chunk(finish="length"),
                  _chunk(finish="length", index=1))
    assert finish_reason_problems(two, 2) == []
    assert finish_reason_problems(two, 3) == ["no chunk carries a finish_reason for choice 2"]
    assert "choice indexes [1]" in finish_reason_problems(two, 1)[0]


def _call(index: int, call_id: str | None = None, name: str | None = None, arguments: str = "") -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        fragment.update(id=call_id, type="function", function={"name": name, "arguments": arguments})
    return fragment


def _tool_stream(*fragments: dict[str, Any]):
    return tool_call_fragments(_chunks(*(_chunk({"tool_calls": [fragment]}) for fragment in fragments)))


def test_tool_fragments_indexed_in_call_order_pass() -> None:
    good = _tool_stream(_call(0, "a", "get_weather"), _call(0, arguments='{"city"'), _call(0, arguments=': "x"}'),
                        _call(1, "b", "get_weather"), _call(1, arguments="{}"))
    assert len(good) == 5 and tool_index_problems(good) == []
    # Every fragment repeating its call's id and name: merged by index, still in order.
    repeated = _tool_stream(_call(0, "a", "get_weather", "{}"), _call(0, "a", "get_weather", ""),
                            _call(1, "b", "get_weather", "{}"))
    assert tool_index_problems(repeated) == []


@pytest.mark.parametrize(
    ("fragments", "problem"),
    [
        pytest.param([_call(0, "a", "f"), _call(0, "b", "f")], "starts call 2 (a new id) at index 0, not 1",
                     id="all-index-zero"),
        pytest.param([_call(1, "a", "f"), _call(2, "b", "f")], "starts call 1 (a new id) at index 1, not 0",
                     id="from-one"),
        pytest.param([_call(0, "a", "f"), _call(1, "b", "f"), _call(0, arguments="{}")],
                     "carries index 0, but the call being streamed has index 1", id="goes-back"),
        pytest.param([_call(0, "a", "f"), _call(1, "b", "f"), _call(0, "a", "f")], "goes back to call 1",
                     id="goes-back-by-id"),
        pytest.param([_call(0, arguments="{}")], "before any call started", id="no-id-first"),
    ],
)
def test_tool_index_faults_are_named(fragments: list[dict[str, Any]], problem: str) -> None:
    problems = tool_index_problems(_tool_stream(*fragments))
    assert problems and problem in problems[0], problems


def test_replacement_characters_and_multibyte_text() -> None:
    assert replacement_problems("蝴蝶 🦋", "content") == []
    found = replacement_problems("蝴蝶 \ufffd\ufffd", "content")
    assert len(found) == 2 and "content has U+FFFD at character 3" in found[0]
    assert len(replacement_problems("\ufffd" * 9, "reasoning")) == 6
    assert multibyte_characters("ab 蝴蝴 🦋 é") == "蝴🦋é"
    assert multibyte_characters("plain ascii") == ""


def test_media_type_ignores_parameters_and_case() -> None:
    assert media_type({"content-type": "text/event-stream; charset=utf-8"}) == "text/event-stream"
    assert media_type({"Content-Type": "Application/JSON"}) == "application/json"
    assert media_type({}) is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(_stream(*VLLM_STREAM), None, id="vllm"),
        pytest.param(b": keep-alive\n\n" + _stream(*VLLM_STREAM), None, id="comment"),
        pytest.param(b"data: {}\r\n\r\ndata: [DONE]\r\n\r\n", None, id="crlf"),
        pytest.param(b"event: delta\ndata: {}\n\ndata: [DONE]\n\n", "has a line that is not data", id="event-name"),
        pytest.param(b"data: {}\ngarbage\n\n", "has a line that is not data", id="garbage-line"),
        pytest.param(b"data: {}\ndata: {}\n\n", "has 2 data lines", id="two-data-lines"),
        pytest.param(b"data: {}\n\ndata: [DONE]", "ends inside an event", id="unterminated"),
        pytest.param(b'{"choices": []}', "holds no event", id="json-body"),
        pytest.param(b"", "holds no event", id="empty"),
    ],
)
def test_framing_problems(raw: bytes, problem: str | None) -> None:
    problems = framing_problems(raw)
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


def test_a_mislabelled_stream_is_still_read_from_its_raw_bytes() -> None:
    # The raw client parses only text/event-stream; the other checks read the stream anyway.
    exchange = Exchange("POST", "http://engine/v1/chat/completions", {}, True, status=200,
                        raw=_stream(*VLLM_STREAM))
    assert not exchange.events
    chunks = chunks_of(stream_events(exchange))
    assert len(chunks) == 5 and role_problems(chunks) == []
