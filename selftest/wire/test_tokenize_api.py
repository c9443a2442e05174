"""wire/tokenize_api.py: every token count sends the body the engine profile names.

A fake llama-server tokenizes as b11312 does (server-context.cpp ``post_tokenize``): it reads
``content`` and ``add_special`` and answers ``{"tokens": []}`` to any other body, and counts a
conversation only at ``POST /v1/chat/completions/input_tokens``. vLLM's body sent there would
count nothing, which is what the suite did before the profile could say the shape.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from bare_server import serving

from engine_acceptance.load.generator import PromptIds
from engine_acceptance.wire.tokenize_api import TokenizeApi
from engine_acceptance.wire.token_count import ServerTokenCounter
from engine_acceptance.wire.types import EngineTarget

BOS = 2


def _llama_server_answer(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One token per word, a BOS when add_special is true, as llama-server's routes answer."""
    if path == "/tokenize":
        if "content" not in body:
            return {"tokens": []}
        words = [100 + index for index, _ in enumerate(body["content"].split())]
        return {"tokens": ([BOS] if body.get("add_special", False) else []) + words}
    text = " ".join(message["content"] for message in body["messages"])
    # <bos>, and per turn <start_of_turn>role ... <end_of_turn>, then the generation prompt.
    return {"input_tokens": 1 + len(text.split()) + 3 * len(body["messages"]) + 2, "object": "response.input_tokens"}


def _llama_server(seen: list[tuple[str, dict[str, Any]]]) -> web.Application:
    async def answer(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append((request.path, body))
        return web.json_response(_llama_server_answer(request.path, body))

    app = web.Application()
    app.router.add_post("/tokenize", answer)
    app.router.add_post("/v1/chat/completions/input_tokens", answer)
    return app


@pytest.mark.asyncio
async def test_llama_servers_body_counts_text_conversations_and_completions_prompts() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    async with serving(_llama_server(seen)) as url:
        counter = ServerTokenCounter(EngineTarget(url, "gemma-3-270m"), TokenizeApi("/tokenize", "content"))
        assert await asyncio.to_thread(counter.count_many, ["one two three", "four"]) == [3, 1]
        # The BOS /v1/completions adds.
        assert await asyncio.to_thread(counter.count_completion_prompt, "one two three") == 4
        conversation = [{"role": "user", "content": "one two three"}]
        assert await asyncio.to_thread(counter.count_conversation, conversation) == 1 + 3 + 3 + 2
    assert seen == [
        ("/tokenize", {"content": "one two three", "add_special": False}),
        ("/tokenize", {"content": "four", "add_special": False}),
        ("/tokenize", {"content": "one two three", "add_special": True}),
        ("/v1/chat/completions/input_tokens", {"model": "gemma-3-270m", "add_generation_prompt": True,
                                               "messages": conversation}),
    ]


@pytest.mark.asyncio
async def test_vllms_body_at_llama_server_counts_nothing() -> None:
    async with serving(_llama_server([])) as url:
        counter = ServerTokenCounter(EngineTarget(url, "gemma-3-270m"), "/tokenize")
        assert await asyncio.to_thread(counter.count, "one two three") == 0


@pytest.mark.asyncio
async def test_the_loads_token_id_prompts_are_tokenized_in_llama_servers_body() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    async with serving(_llama_server(seen)) as url:
        prompts = await PromptIds.from_engine(EngineTarget(url, "gemma-3-270m"), TokenizeApi("/tokenize", "content"),
                                              min_tokens=64, seed=3)
    assert len(prompts.corpus) >= 64 and BOS not in prompts.corpus
    assert set(seen[0][1]) == {"content", "add_special"} and seen[0][1]["add_special"] is False


def test_an_unknown_body_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tokenize body 'input'; known: prompt, content"):
        TokenizeApi("/extras/tokenize", "input")
