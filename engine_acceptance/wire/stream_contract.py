"""Reading the wire contract of a streamed chat completion out of its raw events and bytes.

The checks of ``tests/test_wire.py`` (issue 15, "the wire, read raw") ask what the reassembled
:class:`~engine_acceptance.wire.reassembly.Reply` deliberately forgives: which chunk carried the
role, which carried usage and whether its ``choices`` was empty, how many chunks carried a
``finish_reason`` per choice, how tool-call fragments were indexed, whether the text holds U+FFFD,
and whether the bytes were framed as ``data:`` lines under ``text/event-stream``. Each function
returns what is wrong, in sentences (empty when nothing is); plain functions, tested without an
engine in ``selftest/wire/test_stream_contract.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.reassembly import REASONING_FIELDS
from engine_acceptance.wire.sse import SSEEvent, parse_sse

__all__ = [
    "CONTINUOUS_USAGE_MODES",
    "REPLACEMENT_CHARACTER",
    "Chunk",
    "chunks_of",
    "continuous_usage_problems",
    "finish_reason_problems",
    "framing_problems",
    "media_type",
    "multibyte_characters",
    "replacement_problems",
    "role_problems",
    "stream_events",
    "tool_call_fragments",
    "tool_index_problems",
    "usage_chunk_problems",
]

REPLACEMENT_CHARACTER = "\ufffd"
# Which chunks carry usage under stream_options.continuous_usage_stats, by engine profile's
# `features.continuous_usage_stats`.
CONTINUOUS_USAGE_MODES = {
    "every_chunk": "every chunk (the role chunk, each output chunk and each finish chunk)",
    "output_chunks": "every chunk that carries reasoning, content or tool calls",
}


@dataclass(frozen=True)
class Chunk:
    """One JSON chunk of a stream: its position among the stream's data events, and its object."""

    number: int
    data: Mapping[str, Any]

    @property
    def choices(self) -> list[Mapping[str, Any]]:
        choices = self.data.get("choices")
        return [c for c in choices if isinstance(c, Mapping)] if isinstance(choices, list) else []

    @property
    def usage(self) -> Mapping[str, Any] | None:
        usage = self.data.get("usage")
        return usage if isinstance(usage, Mapping) else None

    def describe(self) -> str:
        return f"chunk {self.number + 1}: {_short(self.data)}"


def _short(value: Any, limit: int = 240) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def stream_events(exchange: Exchange) -> list[SSEEvent]:
    """The events of a streamed exchange, parsed from its raw bytes when the client did not parse them.

    The raw client parses a body as SSE only when it is labelled ``text/event-stream``; a stream
    mislabelled (the content-type check's verdict) is still read here, so each check judges only
    its own part of the wire.
    """
    if exchange.events or not exchange.raw:
        return list(exchange.events)
    events, _leftover = parse_sse(exchange.raw)
    return events


def chunks_of(events: Iterable[SSEEvent]) -> list[Chunk]:
    """The JSON-object chunks before ``[DONE]``, numbered by their place among the data events."""
    chunks = []
    for number, event in enumerate(e for e in events if e.has_data):
        if event.is_done:
            break
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            continue  # the reassembly names an event that is not JSON
        if isinstance(data, Mapping):
            chunks.append(Chunk(number, data))
    return chunks


def _delta(choice: Mapping[str, Any]) -> Mapping[str, Any]:
    delta = choice.get("delta")
    return delta if isinstance(delta, Mapping) else {}


def _has_output(delta: Mapping[str, Any]) -> bool:
    return bool(delta.get("content") or delta.get("tool_calls") or any(delta.get(f) for f in REASONING_FIELDS))


def role_problems(chunks: Sequence[Chunk]) -> list[str]:
    """Each choice's first chunk must carry ``delta.role == "assistant"`` (vLLM and SGLang send it alone)."""
    seen: set[Any] = set()
    problems = []
    for chunk in chunks:
        for choice in chunk.choices:
            index = choice.get("index")
            if index in seen:
                continue
            seen.add(index)
            role = _delta(choice).get("role")
            if role != "assistant":
                problems.append(f"the first chunk of choice {index} carries role {role!r}, not 'assistant' "
                                f"({chunk.describe()})")
    if not seen:
        problems.append("no chunk of the stream carries a choice")
    return problems


def usage_chunk_problems(chunks: Sequence[Chunk]) -> list[str]:
    """With ``include_usage``: one chunk with usage, ``choices: []``, after every chunk with choices."""
    with_usage = [chunk for chunk in chunks if chunk.data.get("usage") is not None]
    if not with_usage:
        return [f"stream_options.include_usage was set, yet none of the {len(chunks)} chunks carries usage"]
    problems = []
    if len(with_usage) > 1:
        problems.append(f"{len(with_usage)} chunks carry usage, where one final chunk should: "
                        + "; ".join(chunk.describe() for chunk in with_usage[:3]))
    final = with_usage[-1]
    if final.data.get("choices") != []:
        problems.append(f"the usage chunk has choices {_short(final.data.get('choices'), 160)}, not [] "
                        f"({final.describe()})")
    later = [chunk for chunk in chunks if chunk.number > final.number and chunk.choices]
    if later:
        problems.append(f"{len(later)} chunk(s) with choices follow the usage chunk, which must be the last: "
                        f"{later[0].describe()}")
    return problems


def continuous_usage_problems(chunks: Sequence[Chunk], mode: str) -> list[str]:
    """With ``continuous_usage_stats`` (n=1): usage where `mode` says, never decreasing, the final one the total."""
    if mode not in CONTINUOUS_USAGE_MODES:
        raise ValueError(f"unknown continuous usage mode {mode!r}; known: {', '.join(CONTINUOUS_USAGE_MODES)}")
    with_choices = [chunk for chunk in chunks if chunk.choices]
    due = with_choices if mode == "every_chunk" else [
        chunk for chunk in with_choices if any(_has_output(_delta(choice)) for choice in chunk.choices)]
    missing = [chunk for chunk in due if chunk.usage is None]
    problems = []
    if missing:
        problems.append(f"{len(missing)} of {len(due)} chunks lack usage, where {CONTINUOUS_USAGE_MODES[mode]} "
                        f"should carry it: {missing[0].describe()}")
    counted = [chunk for chunk in chunks if chunk.usage is not None]
    if not counted:
        return problems or ["no chunk carries usage"]
    figures = [chunk.usage.get("completion_tokens") for chunk in counted]
    if not all(isinstance(figure, int) and not isinstance(figure, bool) for figure in figures):
        return [*problems, f"usage.completion_tokens is not an integer in every chunk: {figures[:12]}"]
    drops = [(earlier, later) for earlier, later in zip(counted, counted[1:])
             if later.usage["completion_tokens"] < earlier.usage["completion_tokens"]]
    if drops:
        earlier, later = drops[0]
        problems.append(f"usage.completion_tokens goes down from {earlier.usage['completion_tokens']} "
                        f"(chunk {earlier.number + 1}) to {later.usage['completion_tokens']} "
                        f"(chunk {later.number + 1})")
    final = counted[-1]
    if final.choices:
        problems.append(f"the last chunk with usage has choices; the final usage chunk (choices []) is missing: "
                        f"{final.describe()}")
    elif mode == "every_chunk":
        last = next((chunk for chunk in reversed(counted) if chunk.choices), None)
        keys = ("prompt_tokens", "completion_tokens", "total_tokens")
        if last is not None and any(last.usage.get(key) != final.usage.get(key) for key in keys):
            problems.append(f"the final usage {_short(dict(final.usage), 160)} differs from the last chunk's "
                            f"running usage {_short(dict(last.usage), 160)}")
    return problems


def finish_reason_problems(chunks: Sequence[Chunk], n: int) -> list[str]:
    """Exactly one chunk per choice index ``0..n-1`` carries a ``finish_reason``."""
    counts: dict[Any, list[Chunk]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            if choice.get("finish_reason") is not None:
                counts.setdefault(choice.get("index"), []).append(chunk)
    problems = []
    for index in range(n):
        carriers = counts.get(index, [])
        if not carriers:
            problems.append(f"no chunk carries a finish_reason for choice {index}")
        elif len(carriers) > 1:
            reasons = [next(c.get("finish_reason") for c in chunk.choices if c.get("index") == index)
                       for chunk in carriers]
            problems.append(f"choice {index} gets a finish_reason {len(carriers)} times ({reasons}), in chunks "
                            f"{[chunk.number + 1 for chunk in carriers]}: {carriers[1].describe()}")
    strangers = sorted((index for index in counts if index not in range(n)), key=str)
    if strangers:
        problems.append(f"finish_reason for choice indexes {strangers}, where n={n} asked for 0..{n - 1}")
    return problems


def tool_call_fragments(chunks: Sequence[Chunk]) -> list[Mapping[str, Any]]:
    """Choice 0's tool-call fragments, in the order they were streamed."""
    fragments = []
    for chunk in chunks:
        for choice in chunk.choices:
            if choice.get("index", 0) != 0:
                continue
            calls = _delta(choice).get("tool_calls")
            fragments += [call for call in calls if isinstance(call, Mapping)] if isinstance(calls, list) else []
    return fragments


def tool_index_problems(fragments: Sequence[Mapping[str, Any]]) -> list[str]:
    """Indexes start at 0, a new call (a new ``id``) takes the next one, later fragments never go back.

    A fragment that repeats its call's id continues that call (clients merge by index, so a
    repeated id is harmless on the wire); a fragment without an id continues the latest call.
    """
    problems: list[str] = []
    ids: list[Any] = []  # the id of each call, by index
    current: int | None = None
    for number, fragment in enumerate(fragments, 1):
        index, call_id = fragment.get("index"), fragment.get("id")
        where = f"fragment {number} {_short(dict(fragment), 160)}"
        if not isinstance(index, int) or isinstance(index, bool):
            problems.append(f"{where} has no integer index")
            continue
        if call_id and call_id not in ids:
            if index != len(ids):
                problems.append(f"{where} starts call {len(ids) + 1} (a new id) at index {index}, "
                                f"not {len(ids)}")
            ids.append(call_id)
            current = index
        elif current is None:
            problems.append(f"{where} continues a call before any call started (no id yet)")
        elif call_id and ids.index(call_id) != current:
            problems.append(f"{where} goes back to call {ids.index(call_id) + 1} after call {len(ids)} started")
        elif index != current:
            problems.append(f"{where} carries index {index}, but the call being streamed has index {current}")
    return problems


def multibyte_characters(text: str) -> str:
    """The distinct characters of `text` that take more than one byte in UTF-8, in order of appearance."""
    return "".join(dict.fromkeys(char for char in text if len(char.encode("utf-8", "surrogatepass")) > 1))


def replacement_problems(text: str, where: str) -> list[str]:
    """Each U+FFFD in `text`, with a little of the text around it."""
    problems = []
    start = 0
    while (at := text.find(REPLACEMENT_CHARACTER, start)) >= 0:
        problems.append(f"{where} has U+FFFD at character {at}: {text[max(0, at - 12):at + 12]!r}")
        start = at + 1
    if len(problems) > 5:
        problems = [*problems[:5], f"and {len(problems) - 5} more U+FFFD in {where}"]
    return problems


def media_type(headers: Mapping[str, str]) -> str | None:
    """The Content-Type's media type, lower case, without parameters (``charset``); None when absent."""
    value = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    return None if value is None else value.split(";", 1)[0].strip().lower()


def framing_problems(raw: bytes, *, truncated: bool = False) -> list[str]:
    """Every event is one ``data:`` line (``:`` comments aside), and the stream ends at a blank line."""
    events, leftover = parse_sse(raw)
    problems = []
    for number, event in enumerate(events, 1):
        lines = [line for line in event.raw.decode("utf-8", "replace").splitlines() if line]
        data_lines = [line for line in lines if line.startswith("data:")]
        other = [line for line in lines if not line.startswith(("data:", ":"))]
        if other:
            problems.append(f"event {number} has a line that is not data: {_short(other[0], 120)!r}")
        elif len(data_lines) > 1:
            problems.append(f"event {number} has {len(data_lines)} data lines, not one: "
                            f"{_short(data_lines[1], 120)!r}")
    if leftover.strip() and not truncated:
        tail = leftover[-120:].decode("utf-8", "replace")
        problems.append(f"the stream ends inside an event, without its blank line: {tail!r}")
    if not events:
        problems.append("the body holds no event at all")
    return problems
