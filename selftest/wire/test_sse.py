"""The SSE parser and the reassembly: split anywhere, never raise, lose nothing complete."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine_acceptance.wire.reassembly import reassemble_stream, reply_from_body
from engine_acceptance.wire.sse import SSEParser, parse_sse


def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def sse(*payloads, done: bool = True, newline: str = "\n") -> bytes:
    parts = [f"data: {json.dumps(p, ensure_ascii=False)}{newline}{newline}" for p in payloads]
    if done:
        parts.append(f"data: [DONE]{newline}{newline}")
    return "".join(parts).encode("utf-8")


STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning_content": "先算 "}),
    chunk({"reasoning_content": "19×37。"}),
    chunk({"content": "70"}),
    chunk({"content": "3 ✓"}),
    chunk({}, "stop"),
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
     "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}},
)


def split_at(payload: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(payload) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(payload[start:point])
        start = point
    pieces.append(payload[start:])
    return pieces


def parse_pieces(pieces: list[bytes]):
    parser = SSEParser()
    events = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    tail, leftover = parser.close()
    return events + tail, leftover


def test_whole_stream_reassembles_content_reasoning_usage_and_done() -> None:
    events, leftover = parse_sse(STREAM)
    reply = reassemble_stream(events)
    assert leftover == b""
    assert reply.content == "703 ✓"
    assert reply.reasoning == "先算 19×37。"
    assert reply.reasoning_fields == ["reasoning_content"]
    assert reply.finish_reason == "stop"
    assert reply.usage.total_tokens == 12 and not reply.usage.inconsistencies()
    assert reply.done_received and reply.problems == []
    assert reply.role == "assistant"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_splitting_the_stream_anywhere_gives_the_same_reply(cuts: list[int]) -> None:
    whole = reassemble_stream(parse_sse(STREAM)[0]).summary()
    events, leftover = parse_pieces(split_at(STREAM, cuts))
    assert leftover == b""
    assert reassemble_stream(events).summary() == whole


def test_every_single_byte_split_gives_the_same_reply() -> None:
    whole = reassemble_stream(parse_sse(STREAM)[0]).summary()
    events, _ = parse_pieces([STREAM[i:i + 1] for i in range(len(STREAM))])
    assert reassemble_stream(events).summary() == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_crlf_line_ends_and_comments_parse_like_lf(cuts: list[int]) -> None:
    crlf = b": keep-alive\r\n\r\n" + sse(chunk({"content": "a"}), chunk({"content": "b"}, "stop"), newline="\r\n")
    events, _ = parse_pieces(split_at(crlf, cuts))
    reply = reassemble_stream(events)
    assert reply.content == "ab" and reply.finish_reason == "stop" and reply.done_received


def test_several_events_in_one_read_and_multiline_data() -> None:
    payload = b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"x"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    events, _ = parse_sse(payload)
    assert len(events) == 2
    reply = reassemble_stream(events)
    assert reply.content == "x" and reply.done_received


def test_stream_without_done_is_reported_not_raised() -> None:
    events, _ = parse_sse(sse(chunk({"content": "hi"}), chunk({}, "stop"), done=False))
    reply = reassemble_stream(events)
    assert reply.content == "hi"
    assert not reply.done_received
    assert "stream ended without data: [DONE]" in reply.problems


def test_unterminated_final_event_is_still_parsed_and_reported() -> None:
    payload = sse(chunk({"content": "hi"})) [: -len(b"data: [DONE]\n\n")] + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    events, leftover = parse_sse(payload)
    reply = reassemble_stream(events)
    assert reply.finish_reason == "stop"
    assert leftover.startswith(b"data:")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0, max_value=3000), max_size=20))
def test_random_bytes_never_raise(payload: bytes, cuts: list[int]) -> None:
    events, _ = parse_pieces(split_at(payload, cuts))
    reply = reassemble_stream(events)
    assert isinstance(reply.problems, list)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(STREAM)))
def test_truncated_stream_keeps_every_complete_event(cut: int) -> None:
    truncated = STREAM[:cut]
    complete = truncated.count(b"\n\n")
    events, _ = parse_pieces([truncated])
    assert len(events) >= complete
    reassemble_stream(events)  # must not raise


def test_both_reasoning_field_names_are_accepted_and_reported() -> None:
    events, _ = parse_sse(sse(chunk({"reasoning": "think"}), chunk({"content": "ok"}, "stop")))
    reply = reassemble_stream(events)
    assert reply.reasoning == "think" and reply.reasoning_fields == ["reasoning"]
    body = {"choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok", "reasoning_content": "think"}}]}
    assert reply_from_body(body).reasoning_fields == ["reasoning_content"]


def test_tool_call_fragments_reassemble_like_the_non_streamed_calls() -> None:
    events, _ = parse_sse(sse(
        chunk({"tool_calls": [{"index": 0, "id": "c0", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "c1", "type": "function",
                               "function": {"name": "get_weather", "arguments": "{\"ci"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"广州\"}"}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "ty\": \"北京\"}"}}]}),
        chunk({}, "tool_calls"),
    ))
    reply = reassemble_stream(events)
    assert [c.parsed_arguments() for c in reply.tool_calls] == [{"city": "广州"}, {"city": "北京"}]
    assert reply.shape()["tool_calls"] == ["get_weather", "get_weather"]


def test_inconsistent_usage_is_described() -> None:
    body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 8}}
    problems = reply_from_body(body).usage.inconsistencies()
    assert problems == ["usage.total_tokens=8 but prompt_tokens + completion_tokens = 3 + 4 = 7"]


def test_malformed_json_event_is_a_problem_not_an_exception() -> None:
    events, _ = parse_sse(b"data: {not json\n\n" + sse(chunk({"content": "ok"}, "stop")))
    reply = reassemble_stream(events)
    assert reply.content == "ok"
    assert any("not JSON" in problem for problem in reply.problems)
