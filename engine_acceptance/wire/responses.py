"""Reading the Responses API (``/v1/responses``): its output items and its event stream.

A response (``"object": "response"``) has a ``status``, a list of ``output`` items (a
``message`` with ``output_text`` parts, a ``reasoning`` item, ``function_call`` items with a
``call_id``) and a ``usage`` of ``input_tokens``, ``output_tokens`` and ``total_tokens``.
Streamed, it comes as typed events: ``response.created`` first, then per output item
``response.output_item.added``, its content part, deltas, ``.done`` events and
``response.output_item.done``, and a terminal ``response.completed`` (OpenAI also has
``response.incomplete`` and ``response.failed``) holding the whole response. Every event may
carry a ``sequence_number``.

These functions read what an engine sent and say, in sentences, what breaks the contract;
they never raise on a bad stream. No pytest here: ``tests/test_responses.py`` asserts on them
and ``selftest/wire/test_responses_reading.py`` tests them on made-up streams.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.wire.sse import SSEEvent

__all__ = ["TERMINAL_EVENTS", "ResponseStream", "delta_problems", "items_of", "order_problems", "output_text",
           "read_stream", "status_problems", "usage_problems"]

# The events that end a stream, each holding the final response.
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
# Cap on quoted event data in a problem.
_QUOTE = 160


@dataclass
class ResponseStream:
    """The typed events of a streamed response, in the order received, and what could not be read."""

    events: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [str(event.get("type")) for event in self.events]

    @property
    def final(self) -> dict[str, Any] | None:
        """The response of the last terminal event, or None when the stream has none."""
        for event in reversed(self.events):
            if event.get("type") in TERMINAL_EVENTS and isinstance(event.get("response"), dict):
                return event["response"]
        return None


def read_stream(events: Iterable[SSEEvent]) -> ResponseStream:
    """The JSON events of a Responses stream (an ``event:`` line's name is read from ``type`` instead)."""
    stream = ResponseStream()
    for event in events:
        if not event.has_data or event.is_done:
            continue
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            stream.unreadable.append(f"event data is not JSON: {event.data[:_QUOTE]!r}")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            stream.unreadable.append(f"event without a type: {event.data[:_QUOTE]!r}")
            continue
        stream.events.append(data)
    return stream


def items_of(response: Mapping[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    """The output items of `kind` (``message``, ``reasoning``, ``function_call``) of a response."""
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, list):
        return []
    return [item for item in output if isinstance(item, dict) and item.get("type") == kind]


def _message_text(item: Mapping[str, Any]) -> str:
    parts = item.get("content") if isinstance(item.get("content"), list) else []
    return "".join(part.get("text") or "" for part in parts
                   if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str))


def output_text(response: Mapping[str, Any] | None) -> str:
    """Every message item's output_text, joined: what the SDK's ``response.output_text`` gives."""
    return "".join(_message_text(item) for item in items_of(response, "message"))


def status_problems(response: Mapping[str, Any], max_output_tokens: int) -> list[str]:
    """A finished response's status: ``completed``, or ``incomplete`` because max_output_tokens cut it."""
    status = response.get("status")
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    if status == "completed":
        return []
    if status == "incomplete":
        if reason != "max_output_tokens":
            return [f"status 'incomplete' with incomplete_details {json.dumps(details)}, not the reason "
                    f"'max_output_tokens' of a reply cut at max_output_tokens={max_output_tokens}"]
        return []
    error = response.get("error")
    return [f"status {status!r}, not 'completed' (or 'incomplete' at max_output_tokens={max_output_tokens})"
            + (f"; error {json.dumps(error, ensure_ascii=False)[:_QUOTE]}" if error else "")]


def usage_problems(response: Mapping[str, Any], max_output_tokens: int) -> list[str]:
    """usage has whole-number input, output and total tokens; total is their sum; output within the budget."""
    usage = response.get("usage")
    if not isinstance(usage, Mapping):
        return [f"usage is {json.dumps(usage)}, not an object with input_tokens, output_tokens, total_tokens"]
    counts = {key: usage.get(key) for key in ("input_tokens", "output_tokens", "total_tokens")}
    bad = [key for key, value in counts.items() if not isinstance(value, int) or isinstance(value, bool) or value < 0]
    if bad:
        return [f"usage.{', usage.'.join(bad)} not a whole number: {json.dumps(dict(usage))[:_QUOTE]}"]
    problems = []
    if counts["input_tokens"] + counts["output_tokens"] != counts["total_tokens"]:
        problems.append(f"usage.input_tokens {counts['input_tokens']} + output_tokens {counts['output_tokens']} "
                        f"!= total_tokens {counts['total_tokens']}")
    if counts["output_tokens"] > max_output_tokens:
        problems.append(f"usage.output_tokens {counts['output_tokens']} is over max_output_tokens={max_output_tokens}")
    if counts["input_tokens"] == 0:
        problems.append("usage.input_tokens is 0 for a prompt that has text")
    return problems


def _item_key(event: Mapping[str, Any]) -> str | None:
    """The item an event belongs to: its item_id, or the id of the item it carries."""
    if isinstance(event.get("item_id"), str):
        return event["item_id"]
    item = event.get("item")
    return item.get("id") if isinstance(item, Mapping) and isinstance(item.get("id"), str) else None


def order_problems(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """What is out of order in a stream's events.

    ``response.created`` first; one terminal event, last; ``sequence_number`` strictly
    increasing where events carry it; each output item's ``output_item.added`` before any
    other event of that item, and its ``output_item.done`` after all of them.
    """
    if not events:
        return ["the stream has no events"]
    types = [str(event.get("type")) for event in events]
    problems = []
    if types[0] != "response.created":
        problems.append(f"the first event is {types[0]!r}, not 'response.created'")
    terminal = [i for i, kind in enumerate(types) if kind in TERMINAL_EVENTS]
    if not terminal:
        problems.append(f"no terminal event ({', '.join(TERMINAL_EVENTS)}); the last is {types[-1]!r}")
    elif terminal != [len(types) - 1]:
        problems.append(f"terminal events at positions {terminal} of {len(types)}: one, the last, is expected")
    numbers = [(i, event["sequence_number"]) for i, event in enumerate(events)
               if isinstance(event.get("sequence_number"), int)]
    for (_, before), (index, after) in zip(numbers, numbers[1:]):
        if after <= before:
            problems.append(f"sequence_number {after} of event #{index} ({types[index]}) does not follow {before}")
            break
    added: set[str] = set()
    done: set[str] = set()
    for index, (kind, event) in enumerate(zip(types, events)):
        key = _item_key(event)
        if key is None or kind in TERMINAL_EVENTS or kind in ("response.created", "response.in_progress"):
            continue
        if kind == "response.output_item.added":
            added.add(key)
        elif key not in added:
            problems.append(f"event #{index} ({kind}) of item {key!r} comes before its response.output_item.added")
            added.add(key)  # said once per item
        if key in done:
            problems.append(f"event #{index} ({kind}) of item {key!r} comes after its response.output_item.done")
        if kind == "response.output_item.done":
            done.add(key)
    missing = sorted(added - done)
    if missing:
        problems.append(f"no response.output_item.done for item(s) {', '.join(map(repr, missing))}")
    return problems


def delta_problems(events: Sequence[Mapping[str, Any]], final: Mapping[str, Any] | None) -> list[str]:
    """Whether each message's ``output_text.delta``s add up to its ``output_text.done`` text and to the
    final response's text of that item."""
    deltas: dict[tuple[str, int], list[str]] = {}
    done: dict[tuple[str, int], str] = {}
    for event in events:
        key = (str(event.get("item_id")), event.get("content_index") if isinstance(event.get("content_index"), int)
               else 0)
        if event.get("type") == "response.output_text.delta":
            deltas.setdefault(key, []).append(str(event.get("delta") or ""))
        elif event.get("type") == "response.output_text.done":
            done[key] = str(event.get("text") or "")
    if not deltas and not done:
        return ["no response.output_text.delta or .done event in the stream"]
    final_texts = {str(item.get("id")): _message_text(item) for item in items_of(final, "message")}
    problems = []
    for key in sorted(set(deltas) | set(done)):
        item_id, part = key
        joined = "".join(deltas.get(key, []))
        if key not in done:
            problems.append(f"item {item_id!r} part {part}: no response.output_text.done after its deltas")
        elif joined != done[key]:
            problems.append(f"item {item_id!r} part {part}: the deltas add up to {len(joined)} characters "
                            f"({joined[:60]!r}…), output_text.done says {len(done[key])} ({done[key][:60]!r}…)")
        if final is None:
            continue
        if item_id not in final_texts:
            problems.append(f"item {item_id!r} is not a message of the final response")
        elif final_texts[item_id] != joined:
            problems.append(f"item {item_id!r}: the final response's text has {len(final_texts[item_id])} "
                            f"characters ({final_texts[item_id][:60]!r}…), the deltas {len(joined)} "
                            f"({joined[:60]!r}…)")
    if final is None:
        problems.append("no terminal event with the final response to compare the text with")
    return problems
