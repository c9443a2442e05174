"""Reading the API contract out of a reply: error bodies, JSON content, and the choices of ``n``.

The checks of issue 15 (``tests/test_structured_outputs.py``, ``test_error_codes.py``,
``test_sampling.py``) ask three things the reassembled :class:`Reply` does not answer: whether a
refusal's body has the engine's error shape, whether content is JSON that fits a schema, and
what every choice of an ``n > 1`` request said (a ``Reply`` is choice 0). Plain functions, tested
without an engine in ``selftest/wire/test_contract.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from engine_acceptance.wire.client import Exchange
from engine_acceptance.wire.sse import SSEEvent

__all__ = ["ERROR_SHAPES", "Choice", "choices_of", "error_body_of", "error_shape_problem", "json_problems"]

# What a refusal's body looks like, by engine profile's `features.error_shape`.
ERROR_SHAPES = {
    "nested": 'an OpenAI error object {"error": {"message": ..., "type": ...}}',
    "flat": 'a flat error object {"object": "error", "message": ..., "type": ...}',
}


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def error_body_of(exchange: Exchange) -> Any:
    """The refusal's body as the engine sent it: JSON when it parses, else its text.

    Not ``exchange.body``: for an OpenAI-shaped body the SDK keeps only the inner error
    object, and the shape is what is checked here.
    """
    text = exchange.raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def error_shape_problem(body: Any, shape: str) -> str | None:
    """Why `body` is not a refusal of the `shape` the engine profile names; None when it is."""
    if shape not in ERROR_SHAPES:
        raise ValueError(f"unknown error shape {shape!r}; known: {', '.join(ERROR_SHAPES)}")
    if not isinstance(body, dict):
        return f"the body is not a JSON object but {_short(body)!r}, where {ERROR_SHAPES[shape]} was expected"
    if shape == "nested":
        error = body.get("error")
        fields = error if isinstance(error, dict) else None
    else:
        fields = body if body.get("object") == "error" else None
    if fields is None:
        return f"the body {_short(body)} is not {ERROR_SHAPES[shape]}"
    missing = [key for key in ("message", "type") if not isinstance(fields.get(key), str)]
    if missing:
        return f"the error object lacks a string {' and '.join(missing)}: {_short(body)}"
    return None


def json_problems(content: str, schema: Mapping[str, Any] | None) -> list[str]:
    """What keeps `content` from being one JSON object (valid against `schema` when given); empty when it is."""
    try:
        parsed = json.loads(content)
    except ValueError as exc:
        return [f"the content is not JSON ({exc}): {_short(content, 200)!r}"]
    if schema is None:
        return [] if isinstance(parsed, dict) else [f"the content is JSON but not an object: {_short(parsed, 200)}"]
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top level)'}: {error.message}"
            for error in sorted(validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))]


@dataclass
class Choice:
    """One choice of a reply: its index, its content and its finish reason."""

    index: Any
    content: str = ""
    finish_reason: str | None = None


def _from_body(body: Any) -> list[Choice]:
    choices = body.get("choices") if isinstance(body, dict) else None
    found = []
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        content = message.get("content")
        found.append(Choice(choice.get("index"), content if isinstance(content, str) else "",
                            choice.get("finish_reason")))
    return found


def _from_events(events: Iterable[SSEEvent]) -> list[Choice]:
    by_index: dict[Any, Choice] = {}
    for event in events:
        if not event.has_data or event.is_done:
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            continue  # the reassembly names a broken event; this only counts choices
        for choice in (chunk.get("choices") if isinstance(chunk, dict) else None) or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index")
            entry = by_index.setdefault(index, Choice(index))
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str):
                entry.content += delta["content"]
            if choice.get("finish_reason") is not None:
                entry.finish_reason = choice["finish_reason"]
    return list(by_index.values())


def choices_of(exchange: Exchange) -> list[Choice]:
    """Every choice of a chat reply, in the order the engine first sent each; streamed or not."""
    return _from_events(exchange.events) if exchange.stream else _from_body(exchange.body)
