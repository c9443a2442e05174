"""Response bodies as the imitated engine writes them (JSON-ready dicts).

Shapes follow vLLM's `ChatCompletionResponse`, `ChatCompletionStreamResponse`,
`CompletionResponse` and `TokenizeResponse`; SGLang's differences (reasoning field
name, explicit nulls in deltas, `usage: null` in chunks, null `tool_calls`) come
from the `Convention`, never from a check of the engine's name.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from .conventions import Convention
from .generation import Generation

__all__ = [
    "chat_chunk",
    "chat_completion_body",
    "chat_delta",
    "completion_body",
    "completion_chunk",
    "model_list_body",
    "new_request_id",
    "usage_body",
    "usage_chunk",
]


def new_request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage_body(prompt_tokens: int, completion_tokens: int, *, cached_tokens: int | None = None,
               reasoning_tokens: int | None = None) -> dict[str, Any]:
    """A usage object; `cached_tokens` (a prefix cache's hits) and `reasoning_tokens` in their details
    when the engine reports them (vLLM: --enable-prompt-tokens-details, and a reasoning parser)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None if cached_tokens is None else {"cached_tokens": cached_tokens},
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def _empty_tool_calls(convention: Convention) -> list[Any] | None:
    # Copy: the convention's value is shared and must never be mutated.
    return None if convention.empty_tool_calls is None else list(convention.empty_tool_calls)


def _chat_message(convention: Convention, generation: Generation) -> dict[str, Any]:
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in generation.tool_calls
    ]
    return {
        "role": "assistant",
        # Both engines send null content next to tool calls when the model wrote no text.
        "content": None if calls and not generation.content else generation.content,
        convention.reasoning_field: generation.reasoning,
        "tool_calls": calls or _empty_tool_calls(convention),
    }


def chat_completion_body(
    *,
    convention: Convention,
    request_id: str,
    created: int,
    model: str,
    generations: Sequence[Generation],
    usage: dict[str, Any],
    logprobs: Sequence[list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """A chat completion with one choice per generation (``n``), indexed in order.

    `logprobs`: each choice's token entries, when the request asked for them.
    """
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": index,
                "message": _chat_message(convention, generation),
                "logprobs": None if logprobs is None else {"content": logprobs[index]},
                "finish_reason": generation.finish_reason,
                "stop_reason": None,
            }
            for index, generation in enumerate(generations)
        ],
        "usage": usage,
    }


def chat_delta(
    convention: Convention,
    *,
    role: str | None = None,
    content: str | None = None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    """A stream delta; vLLM drops unset fields, SGLang writes them as null."""
    delta = {
        "role": role,
        "content": content,
        convention.reasoning_field: reasoning,
        "tool_calls": None,
    }
    if convention.delta_explicit_nulls:
        return delta
    return {key: value for key, value in delta.items() if value is not None}


def chat_chunk(
    *,
    convention: Convention,
    request_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    index: int = 0,
    logprobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [
            {"index": index, "delta": delta, "logprobs": None if logprobs is None else {"content": logprobs},
             "finish_reason": finish_reason}
        ],
    }
    if convention.chunk_usage_null:
        chunk["usage"] = None
    return chunk


def usage_chunk(
    *, object_name: str, request_id: str, created: int, model: str, usage: dict[str, Any]
) -> dict[str, Any]:
    """The last chunk when `stream_options.include_usage` is set: no choices."""
    return {
        "id": request_id,
        "object": object_name,
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }


def completion_body(
    *,
    request_id: str,
    created: int,
    model: str,
    generations: list[Generation],
    usage: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": index,
                "text": generation.content,
                "logprobs": None,
                "finish_reason": generation.finish_reason,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            for index, generation in enumerate(generations)
        ],
        "usage": usage,
    }


def completion_chunk(
    *,
    convention: Convention,
    request_id: str,
    created: int,
    model: str,
    index: int,
    text: str,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": index,
                "text": text,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
        ],
    }
    if convention.chunk_usage_null:
        chunk["usage"] = None
    return chunk


def model_list_body(
    *, convention: Convention, model: str, created: int, max_model_len: int
) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": model,
                "object": "model",
                "created": created,
                "owned_by": convention.owned_by,
                "root": model,
                "parent": None,
                "max_model_len": max_model_len,
            }
        ],
    }
