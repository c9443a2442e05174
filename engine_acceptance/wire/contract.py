"""Reading the API contract out of a reply: error bodies, JSON content, and the choices of ``n``.

The checks of issue 15 (``tests/test_structured_outputs.py``, ``test_error_codes.py``,
``test_sampling.py``) ask three things the reassembled :class:`Reply` does not answer: whether a
refusal's body has the engine's error shape (and what its message says, and whether an answer to
client data is a proper refusal at all), whether content is JSON that fits a schema,
what every choice of an ``n > 1`` request said (a ``Reply`` is choice 0), and the token
log-probabilities of each choice with their shape. Plain functions, tested
without an engine in ``selftest/wire/test_contract.py``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.sse import SSEEvent
from engine_acceptance.wire.stream_contract import chunks_of

__all__ = ["ERROR_SHAPES", "Choice", "choices_of", "error_body_of", "error_message", "error_shape_problem",
           "json_problems", "json_object_prefix_problem", "logprob_problems", "logprobs_of", "refusal_problem"]

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


def error_message(body: Any) -> str | None:
    """The message of an error body: OpenAI/vLLM ``{"error": {"message"}}``, SGLang's flat
    ``{"object": "error", "message"}``, or ``{"error": "text"}``; None when there is none."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"].strip():
        return error["message"]
    if isinstance(error, str) and error.strip():
        return error
    message = body.get("message") or body.get("detail")
    if isinstance(message, str) and message.strip():
        return message
    return None


def refusal_problem(exchange: Exchange) -> str | None:
    """Why `exchange` is not a proper refusal of client data (a 4xx with an error body); None if it is."""
    if exchange.error_kind == "timeout":
        return f"no answer within the idle timeout: the engine hangs on it ({exchange.error})"
    if exchange.error_kind == "connection":
        return f"the connection failed, the engine may have crashed ({exchange.error})"
    if exchange.error_kind is not None or exchange.status is None:
        return f"no usable answer: {exchange.describe_failure()}"
    status, body = exchange.status, exchange.body
    if status >= 500:
        return f"server error on client data: HTTP {status}, {_short_body(body)}"
    if 200 <= status < 300:
        if exchange.reply is None:
            return f"the engine accepted it: HTTP {status}, {_short_body(body)}"
        reasoning = exchange.reply.reasoning or ""
        return (f"the engine accepted it: HTTP {status}, content {exchange.reply.content[:200]!r}"
                + (f", reasoning {reasoning[:120]!r}" if reasoning else ""))
    if not 400 <= status < 500:
        return f"HTTP {status} is not a 4xx refusal: {_short_body(body)}"
    if error_message(body) is None:
        return f"HTTP {status} but no error body with a message: {_short_body(body)}"
    return None


def _short_body(body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    return f"body {text[:300]}" + ("…" if len(text) > 300 else "")


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


# What may follow the cut text to end the value it was in: nothing, a value after a key's colon,
# a colon and a value after a key, or the rest of a literal or a number.
_VALUE_ENDINGS = ("", "null", ":null", "0", "e", "ue", "rue", "se", "lse", "alse", "l", "ll", "ull")


def json_object_prefix_problem(content: str) -> str | None:
    """Why `content` cannot be the start of one JSON object; None when some continuation makes it one.

    For a reply cut at max_tokens: an engine that keeps to response_format json_object writes
    JSON from the first character, so what it wrote before the cut must still begin an object.
    Its strings, arrays and objects are closed, and the value it was writing ended by one of a
    few endings, until one of them parses as an object.
    """
    text = content.strip()
    if not text.startswith("{"):
        return f"the content does not begin a JSON object: {_short(content, 200)!r}"
    closers: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]":
            if not closers or closers.pop() != char:
                return f"the content closes a bracket it did not open: {_short(content, 200)!r}"
            if not closers:
                break
    if in_string:
        # End the string where it was cut, without half an escape.
        text = re.sub(r"\\(u[0-9a-fA-F]{0,3})?$", "", text) + '"'
    closing = "".join(reversed(closers))
    for body in (text, text.rstrip().removesuffix(",")):
        for ending in _VALUE_ENDINGS:
            try:
                parsed = json.loads(body + ending + closing)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return None
    return f"the content is not the start of a JSON object: {_short(content, 200)!r}"


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


def _streamed_choices(events: Iterable[SSEEvent]) -> Iterator[Mapping[str, Any]]:
    """Every choice object of every chunk before ``[DONE]``, in order (the reassembly names broken events)."""
    for chunk in chunks_of(events):
        yield from chunk.choices


def _from_events(events: Iterable[SSEEvent]) -> list[Choice]:
    by_index: dict[Any, Choice] = {}
    for choice in _streamed_choices(events):
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


def logprobs_of(exchange: Exchange) -> dict[Any, list[Any]]:
    """Each choice's ``logprobs.content`` entries by index; streamed, the deltas' entries in order.

    A choice that carries no ``logprobs.content`` at all is absent from the result.
    """
    found: dict[Any, list[Any]] = {}

    def add(choice: Any) -> None:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            found.setdefault(choice.get("index"), []).extend(content)

    if not exchange.stream:
        body = exchange.body
        for choice in (body.get("choices") if isinstance(body, dict) else None) or []:
            add(choice)
        return found
    for choice in _streamed_choices(exchange.events):
        add(choice)
    return found


def _is_logprob(value: Any) -> bool:
    # A log-probability is a finite number not above 0 (a rounding hair above is still 0).
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value <= 1e-6)


def logprob_problems(entries: list[Any], top: int) -> list[str]:
    """What keeps `entries` from the documented shape with `top` alternatives each; empty when none.

    Each entry is ``{"token": str, "logprob": <= 0, "bytes": [int] | null, "top_logprobs": [...]}`` and
    its ``top_logprobs`` has `top` entries of the same kind, none repeated: two different tokens may
    decode to the same text (byte tokens of one character), so a repeat is the same token *and*
    log-probability twice.
    """
    problems: list[str] = []
    for position, entry in enumerate(entries):
        where = f"entry {position}"
        if not isinstance(entry, dict):
            problems.append(f"{where} is not an object: {_short(entry, 120)}")
            continue
        if not isinstance(entry.get("token"), str) or not _is_logprob(entry.get("logprob")):
            problems.append(f"{where} lacks a string token or a logprob <= 0: {_short(entry, 160)}")
        alternatives = entry.get("top_logprobs")
        if not isinstance(alternatives, list) or len(alternatives) != top:
            count = len(alternatives) if isinstance(alternatives, list) else _short(alternatives, 60)
            problems.append(f"{where} has {count} top_logprobs, {top} were asked")
            continue
        pairs = [(alt.get("token"), alt.get("logprob")) for alt in alternatives if isinstance(alt, dict)]
        if len(pairs) != top or not all(isinstance(token, str) and _is_logprob(lp) for token, lp in pairs):
            problems.append(f"{where}: a top_logprobs item lacks a string token or a logprob <= 0: "
                            f"{_short(alternatives, 160)}")
        elif len(set(pairs)) < len(pairs):
            problems.append(f"{where}: top_logprobs repeats a token: {_short(alternatives, 160)}")
    return problems
