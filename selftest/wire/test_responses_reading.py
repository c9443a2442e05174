"""Self-tests of wire/responses.py: reading the Responses API's output items and event stream.

Made-up streams and bodies, each broken in one way, so every problem sentence is shown to be
said for what it names and for nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine_acceptance.wire.responses import (
    delta_problems,
    items_of,
    order_problems,
    output_text,
    read_stream,
    status_problems,
    usage_problems,
)
from engine_acceptance.wire.sse import SSEEvent


def _message(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _response(output: list[dict[str, Any]], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "output": output,
            "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}, **extra}


def _stream(deltas: list[str], *, done_text: str | None = None, final_text: str | None = None) -> list[dict[str, Any]]:
    """A well-formed stream of one message, numbered from 0."""
    text = "".join(deltas)
    at = {"item_id": "msg_1", "output_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response([], "in_progress")},
        {"type": "response.in_progress", "response": _response([], "in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": {**_message(""), "content": []}},
        {"type": "response.content_part.added", **at, "content_index": 0, "part": {"type": "output_text"}},
        *({"type": "response.output_text.delta", **at, "content_index": 0, "delta": d} for d in deltas),
        {"type": "response.output_text.done", **at, "content_index": 0,
         "text": text if done_text is None else done_text},
        {"type": "response.content_part.done", **at, "content_index": 0, "part": {"type": "output_text"}},
        {"type": "response.output_item.done", "output_index": 0, "item": _message(text)},
        {"type": "response.completed", "response": _response([_message(text if final_text is None else final_text)])},
    ]
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def _sse(events: list[dict[str, Any]]) -> list[SSEEvent]:
    return [SSEEvent(data=json.dumps(event), event=event["type"]) for event in events]


def test_read_stream_keeps_typed_events_and_finds_the_final_response() -> None:
    events = _stream(["Hel", "lo"])
    stream = read_stream([*_sse(events), SSEEvent(data="not json"), SSEEvent(data='{"no": "type"}')])
    assert stream.types == [event["type"] for event in events]
    assert stream.final == events[-1]["response"]
    assert output_text(stream.final) == "Hello"
    assert stream.unreadable == ["event data is not JSON: 'not json'", 'event without a type: \'{"no": "type"}\'']


def test_a_stream_without_a_terminal_event_has_no_final_response() -> None:
    assert read_stream(_sse(_stream(["a"])[:-1])).final is None


def test_items_of_and_output_text_read_only_messages() -> None:
    response = _response([{"id": "rs_1", "type": "reasoning", "content": [{"type": "reasoning_text", "text": "x"}]},
                          _message("A"), {"id": "fc_1", "type": "function_call", "call_id": "c"}, _message("B", "m2")])
    assert [item["id"] for item in items_of(response, "message")] == ["msg_1", "m2"]
    assert output_text(response) == "AB"
    assert items_of({"output": None}, "message") == [] and output_text(None) == ""


def test_a_well_formed_stream_has_no_order_or_delta_problems() -> None:
    events = _stream(["Hel", "lo", "!"])
    assert order_problems(events) == []
    assert delta_problems(events, events[-1]["response"]) == []


def _moved(events: list[dict[str, Any]], source: int, target: int) -> list[dict[str, Any]]:
    moved = list(events)
    moved.insert(target, moved.pop(source))
    return moved


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(lambda e: e[1:], "the first event is 'response.in_progress', not 'response.created'",
                     id="created-missing"),
        pytest.param(lambda e: e[:-1], "no terminal event (response.completed, response.incomplete, "
                     "response.failed); the last is 'response.output_item.done'", id="no-terminal"),
        pytest.param(lambda e: _moved(e, len(e) - 1, 4), "terminal events at positions [4] of 10: one, the last, "
                     "is expected", id="terminal-early"),
        pytest.param(lambda e: [*e[:5], {**e[5], "sequence_number": 2}, *e[6:]],
                     "sequence_number 2 of event #5 (response.output_text.delta) does not follow 4",
                     id="sequence-back"),
        pytest.param(lambda e: _moved(e, 2, 4), "event #2 (response.content_part.added) of item 'msg_1' comes "
                     "before its response.output_item.added", id="delta-before-added"),
        pytest.param(lambda e: _moved(e, 8, 5), "event #6 (response.output_text.delta) of item 'msg_1' comes "
                     "after its response.output_item.done", id="delta-after-done"),
        pytest.param(lambda e: [x for x in e if x["type"] != "response.output_item.done"],
                     "no response.output_item.done for item(s) 'msg_1'", id="never-done"),
        pytest.param(lambda e: [], "the stream has no events", id="empty"),
    ],
)
def test_order_problems_name_what_is_out_of_order(make: Any, problem: str) -> None:
    events = make(_stream(["Hel", "lo"]))
    assert problem in order_problems(events), order_problems(events)


def test_sequence_numbers_are_optional() -> None:
    events = [{key: value for key, value in event.items() if key != "sequence_number"} for event in _stream(["a"])]
    assert order_problems(events) == []


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        pytest.param(_stream(["Hel", "lo"], done_text="Help"), "item 'msg_1' part 0: the deltas add up to 5 "
                     "characters ('Hello'…), output_text.done says 4 ('Help'…)", id="done-differs"),
        pytest.param(_stream(["Hel", "lo"], final_text="lo"), "item 'msg_1': the final response's text has 2 "
                     "characters ('lo'…), the deltas 5 ('Hello'…)", id="final-truncated"),
        pytest.param([e for e in _stream(["Hel"]) if e["type"] != "response.output_text.done"],
                     "item 'msg_1' part 0: no response.output_text.done after its deltas", id="no-done"),
        pytest.param([e for e in _stream(["a"]) if "output_text" not in e["type"]],
                     "no response.output_text.delta or .done event in the stream", id="no-text-events"),
    ],
)
def test_delta_problems_compare_deltas_done_and_final_text(events: list[dict[str, Any]], problem: str) -> None:
    final = read_stream(_sse(events)).final
    assert problem in delta_problems(events, final), delta_problems(events, final)


def test_delta_problems_say_when_there_is_no_final_response() -> None:
    events = _stream(["a"])[:-1]
    assert delta_problems(events, None) == ["no terminal event with the final response to compare the text with"]


def test_a_message_missing_from_the_final_response_is_named() -> None:
    events = _stream(["a"])
    assert delta_problems(events, _response([_message("a", "other")])) == [
        "item 'msg_1' is not a message of the final response"]


@pytest.mark.parametrize(
    ("response", "problems"),
    [
        pytest.param(_response([]), [], id="completed"),
        pytest.param(_response([], "incomplete", incomplete_details={"reason": "max_output_tokens"}), [],
                     id="incomplete-at-budget"),
        pytest.param(_response([], "incomplete", incomplete_details=None),
                     ["status 'incomplete' with incomplete_details null, not the reason 'max_output_tokens' of a "
                      "reply cut at max_output_tokens=16"], id="incomplete-without-reason"),
        pytest.param(_response([], "failed", error={"code": "server_error"}),
                     ["status 'failed', not 'completed' (or 'incomplete' at max_output_tokens=16); error "
                      '{"code": "server_error"}'], id="failed"),
    ],
)
def test_status_problems(response: dict[str, Any], problems: list[str]) -> None:
    assert status_problems(response, 16) == problems


@pytest.mark.parametrize(
    ("usage", "problems"),
    [
        pytest.param({"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}, [], id="adds-up"),
        pytest.param({"input_tokens": 5, "output_tokens": 3, "total_tokens": 9},
                     ["usage.input_tokens 5 + output_tokens 3 != total_tokens 9"], id="total-off"),
        pytest.param({"input_tokens": 5, "output_tokens": 20, "total_tokens": 25},
                     ["usage.output_tokens 20 is over max_output_tokens=16"], id="over-budget"),
        pytest.param({"input_tokens": 0, "output_tokens": 3, "total_tokens": 3},
                     ["usage.input_tokens is 0 for a prompt that has text"], id="no-input"),
        pytest.param({"input_tokens": 5, "output_tokens": "3", "total_tokens": 8},
                     ['usage.output_tokens not a whole number: {"input_tokens": 5, "output_tokens": "3", '
                      '"total_tokens": 8}'], id="string"),
        pytest.param(None, ["usage is null, not an object with input_tokens, output_tokens, total_tokens"],
                     id="missing"),
    ],
)
def test_usage_problems(usage: Any, problems: list[str]) -> None:
    assert usage_problems({"usage": usage}, 16) == problems
