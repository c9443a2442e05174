"""The engines' tokenize APIs: the body each takes, and where each counts a rendered conversation.

Two shapes are served, and an engine profile names its own (``features.tokenize_body``):

* ``prompt`` (vLLM, SGLang): ``POST /tokenize`` with ``{"model", "prompt", "add_special_tokens"}``
  answers ``{"tokens", "count"}``; the same route given ``messages`` (and
  ``add_generation_prompt``) renders the conversation with the chat template and counts it.
* ``content`` (llama.cpp's ``llama-server``): ``POST /tokenize`` with ``{"content", "add_special"}``
  answers ``{"tokens"}`` (``add_special`` defaults to false there; any other body is answered
  ``{"tokens": []}``, tools/server/server-context.cpp ``post_tokenize``); a conversation is counted
  as its chat route renders it at ``POST /v1/chat/completions/input_tokens``, which answers
  ``{"input_tokens": N}`` (``handle_count_tokens``: the same template, the BOS included).

This module is the one place that knows the bodies: the tokenize probe, the token counter,
the load's token-id prompts and the accounting checks all ask it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TOKENIZE_BODIES", "TokenizeApi"]

# The shapes an engine profile may name, and what each sends: for the profile schema and messages.
TOKENIZE_BODIES: dict[str, str] = {
    "prompt": 'vLLM\'s and SGLang\'s {"prompt"}',
    "content": 'llama-server\'s {"content"}',
}
# Where llama-server counts a conversation as its chat route renders it.
CONTENT_CONVERSATION_PATH = "/v1/chat/completions/input_tokens"


@dataclass(frozen=True)
class TokenizeApi:
    """An engine's tokenize route and the shape of its bodies (one of :data:`TOKENIZE_BODIES`)."""

    endpoint: str
    body: str = "prompt"

    def __post_init__(self) -> None:
        if self.body not in TOKENIZE_BODIES:
            raise ValueError(f"unknown tokenize body {self.body!r}; known: {', '.join(TOKENIZE_BODIES)}")

    def text_request(self, model: str, text: str, *, special_tokens: bool | None = False) -> dict[str, Any]:
        """The body that tokenizes ``text``; ``special_tokens`` None leaves the engine's default (a BOS or not)."""
        if self.body == "content":
            body: dict[str, Any] = {"content": text}
            if special_tokens is not None:
                body["add_special"] = special_tokens
            return body
        body = {"model": model, "prompt": text}
        if special_tokens is not None:
            body["add_special_tokens"] = special_tokens
        return body

    def completions_request(self, model: str, text: str) -> dict[str, Any]:
        """The body that tokenizes a ``/v1/completions`` prompt as that route does (special tokens added)."""
        # vLLM's default add_special_tokens is true, as its completions route has it; llama-server's
        # /tokenize defaults to false while its completions route adds the BOS: say so explicitly there.
        return self.text_request(model, text, special_tokens=True if self.body == "content" else None)

    def conversation_request(self, model: str, messages: Sequence[Mapping[str, Any]], *,
                             add_generation_prompt: bool = True,
                             tools: Sequence[Mapping[str, Any]] | None = None) -> tuple[str, dict[str, Any]]:
        """(path, body) that counts ``messages`` as the chat route renders them for a reply.

        `tools`: the tools the chat request offers, which the template renders too (vLLM's
        TokenizeChatRequest takes them, as llama-server's input_tokens route takes a chat request).
        """
        body: dict[str, Any] = {"model": model, "messages": list(messages),
                                "add_generation_prompt": add_generation_prompt}
        if tools:
            body["tools"] = list(tools)
        return (CONTENT_CONVERSATION_PATH if self.body == "content" else self.endpoint), body

    @staticmethod
    def count_in(answer: Any) -> int | None:
        """The count an answer gives: ``count``, ``input_tokens``, or the length of ``tokens``; None if none."""
        if not isinstance(answer, dict):
            return None
        for key in ("count", "input_tokens"):
            value = answer.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        tokens = answer.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None

    def describe(self) -> str:
        return f"POST {self.endpoint} {TOKENIZE_BODIES[self.body]}"
