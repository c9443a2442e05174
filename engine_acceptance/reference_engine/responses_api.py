"""The Responses API (``POST /v1/responses``) of the reference engine, as vLLM and SGLang serve it.

Both engines build it on their chat path (vLLM ``entrypoints/openai/responses/serving.py``,
SGLang ``entrypoints/openai/serving_responses.py``): the request's ``input`` items become a
conversation (a ``function_call`` item an assistant tool call, a ``function_call_output`` a
tool message with the same ``call_id``), the model answers it through the chat template and
parsers, and the answer comes back as output items: a ``reasoning`` item, a ``message`` item
with ``output_text`` content, ``function_call`` items. So does this module: it turns the
request into a chat request, lets the engine's chat path answer it, and renders the answer.

What is imitated of vLLM: a reply cut at ``max_output_tokens`` has status ``incomplete`` with
``incomplete_details.reason`` ``max_output_tokens``; streamed, the events are
``response.created``, ``response.in_progress``, per item ``output_item.added``, its content
part, deltas, ``.done`` events and ``output_item.done``, then ``response.completed`` (even
for an incomplete response: vLLM never sends ``response.incomplete``), each as
``event: <type>`` + ``data: <json>`` with a ``sequence_number`` counting from 0, and no
``[DONE]``. ``store`` is ignored (vLLM's default), so ``previous_response_id`` is not served.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiohttp import web

from .config import ReferenceEngineConfig
from .defects import DefectHooks
from .generation import Generation, split_pieces
from .protocol import ChatRequest, RequestError
from .stream import BatchLoad, ClientGone, EventStream, Pacer, dump_json
from .tokenizer import ReferenceTokenizer

T = TypeVar("T")


class ChatPath(Protocol):
    """What a response is built on: the engine's chat path and state (``server.ReferenceEngine`` is one).

    Named here rather than imported from the server, which imports this module to route
    ``POST /v1/responses``: the server hands itself in, and this module needs no more of it.
    """

    config: ReferenceEngineConfig
    hooks: DefectHooks
    tokenizer: ReferenceTokenizer
    load: BatchLoad

    async def read_json(self, request: web.Request) -> tuple[dict[str, Any], bool]: ...

    def prepare_chat(self, body: dict[str, Any]) -> tuple[ChatRequest, int, list[Generation]]: ...

    async def run(self, big: bool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

__all__ = ["PATH", "ResponseIds", "chat_body", "create_response", "output_items", "response_object",
           "stream_events", "usage_object"]

PATH = "/v1/responses"
# Chat request fields a Responses request carries under the same name.
_SAME_FIELDS = ("model", "temperature", "top_p", "parallel_tool_calls")


def _hex() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class ResponseIds:
    """The ids of one response and of its output items."""

    response: str
    reasoning: str
    message: str
    # (item id, call_id) per function call, in order.
    calls: tuple[tuple[str, str], ...]

    @classmethod
    def new(cls, calls: int) -> "ResponseIds":
        return cls(f"resp_{_hex()}", f"rs_{_hex()}", f"msg_{_hex()}",
                   tuple((f"fc_{_hex()}", f"call_{_hex()}") for _ in range(calls)))


# --- request: Responses -> chat -------------------------------------------------------------

def _text_of(content: Any, where: str) -> str:
    """A message item's content as text: a string, or its input_text/output_text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or a list of content parts", param="input")
    texts = []
    for number, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text") \
                or not isinstance(part.get("text"), str):
            raise RequestError(f"{where}.content[{number}] must be an input_text part with a text", param="input")
        texts.append(part["text"])
    return "".join(texts)


def _input_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation the request's ``instructions`` and ``input`` items make."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise RequestError("'instructions' must be a string", param="instructions")
        messages.append({"role": "system", "content": instructions})
    raw = body.get("input")
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise RequestError("'input' must be a string or a non-empty list of items", param="input")
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise RequestError(f"{where} must be an object", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise RequestError(f"{where}.role must be user, assistant, system or developer", param="input")
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _text_of(item.get("content"), where)})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if not all(isinstance(value, str) and value for value in (item.get("call_id"), item.get("name"))) \
                    or not isinstance(item.get("arguments"), str):
                raise RequestError(f"{where}: a function_call needs a call_id, a name and arguments (a string)",
                                   param="input")
            previous = messages[-1] if messages else None
            # Parallel calls are one assistant turn, as the chat template expects them.
            if previous is not None and previous["role"] == "assistant" and previous.get("tool_calls"):
                previous["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(item.get("call_id"), str) or not item["call_id"]:
                raise RequestError(f"{where}: a function_call_output needs the call_id of its call", param="input")
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)})
        elif kind == "reasoning":
            # Earlier reasoning is not shown to the model again (chat templates drop it too).
            continue
        else:
            raise RequestError(f"{where}: input item type {kind!r} is not supported", param="input")
    return messages


def _chat_tools(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's function tools and tool_choice in the chat API's shape."""
    fields: dict[str, Any] = {}
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise RequestError("'tools' must be a list", param="tools")
        converted = []
        for index, tool in enumerate(tools):
            if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
                raise RequestError(f"tools[{index}] must be {{'type': 'function', 'name': ...}}: built-in tools "
                                   "need a tool server", param="tools")
            converted.append({"type": "function", "function": {
                key: tool[key] for key in ("name", "description", "parameters") if tool.get(key) is not None}})
        if converted:
            fields["tools"] = converted
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        fields["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif choice is not None and (choice != "auto" or "tools" in fields):
        fields["tool_choice"] = choice
    return fields


def chat_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat completion request that answers the Responses request `body`."""
    chat: dict[str, Any] = {"messages": _input_messages(body)}
    chat.update({key: body[key] for key in _SAME_FIELDS if key in body})
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    chat.update(_chat_tools(body))
    return chat


# --- answer: output items, usage, the response object -----------------------------------------

def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" \
        else []
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
    return {"id": item_id, "type": "reasoning", "summary": [], "content": content, "status": status}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
            "arguments": arguments if status == "completed" else "", "status": status}


def output_items(generation: Generation, ids: ResponseIds) -> list[dict[str, Any]]:
    """The response's output: reasoning, then the message (unless only calls were made), then the calls."""
    items: list[dict[str, Any]] = []
    if generation.reasoning:
        items.append(_reasoning_item(ids.reasoning, generation.reasoning))
    if generation.content or not generation.tool_calls:
        items.append(_message_item(ids.message, generation.content))
    for call, (item_id, call_id) in zip(generation.tool_calls, ids.calls):
        items.append(_call_item(item_id, call_id, call.name, call.arguments))
    return items


def usage_object(input_tokens: int, output_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens}


def response_object(body: Mapping[str, Any], *, ids: ResponseIds, model: str, created: int, status: str,
                    output: list[dict[str, Any]], usage: dict[str, Any] | None,
                    max_output_tokens: int) -> dict[str, Any]:
    """vLLM's ResponsesResponse (``from_request``): the request's settings, the output, the usage."""
    return {
        "id": ids.response, "object": "response", "created_at": created, "model": model, "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"), "metadata": body.get("metadata"), "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0),
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
        "background": False, "max_output_tokens": max_output_tokens, "previous_response_id": None,
        "reasoning": body.get("reasoning"), "service_tier": "auto", "text": body.get("text"),
        "truncation": "disabled", "usage": usage, "user": None,
    }


# --- streaming --------------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamEvent:
    """One event to send, and how many output tokens exist when it goes out."""

    event: dict[str, Any]
    tokens: int


def _item_events(item: dict[str, Any], output_index: int, tokens_per_piece: int,
                 produced: int) -> tuple[list[StreamEvent], int]:
    """The events of one output item: added, its content part, deltas, done events; and the tokens after it."""
    kind, item_id = item["type"], item["id"]
    at = {"item_id": item_id, "output_index": output_index}
    events: list[StreamEvent] = []

    def add(event: dict[str, Any]) -> None:
        events.append(StreamEvent(event, produced))

    if kind == "function_call":
        add({"type": "response.output_item.added", "output_index": output_index,
             "item": _call_item(item_id, item["call_id"], item["name"], "", "in_progress")})
        for piece in split_pieces(item["arguments"], kind="tool_call", tokens_per_piece=tokens_per_piece):
            produced += piece.tokens
            add({"type": "response.function_call_arguments.delta", **at, "delta": piece.text})
        add({"type": "response.function_call_arguments.done", **at, "name": item["name"],
             "arguments": item["arguments"]})
    else:
        reasoning = kind == "reasoning"
        text = item["content"][0]["text"] if item["content"] else ""
        part_type, delta_type = ("reasoning_text", "response.reasoning_text") if reasoning else \
            ("output_text", "response.output_text")
        empty = _reasoning_item(item_id, "", "in_progress") if reasoning else \
            _message_item(item_id, "", "in_progress")
        part = {"type": part_type, "text": ""} if reasoning else \
            {"type": part_type, "text": "", "annotations": [], "logprobs": []}
        add({"type": "response.output_item.added", "output_index": output_index, "item": empty})
        add({"type": "response.content_part.added", **at, "content_index": 0, "part": part})
        for piece in split_pieces(text, kind="content", tokens_per_piece=tokens_per_piece):
            produced += piece.tokens
            delta = {"type": f"{delta_type}.delta", **at, "content_index": 0, "delta": piece.text}
            add(delta if reasoning else {**delta, "logprobs": []})
        done = {"type": f"{delta_type}.done", **at, "content_index": 0, "text": text}
        add(done if reasoning else {**done, "logprobs": []})
        add({"type": "response.content_part.done", **at, "content_index": 0, "part": {**part, "text": text}})
    add({"type": "response.output_item.done", "output_index": output_index, "item": item})
    return events, produced


def stream_events(items: Sequence[dict[str, Any]], *, initial: dict[str, Any],
                  tokens_per_piece: int) -> list[StreamEvent]:
    """Every event of a streamed response but the final ``response.completed``, without sequence numbers."""
    events = [StreamEvent({"type": "response.created", "response": initial}, 0),
              StreamEvent({"type": "response.in_progress", "response": initial}, 0)]
    produced = 0
    for index, item in enumerate(items):
        item_events, produced = _item_events(item, index, tokens_per_piece, produced)
        events += item_events
    return events


# --- the handler ------------------------------------------------------------------------------

async def create_response(engine: ChatPath, request: web.Request, arrived_at: float | None
                          ) -> web.StreamResponse:
    """``POST /v1/responses``: answered through the engine's chat path, rendered as a response."""
    body, big = await engine.read_json(request)
    stream = body.get("stream") is True
    req, prompt_tokens, generations = await engine.run(big, engine.prepare_chat, chat_body(body))
    generation = generations[0]
    hooks = engine.hooks
    ids = ResponseIds.new(len(generation.tool_calls))
    status = "incomplete" if generation.finish_reason == "length" else "completed"
    reasoning_tokens = min(engine.tokenizer.count(generation.reasoning or ""), generation.completion_tokens)
    usage = hooks.responses_usage(usage_object(prompt_tokens, generation.completion_tokens, reasoning_tokens))
    items = hooks.responses_items(output_items(generation, ids))
    max_output_tokens = req.max_tokens or engine.config.max_model_len - prompt_tokens
    created = int(time.time())

    def response(output: list[dict[str, Any]], state: str, used: dict[str, Any] | None) -> dict[str, Any]:
        return response_object(body, ids=ids, model=req.model, created=created, status=state, output=output,
                               usage=used, max_output_tokens=max_output_tokens)

    pacer = Pacer(engine.config.latency, prompt_tokens, engine.load, arrived_at)
    if not stream:
        await pacer.reach(generation.completion_tokens)
        return web.json_response(response(items, status, usage), dumps=dump_json)
    events = stream_events(items, initial=response([], "in_progress", None),
                           tokens_per_piece=engine.config.stream_chunk_tokens)
    final = hooks.responses_final_output(items, [e.event for e in events])
    events = hooks.responses_stream_events(events)
    events.append(StreamEvent({"type": "response.completed", "response": response(final, status, usage)},
                              generation.completion_tokens))
    out = await EventStream.open(request, stamp=engine.config.stamp_events)
    try:
        for number, planned in enumerate(events):
            await pacer.reach(planned.tokens)
            # vLLM numbers every event from 0, in the order sent.
            await out.send_named(planned.event["type"], {**planned.event, "sequence_number": number})
        await out.finish(send_done=False)
    except ClientGone:
        pass
    return out.response
