"""The reference model's chat template: messages -> prompt text, deterministically.

    <|system|>\n{text}\n<|user|>\n{text}\n ... <|assistant|>\n

Role markers are special tokens, so a turn costs its text's bytes plus 3 tokens.
Images and videos are one placeholder token each. Prompt token counts in `usage`
and `POST /tokenize` with `messages` both come from this one function, so they agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MEDIA_PLACEHOLDERS", "ROLE_MARKERS", "content_text", "render_messages"]

ROLE_MARKERS: dict[str, str] = {
    "system": "<|system|>",
    # OpenAI's newer name for the system role; the template treats them alike.
    "developer": "<|system|>",
    "user": "<|user|>",
    "assistant": "<|assistant|>",
    "tool": "<|tool|>",
}

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


def _render_message(message: Mapping[str, Any]) -> str:
    body = _render_content(message.get("content"))
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
