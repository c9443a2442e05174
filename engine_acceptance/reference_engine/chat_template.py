"""The reference model's chat template: messages -> prompt text, deterministically.

    <|system|>\n{text}\n<|user|>\n{text}\n ... <|assistant|>\n

Role markers are special tokens, so a turn costs its text's bytes plus 3 tokens.
Images and videos are one placeholder token each. Prompt token counts in `usage`
and `POST /tokenize` with `messages` both come from this one function, so they agree.

The reference model thinks in interleaved turns and needs its reasoning carried back: reasoning sent back
in an assistant message of the history (``reasoning``, vLLM's name, or ``reasoning_content``,
SGLang's and older vLLM's) is rendered before that message's text, between ``<think>`` and
``</think>``, in every turn; the model profile says so (``reasoning.in_history: keep``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["HISTORY_REASONING_KEYS", "MEDIA_PLACEHOLDERS", "ROLE_MARKERS", "content_text", "history_reasoning",
           "render_messages", "strip_rendered_prefix"]

ROLE_MARKERS: dict[str, str] = {
    "system": "<|system|>",
    # OpenAI's newer name for the system role; the template treats them alike.
    "developer": "<|system|>",
    "user": "<|user|>",
    "assistant": "<|assistant|>",
    "tool": "<|tool|>",
}

# Where an assistant message of the history carries its reasoning, in the order read.
HISTORY_REASONING_KEYS = ("reasoning", "reasoning_content")

# Content-part type -> the placeholder token it occupies in the prompt.
MEDIA_PLACEHOLDERS: dict[str, str] = {
    "image_url": "<|image|>",
    "video_url": "<|video|>",
}


def content_text(content: Any) -> str:
    """The text of a message's content: the string, or its text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "")
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text"
    )


def _render_content(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    pieces: list[str] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            pieces.append(part.get("text", ""))
        else:
            pieces.append(MEDIA_PLACEHOLDERS[kind])
    return "".join(pieces)


def history_reasoning(message: Mapping[str, Any]) -> str | None:
    """The reasoning an assistant message of the history carries, or None."""
    if message.get("role") != "assistant":
        return None
    return next((message[key] for key in HISTORY_REASONING_KEYS if isinstance(message.get(key), str)
                 and message[key]), None)


def _render_message(message: Mapping[str, Any]) -> str:
    body = _render_content(message.get("content"))
    reasoning = history_reasoning(message)
    if reasoning is not None:
        body = f"<think>\n{reasoning}\n</think>\n\n{body}"
    tool_calls = message.get("tool_calls")
    if tool_calls:
        # Compact, key-sorted JSON so the same calls always cost the same tokens.
        body += json.dumps(tool_calls, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return f"{ROLE_MARKERS[message['role']]}\n{body}\n"


def render_messages(
    messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
) -> str:
    """The prompt text for `messages` (already validated by the protocol layer)."""
    prompt = "".join(_render_message(message) for message in messages)
    if add_generation_prompt:
        prompt += f"{ROLE_MARKERS['assistant']}\n"
    return prompt


def strip_rendered_prefix(messages: Sequence[Mapping[str, Any]], chars: int) -> list[dict[str, Any]]:
    """The messages as a model that never read the first `chars` characters of their prompt sees them.

    Messages wholly inside that span are gone; the one it ends in keeps the text after it (a
    text content only; its role stays). What a prefix cache that loses its blocks' contents leaves.
    """
    kept: list[dict[str, Any]] = []
    for message in messages:
        rendered = len(_render_message(message))
        if chars >= rendered:
            chars -= rendered
            continue
        if chars > 0 and isinstance(message.get("content"), str):
            lead = len(ROLE_MARKERS[message["role"]]) + 1
            message = {**message, "content": message["content"][max(0, chars - lead):]}
        chars = 0
        kept.append(dict(message))
    return kept
