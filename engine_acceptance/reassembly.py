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

from engine_acceptance.sse import SSEEvent

__all__ = [
    "REASONING_FIELDS",
    "Reply",
    "ToolCall",
    "Usage",
    "reassemble_stream",
    "reply_from_body",
]

# SGLang and older vLLM say reasoning_content; newer vLLM says reasoning.
REASONING_FIELDS = ("reasoning_content", "reasoning")
VALID_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "abort"})


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
    first_output_time: float | None = None
    problems: list[str] = field(default_factory=list)

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
            "problems": self.problems,
        }


def reply_from_body(body: dict[str, Any]) -> Reply:
    """Reassemble a non-streamed ``chat.completion`` or ``text_completion`` body."""
    reply = Reply(streamed=False, response_id=body.get("id"), model=body.get("model"))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        reply.problems.append(f"response has no choices: {str(body)[:300]}")
    else:
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
    for event in events:
        if event.decode_error:
            reply.problems.append(f"event is not valid UTF-8 ({event.decode_error})")
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
        except json.JSONDecodeError as exc:
            reply.problems.append(f"event data is not JSON ({exc}): {event.data[:200]!r}")
            continue
        if not isinstance(chunk, dict):
            reply.problems.append(f"event data is not a JSON object: {event.data[:200]!r}")
            continue
        if "error" in chunk and "choices" not in chunk:
            reply.problems.append(f"error event in stream: {json.dumps(chunk['error'])[:300]}")
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
        had_output = False
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                had_output |= _apply_delta(reply, delta, calls)
            elif "text" in choice:
                text = choice.get("text") or ""
                reply.content += text
                had_output |= bool(text)
            if choice.get("finish_reason") is not None:
                if reply.finish_reason is not None and reply.finish_reason != choice["finish_reason"]:
                    reply.problems.append(
                        f"finish_reason changed from {reply.finish_reason!r} to {choice['finish_reason']!r}"
                    )
                reply.finish_reason = choice["finish_reason"]
        if had_output and reply.first_output_time is None:
            reply.first_output_time = relative
    reply.tool_calls = [calls[index] for index in sorted(calls)]
    if not reply.done_received:
        reply.problems.append("stream ended without data: [DONE]")
    if reply.events_after_done:
        reply.problems.append(f"{reply.events_after_done} event(s) after data: [DONE]")
    if len(reply.chunk_ids) > 1:
        reply.problems.append(f"chunks carry {len(reply.chunk_ids)} different ids")
    if reply.finish_reason is None:
        reply.problems.append("no chunk carried a finish_reason")
    return reply


def _apply_delta(reply: Reply, delta: dict[str, Any], calls: dict[int, ToolCall]) -> bool:
    """Fold one delta into the reply; True when it carried output (text, reasoning or a call)."""
    had_output = False
    if delta.get("role"):
        reply.role = delta["role"]
    text = delta.get("content")
    if text:
        reply.content += text
        had_output = True
    had_output |= _take_reasoning(reply, delta)
    for raw_call in delta.get("tool_calls") or []:
        index = raw_call.get("index", len(calls))
        call = calls.setdefault(index, ToolCall(index=index))
        call.id = call.id or raw_call.get("id")
        call.type = call.type or raw_call.get("type")
        function = raw_call.get("function") or {}
        # Names arrive whole in the first fragment on vLLM and SGLang; append anyway so
        # an engine that splits them still reassembles.
        call.name += function.get("name") or ""
        call.arguments += function.get("arguments") or ""
        had_output = True
    return had_output


def _take_reasoning(reply: Reply, part: dict[str, Any]) -> bool:
    taken = False
    for name in REASONING_FIELDS:
        value = part.get(name)
        if value:
            reply.reasoning += value
            if name not in reply.reasoning_fields:
                reply.reasoning_fields.append(name)
            taken = True
            # An engine that fills both with the same text must not be counted twice.
            break
    return taken
