"""The functional clients never write a request onto a connection the engine may be closing.

vLLM, SGLang and llama.cpp close a connection left idle for 5 s, counted from their
last byte sent. A client reusing a pooled connection counts from its last byte read:
when it reads late (CI's two cores once stalled both the engine and the suite for
about 10 s) the request goes onto a connection the engine is closing and fails with
"Broken pipe" before any response, no fault of the engine (twice in 160 tool-accuracy
requests on vLLM in CI, with reuse limited to connections idle under 2 s). So both
functional clients open a connection of their own for each request, even back to
back; a bare server that records each request's client port shows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from bare_server import serving

from engine_acceptance.wire.client import RawStreamingClient, SdkChatClient
from engine_acceptance.wire.types import EngineTarget

REPLY = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
BODY = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


@asynccontextmanager
async def _port_recording_server(ports: list[int]) -> AsyncIterator[str]:
    async def chat(request: web.Request) -> web.Response:
        ports.append(request.transport.get_extra_info("peername")[1])
        return web.json_response(REPLY)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    # The server keeps idle connections far longer than the client: only the client decides.
    async with serving(app, keepalive_timeout=60.0) as url:
        yield url


async def _sdk_pair(target: EngineTarget, pause_s: float) -> None:
    async with SdkChatClient(target) as client:
        await client.chat(BODY, stream=False)
        await asyncio.sleep(pause_s)
        await client.chat(BODY, stream=False)


async def _raw_pair(target: EngineTarget, pause_s: float) -> None:
    async with RawStreamingClient(target) as client:
        await client.post("/v1/chat/completions", {"model": "m", **BODY})
        await asyncio.sleep(pause_s)
        await client.post("/v1/chat/completions", {"model": "m", **BODY})


async def _ports_of_pairs(pause_s: float) -> dict[str, list[int]]:
    ports = {"sdk": [], "raw": []}
    async with _port_recording_server(ports["sdk"]) as sdk_url, _port_recording_server(ports["raw"]) as raw_url:
        await asyncio.gather(_sdk_pair(EngineTarget(base_url=sdk_url, model="m"), pause_s),
                             _raw_pair(EngineTarget(base_url=raw_url, model="m"), pause_s))
    return ports


def test_each_request_comes_on_a_connection_of_its_own() -> None:
    # Back to back, where a pool would reuse the connection: neither client does.
    ports = asyncio.run(_ports_of_pairs(0.1))
    for client, seen in ports.items():
        assert len(seen) == 2 and seen[0] != seen[1], f"{client} client reused a connection: {seen}"
