"""Fuzzing the SSE parser and the reassembly with generated streams (hypothesis).

``test_sse.py`` splits one fixed stream anywhere and feeds random bytes. Here the
streams themselves are generated (content, reasoning and tool-call fragments with
any Unicode, keep-alive comments, ``event:`` lines, LF, CRLF or CR line ends), then
split at random, truncated at any byte, interleaved with random garbage, or
replaced by arbitrary JSON. What must hold: nothing raises; every event that was
complete arrives whole and in order; the reply rebuilt is exactly what was sent;
what cannot be read is reported in ``Reply.unreadable``, never silently used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_acceptance.wire.reassembly import reassemble_stream, reply_from_body
from engine_acceptance.wire.sse import SSEParser, parse_sse

LINE_ENDS = ("\n", "\r\n", "\r")
TERMINATORS = tuple(end * 2 for end in LINE_ENDS)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class SentStream:
    """A generated stream: its bytes, the data of each event, and the reply it encodes."""

    payload: bytes
    data: list[str]
    content: str
    reasoning: str
    arguments: dict[int, str] = field(default_factory=dict)
    # Byte offset just after each event's terminator, in order.
    event_ends: list[int] = field(default_factory=list)


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
piece = st.one_of(
    st.tuples(st.just("content"), text),
    st.tuples(st.just("reasoning_content"), text),
    st.tuples(st.just("reasoning"), text),
    st.tuples(st.just("tool"), st.tuples(st.integers(0, 2), text)),
)


@st.composite
def streams(draw: st.DrawFn) -> SentStream:
    pieces = draw(st.lists(piece, max_size=12))
    reasoning_name = draw(st.sampled_from(["reasoning_content", "reasoning"]))
    chunks: list[dict[str, Any]] = [_chunk({"role": "assistant", "content": ""})]
    content, reasoning, arguments = [], [], {}
    for kind, value in pieces:
        if kind == "content":
            chunks.append(_chunk({"content": value}))
            content.append(value)
        elif kind == "tool":
            index, fragment = value
            chunks.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
            arguments[index] = arguments.get(index, "") + fragment
        else:
            # One reasoning field name per stream, as an engine uses.
            chunks.append(_chunk({reasoning_name: value}))
            reasoning.append(value)
    chunks.append(_chunk({}, finish="stop"))
    data = [json.dumps(chunk, ensure_ascii=draw(st.booleans())) for chunk in chunks] + ["[DONE]"]
    out, ends = "", []
    for item in data:
        if draw(st.booleans()):
            out += ": keep-alive" + draw(st.sampled_from(TERMINATORS))
            ends.append(len(out.encode("utf-8")))  # a comment is an event of its own, without data
        line_end = draw(st.sampled_from(LINE_ENDS))
        prefix = "event: message" + line_end if draw(st.booleans()) else ""
        out += prefix + "data: " + item + line_end + line_end
        ends.append(len(out.encode("utf-8")))
    return SentStream(out.encode("utf-8"), data, "".join(content), "".join(reasoning), arguments, ends)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fuzz", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _split(payload: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(payload) + 1) for cut in cuts})
    return [payload[a:b] for a, b in zip([0, *points], [*points, len(payload)])]


def _feed(pieces: list[bytes]):
    parser = SSEParser()
    events = [event for part in pieces for event in parser.feed(part)]
    tail, leftover = parser.close()
    return events + tail, leftover


def _data_events(events) -> list[str]:
    return [event.data for event in events if event.has_data]


@FUZZ
@given(streams(), st.lists(st.integers(min_value=0), max_size=30))
def test_generated_stream_split_anywhere_arrives_whole(sent: SentStream, cuts: list[int]) -> None:
    events, leftover = _feed(_split(sent.payload, cuts))
    assert leftover == b""
    assert _data_events(events) == sent.data
    reply = reassemble_stream(events)
    assert reply.content == sent.content
    assert reply.reasoning == sent.reasoning
    assert {call.index: call.arguments for call in reply.tool_calls} == sent.arguments
    assert reply.done_received and reply.finish_reason == "stop"
    assert reply.problems == [] and reply.unreadable == []


@FUZZ
@given(streams(), st.integers(min_value=0), st.lists(st.integers(min_value=0), max_size=10))
def test_truncated_stream_keeps_every_complete_event_exactly(sent: SentStream, cut: int, cuts: list[int]) -> None:
    cut %= len(sent.payload) + 1
    events, _ = _feed(_split(sent.payload[:cut], cuts))
    # Events (data or comment) whose blank line arrived before the cut.
    complete = [end for end in sent.event_ends if end <= cut]
    got = _data_events(events)
    whole = _data_events(parse_sse(sent.payload[: complete[-1]])[0]) if complete else []
    assert got[: len(whole)] == whole, "an event that was complete was lost or changed"
    # At most the unterminated tail is added, and it comes last.
    assert len(got) <= len(whole) + 1
    reply = reassemble_stream(events)  # never raises on a cut stream
    if cut < len(sent.payload) and not reply.done_received:
        assert "stream ended without data: [DONE]" in reply.problems


@FUZZ
@given(streams(), st.lists(st.tuples(st.integers(min_value=0), st.binary(min_size=1, max_size=40)), max_size=4),
       st.lists(st.integers(min_value=0), max_size=20))
def test_garbage_between_events_is_reported_and_loses_no_real_event(sent: SentStream,
                                                                     garbage: list[tuple[int, bytes]],
                                                                     cuts: list[int]) -> None:
    payload = sent.payload
    boundaries = [0, *sent.event_ends]
    # Insert from the back so earlier offsets stay valid; each block ends with a blank line.
    for where, junk in sorted(garbage, key=lambda item: item[0] % len(boundaries), reverse=True):
        at = boundaries[where % len(boundaries)]
        payload = payload[:at] + junk + b"\n\n" + payload[at:]
    events, _ = _feed(_split(payload, cuts))
    got = iter(_data_events(events))
    assert all(any(item == data for item in got) for data in sent.data), "a real event went missing"
    reply = reassemble_stream(events)
    if not any(b"[DONE]" in junk for _, junk in garbage):
        assert reply.content == sent.content


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["choices", "delta", "content", "index", "tool_calls", "function", "arguments", "name",
                         "finish_reason", "usage", "error", "message", "text", "reasoning_content", "role", "id"]),
        inner, max_size=5),
    max_leaves=25,
)


@FUZZ
@given(st.lists(json_values, max_size=6), st.booleans())
def test_any_json_in_events_never_raises_and_odd_shapes_are_unreadable(values: list[Any], done: bool) -> None:
    payload = b"".join(b"data: " + json.dumps(value).encode() + b"\n\n" for value in values)
    events, _ = parse_sse(payload + (b"data: [DONE]\n\n" if done else b""))
    reply = reassemble_stream(events)
    assert isinstance(reply.content, str) and isinstance(reply.reasoning, str)
    assert all(isinstance(call.arguments, str) and isinstance(call.name, str) for call in reply.tool_calls)
    # Every event that is not an object is reported as unreadable, none silently skipped.
    not_objects = sum(not isinstance(value, dict) for value in values)
    assert len(reply.unreadable) >= not_objects


@FUZZ
@given(st.dictionaries(st.sampled_from(["choices", "usage", "id", "model", "error"]), json_values, max_size=4))
def test_any_json_body_never_raises(body: dict[str, Any]) -> None:
    reply = reply_from_body(body)
    assert isinstance(reply.content, str)
    if reply.unreadable:
        assert set(reply.unreadable) <= set(reply.problems)


def test_deeply_nested_event_is_unreadable_not_a_recursion_error() -> None:
    events, _ = parse_sse(b"data: " + b"[" * 100_000 + b"\n\ndata: [DONE]\n\n")
    reply = reassemble_stream(events)
    assert reply.unreadable and "not JSON" in reply.unreadable[0]


def test_one_event_arriving_in_many_reads_is_parsed_once_whole() -> None:
    # The parser resumes its boundary search where it stopped (not from the start),
    # which must not miss a terminator split across reads.
    content = "y" * 50_000
    payload = b"data: " + json.dumps(_chunk({"content": content}, "stop")).encode() + b"\r\n\r\ndata: [DONE]\n\n"
    events, leftover = _feed([payload[i:i + 7] for i in range(0, len(payload), 7)])
    assert leftover == b"" and reassemble_stream(events).content == content
