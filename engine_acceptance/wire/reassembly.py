"""One reassembly of a chat or completion reply, streamed or not.

Both clients (the openai SDK path and the raw aiohttp path) hand their parsed
events or response body to this module, so a streamed reply and a non-streamed
reply are compared field by field with the same code. Nothing here raises on a
bad stream: every oddity becomes a line in ``Reply.problems``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from engine_acceptance.wire.sse import SSEEvent

__all__ = [
    "CACHED_TOKENS_PATH",
    "REASONING_FIELDS",
    "REASONING_TOKENS_PATHS",
    "Reply",
    "ToolCall",
    "Usage",
    "reassemble_stream",
    "reply_from_body",
]

# SGLang and older vLLM say reasoning_content; newer vLLM says reasoning.
REASONING_FIELDS = ("reasoning_content", "reasoning")
VALID_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "abort"})
# Where an engine reports the reasoning's tokens in usage, first found wins: OpenAI's and vLLM's place
# (vLLM 0.32 with a reasoning parser, chat_completion/serving.py _make_completion_tokens_details), then
# SGLang's top-level field (entrypoints/openai/protocol.py UsageInfo.reasoning_tokens).
REASONING_TOKENS_PATHS = ("completion_tokens_details.reasoning_tokens", "reasoning_tokens")
# The prompt's tokens served from a prefix cache: vLLM with --enable-prompt-tokens-details, SGLang with
# --enable-cache-report (which leaves prompt_tokens_details out when nothing was cached).
CACHED_TOKENS_PATH = "prompt_tokens_details.cached_tokens"


@dataclass
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Usage":
        return cls(
            prompt_tokens=data.get("prompt_tokens"),
            completion_tokens=data.get("completion_tokens"),
            total_tokens=data.get("total_tokens"),
            raw=dict(data),
        )

    def detail(self, path: str) -> int | None:
        """The integer at a dotted path under usage (``prompt_tokens_details.cached_tokens``), else None."""
        node: Any = self.raw
        for name in path.split("."):
            if not isinstance(node, dict):
                return None
            node = node.get(name)
        return node if isinstance(node, int) and not isinstance(node, bool) else None

    def first_detail(self, paths: Iterable[str]) -> tuple[int, str] | None:
        """The first of ``paths`` the engine reported, with the path; None when it reported none."""
        for path in paths:
            value = self.detail(path)
            if value is not None:
                return value, path
        return None

    @property
    def cached_tokens(self) -> int | None:
        """``prompt_tokens_details.cached_tokens``, where the engine reports it."""
        return self.detail(CACHED_TOKENS_PATH)

    def inconsistencies(self) -> list[str]:
        """What is wrong with these counts, in words; empty when they add up."""
        problems = []
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                problems.append(f"usage.{name} is {value!r}, not a non-negative integer")
        if not problems and self.total_tokens != self.prompt_tokens + self.completion_tokens:
            problems.append(
                f"usage.total_tokens={self.total_tokens} but prompt_tokens + completion_tokens = "
                f"{self.prompt_tokens} + {self.completion_tokens} = {self.prompt_tokens + self.completion_tokens}"
            )
        return problems


@dataclass
class ToolCall:
    index: int
    id: str | None = None
    type: str | None = None
    name: str = ""
    arguments: str = ""

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; raises ValueError with the text when they are not."""
        try:
            return json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tool call {self.name!r} arguments are not JSON ({exc}): {self.arguments[:200]!r}") from exc


@dataclass
class Reply:
    """A reply as the application would see it, plus what the wire looked like."""

    streamed: bool
    content: str = ""
    reasoning: str = ""
    # Which reasoning field names the engine used (for the report; both accepted).
    reasoning_fields: list[str] = field(default_factory=list)
    role: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    response_id: str | None = None
    model: str | None = None
    # Stream-only facts.
    chunk_count: int = 0
    done_received: bool = False
    events_after_done: int = 0
    chunk_ids: set[str] = field(default_factory=set)
    chunk_objects: set[str] = field(default_factory=set)
    # Seconds since the request was sent, one per event with data.
    event_times: list[float] = field(default_factory=list)
    # Seconds since sent of each event carrying a choice (index 0), output or not:
    # what vLLM's benchmark times inter-token latency and E2E by.
    choice_times: list[float] = field(default_factory=list)
    first_output_time: float | None = None
    # A reasoning model's output in two parts: when the first reasoning text and the first content
    # text (chat delta.content, a completion's text) came, and how many events carried each, and any
    # output (tool calls too). Tool calls are neither reasoning nor content.
    first_reasoning_time: float | None = None
    first_content_time: float | None = None
    reasoning_events: int = 0
    content_events: int = 0
    output_events: int = 0
    problems: list[str] = field(default_factory=list)
    # The problems that mean part of the reply could not be read at all (an event
    # that is not JSON or not UTF-8, an error event, a chunk of the wrong shape):
    # whatever a check then finds in the reply may be missing pieces.
    unreadable: list[str] = field(default_factory=list)

    @property
    def finish_reason_is_valid(self) -> bool:
        return self.finish_reason in VALID_FINISH_REASONS

    def shape(self) -> dict[str, Any]:
        """What must agree between a streamed and a non-streamed reply to one request."""
        return {
            "role": self.role,
            "has_content": bool(self.content.strip()),
            "finish_reason": self.finish_reason,
            "tool_calls": sorted(call.name for call in self.tool_calls),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "streamed": self.streamed,
            "role": self.role,
            "content": self.content,
            "reasoning": self.reasoning,
            "reasoning_fields": self.reasoning_fields,
            "tool_calls": [vars(call) for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage.raw if self.usage else None,
            "chunk_count": self.chunk_count,
            "done_received": self.done_received,
            "first_output_time_s": self.first_output_time,
            "first_reasoning_time_s": self.first_reasoning_time,
            "first_content_time_s": self.first_content_time,
            "problems": self.problems,
        }


def reply_from_body(body: dict[str, Any]) -> Reply:
    """Reassemble a non-streamed ``chat.completion`` or ``text_completion`` body."""
    reply = Reply(streamed=False, response_id=body.get("id"), model=body.get("model"))
    choices = body.get("choices")
    shape = _body_shape_problem(choices)
    if shape is not None:
        reply.problems.append(shape)
        reply.unreadable.append(shape)
    else:
        assert isinstance(choices, list)
        choice = choices[0]
        message = choice.get("message")
        if isinstance(message, dict):
            reply.role = message.get("role")
            reply.content = message.get("content") or ""
            _take_reasoning(reply, message)
            for index, raw_call in enumerate(message.get("tool_calls") or []):
                function = raw_call.get("function") or {}
                reply.tool_calls.append(
                    ToolCall(
                        index=index,
                        id=raw_call.get("id"),
                        type=raw_call.get("type"),
                        name=function.get("name") or "",
                        arguments=function.get("arguments") or "",
                    )
                )
        elif "text" in choice:
            reply.content = choice.get("text") or ""
        else:
            reply.problems.append("first choice has neither message nor text")
        reply.finish_reason = choice.get("finish_reason")
    if isinstance(body.get("usage"), dict):
        reply.usage = Usage.from_dict(body["usage"])
    return reply


def reassemble_stream(events: Iterable[SSEEvent], *, sent_at: float | None = None) -> Reply:
    """Rebuild the reply from stream events (chat chunks or completion chunks)."""
    reply = Reply(streamed=True)
    calls: dict[int, ToolCall] = {}
    pieces = _Pieces()
    for event in events:
        if event.decode_error:
            _unreadable(reply, f"event is not valid UTF-8 ({event.decode_error})")
        if not event.has_data:
            continue
        if reply.done_received:
            reply.events_after_done += 1
            continue
        if event.is_done:
            reply.done_received = True
            continue
        relative = None
        if sent_at is not None and event.received_at is not None:
            relative = event.received_at - sent_at
            reply.event_times.append(relative)
        try:
            chunk = json.loads(event.data)
        except (ValueError, RecursionError) as exc:
            _unreadable(reply, f"event data is not JSON ({str(exc)[:100]}): {event.data[:200]!r}")
            continue
        if not isinstance(chunk, dict):
            _unreadable(reply, f"event data is not a JSON object: {event.data[:200]!r}")
            continue
        # Both error shapes: {"error": {...}} and the older flat {"object": "error", ...}.
        if "choices" not in chunk and ("error" in chunk or chunk.get("object") == "error"):
            error = chunk.get("error", chunk)
            _unreadable(reply, f"error event in stream: {json.dumps(error, ensure_ascii=False, default=str)[:300]}")
            continue
        shape = _chunk_shape_problem(chunk)
        if shape is not None:
            _unreadable(reply, f"{shape}: {event.data[:200]!r}")
            continue
        reply.chunk_count += 1
        if chunk.get("id"):
            reply.chunk_ids.add(str(chunk["id"]))
            reply.response_id = reply.response_id or str(chunk["id"])
        if chunk.get("object"):
            reply.chunk_objects.add(str(chunk["object"]))
        reply.model = reply.model or chunk.get("model")
        if isinstance(chunk.get("usage"), dict):
            # Engines may repeat usage (vLLM continuous_usage_stats); the last one is final.
            reply.usage = Usage.from_dict(chunk["usage"])
        carried = _Carried()
        had_choice = False
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            had_choice = True
            delta = choice.get("delta")
            if isinstance(delta, dict):
                carried.add(_apply_delta(reply, delta, calls, pieces))
            elif "text" in choice:
                text = choice.get("text") or ""
                pieces.content.append(text)
                carried.content |= bool(text)
            if choice.get("finish_reason") is not None:
                if reply.finish_reason is not None and reply.finish_reason != choice["finish_reason"]:
                    reply.problems.append(
                        f"finish_reason changed from {reply.finish_reason!r} to {choice['finish_reason']!r}"
                    )
                reply.finish_reason = choice["finish_reason"]
        if had_choice and relative is not None:
            reply.choice_times.append(relative)
        _count_output(reply, carried, relative)
    reply.content = "".join(pieces.content)
    reply.reasoning = "".join(pieces.reasoning)
    for index, parts in pieces.arguments.items():
        calls[index].arguments = "".join(parts)
    # An explicit null index sorts first instead of failing to compare with integers.
    reply.tool_calls = [calls[index] for index in sorted(calls, key=lambda i: -1 if i is None else i)]
    if not reply.done_received:
        reply.problems.append("stream ended without data: [DONE]")
    if reply.events_after_done:
        reply.problems.append(f"{reply.events_after_done} event(s) after data: [DONE]")
    if len(reply.chunk_ids) > 1:
        reply.problems.append(f"chunks carry {len(reply.chunk_ids)} different ids")
    if reply.finish_reason is None:
        reply.problems.append("no chunk carried a finish_reason")
    return reply


def _unreadable(reply: Reply, problem: str) -> None:
    reply.problems.append(problem)
    reply.unreadable.append(problem)


def _text_problem(where: str, part: dict[str, Any], names: Iterable[str]) -> str | None:
    for name in names:
        if part.get(name) is not None and not isinstance(part[name], str):
            return f"{where}.{name} is {type(part[name]).__name__}, not a string"
    return None


def _call_problem(where: str, calls: Any) -> str | None:
    """What is wrong with a tool_calls list's shape; None when every call can be read."""
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"{where}.tool_calls is {type(calls).__name__}, not a list"
    for number, call in enumerate(calls):
        if not isinstance(call, dict):
            return f"{where}.tool_calls[{number}] is {type(call).__name__}, not an object"
        index = call.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            return f"{where}.tool_calls[{number}].index is {index!r}, not an integer"
        function = call.get("function")
        if function is not None and not isinstance(function, dict):
            return f"{where}.tool_calls[{number}].function is {type(function).__name__}, not an object"
        problem = _text_problem(f"{where}.tool_calls[{number}]", call, ("id", "type")) or \
            _text_problem(f"{where}.tool_calls[{number}].function", function or {}, ("name", "arguments"))
        if problem:
            return problem
    return None


def _body_shape_problem(choices: Any) -> str | None:
    """Whether a non-streamed body's first choice can be read; None when it can."""
    if not isinstance(choices, list) or not choices:
        return f"response has no choices: {str(choices)[:300]}"
    choice = choices[0]
    if not isinstance(choice, dict):
        return f"choices[0] is {type(choice).__name__}, not an object"
    message = choice.get("message")
    if message is not None and not isinstance(message, dict):
        return f"choices[0].message is {type(message).__name__}, not an object"
    return (_text_problem("choices[0]", choice, ("text", "finish_reason"))
            or _text_problem("choices[0].message", message or {}, ("role", "content", *REASONING_FIELDS))
            or _call_problem("choices[0].message", (message or {}).get("tool_calls")))


def _chunk_shape_problem(chunk: dict[str, Any]) -> str | None:
    """Whether every part of a stream chunk the reassembly reads has the type it must have."""
    choices = chunk.get("choices")
    if choices is None:
        return None
    if not isinstance(choices, list):
        return f"choices is {type(choices).__name__}, not a list"
    for number, choice in enumerate(choices):
        where = f"choices[{number}]"
        if not isinstance(choice, dict):
            return f"{where} is {type(choice).__name__}, not an object"
        index = choice.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            return f"{where}.index is {index!r}, not an integer"
        delta = choice.get("delta")
        problem = _text_problem(where, choice, ("text", "finish_reason"))
        if problem is None and isinstance(delta, dict):
            problem = (_text_problem(f"{where}.delta", delta, ("role", "content", *REASONING_FIELDS))
                       or _call_problem(f"{where}.delta", delta.get("tool_calls")))
        if problem:
            return problem
    return None


@dataclass
class _Pieces:
    """Streamed text gathered as pieces and joined once: appending to a string field
    copies it each time, quadratic on a long (or hostile, endless) stream."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    arguments: dict[Any, list[str]] = field(default_factory=dict)


@dataclass
class _Carried:
    """What one event's choice carried: content text, reasoning text, a tool call's fragment."""

    content: bool = False
    reasoning: bool = False
    tool_call: bool = False

    def add(self, other: "_Carried") -> None:
        self.content |= other.content
        self.reasoning |= other.reasoning
        self.tool_call |= other.tool_call

    @property
    def output(self) -> bool:
        return self.content or self.reasoning or self.tool_call


def _count_output(reply: Reply, carried: _Carried, relative: float | None) -> None:
    """Count an event's output by kind, and stamp the first of each kind (TTFT is the first of any)."""
    if carried.output:
        reply.output_events += 1
        if reply.first_output_time is None:
            reply.first_output_time = relative
    if carried.reasoning:
        reply.reasoning_events += 1
        if reply.first_reasoning_time is None:
            reply.first_reasoning_time = relative
    if carried.content:
        reply.content_events += 1
        if reply.first_content_time is None:
            reply.first_content_time = relative


def _apply_delta(reply: Reply, delta: dict[str, Any], calls: dict[int, ToolCall], pieces: _Pieces) -> _Carried:
    """Fold one delta into the reply; what output it carried (content, reasoning, a tool call)."""
    carried = _Carried()
    if delta.get("role"):
        reply.role = delta["role"]
    text = delta.get("content")
    if text:
        pieces.content.append(text)
        carried.content = True
    carried.reasoning = _take_reasoning(reply, delta, pieces.reasoning)
    for raw_call in delta.get("tool_calls") or []:
        index = raw_call.get("index", len(calls))
        call = calls.setdefault(index, ToolCall(index=index))
        call.id = call.id or raw_call.get("id")
        call.type = call.type or raw_call.get("type")
        function = raw_call.get("function") or {}
        # Names arrive whole in the first fragment on vLLM and SGLang; append anyway so
        # an engine that splits them still reassembles.
        call.name += function.get("name") or ""
        pieces.arguments.setdefault(index, []).append(function.get("arguments") or "")
        carried.tool_call = True
    return carried


def _take_reasoning(reply: Reply, part: dict[str, Any], sink: list[str] | None = None) -> bool:
    taken = False
    for name in REASONING_FIELDS:
        value = part.get(name)
        if value:
            if sink is not None:
                sink.append(value)
            else:
                reply.reasoning += value
            if name not in reply.reasoning_fields:
                reply.reasoning_fields.append(name)
            taken = True
            # An engine that fills both with the same text must not be counted twice.
            break
    return taken
