"""A slow engine is not a broken one: no false timeouts (issue 13, point 8).

A non-streamed reply sends nothing until it is complete, and a stream's first
event waits for the queue and the prefill: those silences are bounded by the
request timeout only. The idle timeout still ends a stream that stalls and a
streamed request the engine never answers (no status), each failure naming the
limit that fired. Which limit applies where: ``engine_acceptance/wire/client.py``'s
docstring and docs/misbehaving-engines.md.

The suite runs against the reference engine with a latency model that makes a
non-streamed reply take longer than ``--idle-timeout`` but far less than
``--request-timeout``; the clients are also driven directly, against the
reference engine's faults and against a bare server whose first event comes late.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from allure_results import read_results
from bare_server import serving
from suite_runner import failed, run_suite

from engine_acceptance.wire import health as engine_health
from engine_acceptance.wire.client import RawStreamingClient, SdkChatClient
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget, Exchange
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import start_reference_engine

IDLE_S = 1.0
# A byte-level reference model: a reply of N characters is N tokens, so at 20 ms a
# token any reply over 50 characters takes longer than IDLE_S to generate, while a
# stream (4 tokens an event) never goes quiet for more than a tenth of it.
SLOW = LatencyModel(ttft_ms=200.0, tpot_ms=20.0)
# The whole text selection waits for every reply of the latency model (a few seconds a check at SLOW),
# so it runs at half the scale: idle timeout 0.5 s, 100 ms to a first token, 10 ms a token. The same
# case: a non-streamed reply over 50 characters outlasts the idle timeout, a stream's gaps are a tenth of it.
SUITE_IDLE_S = IDLE_S / 2
SUITE_SLOW = LatencyModel(ttft_ms=SLOW.ttft_ms / 2, tpot_ms=SLOW.tpot_ms / 2)
# What an asyncio timer may overrun on a busy 2-core machine before the client acts on it.
TIMER_SLACK_S = 2.0
BODY = {"messages": [{"role": "user", "content": "Say hello to the slow engine in one long sentence, please."}],
        "max_tokens": 128, "temperature": 0}

async def _sdk(target: EngineTarget, stream: bool) -> Exchange:
    async with SdkChatClient(target) as client:
        return await client.chat(BODY, stream=stream)


async def _raw(target: EngineTarget, stream: bool) -> Exchange:
    async with RawStreamingClient(target, pool_size=1) as client:
        return await client.post("/v1/chat/completions", {**BODY, "model": target.model, "stream": stream})


async def _both(target: EngineTarget, stream: bool) -> dict[str, Exchange]:
    """Each client's exchange with `target`, the two sent at once, each on a connection of its own.

    The clients are independent; together they wait out the same seconds once instead of one after
    the other. Each is then checked on its own.
    """
    sdk, raw = await asyncio.gather(_sdk(target, stream), _raw(target, stream))
    return {"sdk": sdk, "raw": raw}


MODES = pytest.mark.parametrize("stream", [False, True], ids=["non-streamed", "streamed"])


@pytest.mark.e2e
def test_suite_passes_against_an_engine_slower_than_the_idle_timeout(pytester: pytest.Pytester) -> None:
    with start_reference_engine(latency=SUITE_SLOW) as engine:
        # One sample per model-behaviour check: each request is slow on purpose, and what is proven is
        # that a reply slower than the idle timeout is waited for, not a rate over samples.
        result, outcomes = run_suite(pytester, f"--engine-url={engine.url}", f"--idle-timeout={SUITE_IDLE_S:g}",
                                     "--request-timeout=30", "-m", "text", "--trials=1")
    output = result.stdout.str()[-3000:]
    assert result.ret == 0 and outcomes and not failed(outcomes), output
    # The run really met the case: non-streamed replies that took longer than the idle timeout.
    reports = read_results(pytester.path / "allure-results")
    slow = [response["elapsed_s"] for report in reports.values()
            for response in map(json.loads, report.attachment_texts("response (non-streamed)"))
            if response["elapsed_s"] > SUITE_IDLE_S]
    assert len(slow) >= 3, f"no non-streamed reply took longer than {SUITE_IDLE_S}s: the latency model is too fast"


@MODES
def test_a_reply_slower_than_the_idle_timeout_is_waited_for(stream: bool) -> None:
    with start_reference_engine(latency=SLOW) as engine:
        target = EngineTarget(engine.url, "reference-model", timeouts=ClientTimeouts(connect=5, idle=IDLE_S, total=30))
        exchanges = asyncio.run(_both(target, stream))
    for client, exchange in exchanges.items():
        assert exchange.ok, (client, exchange.describe_failure())
        assert exchange.reply is not None and exchange.reply.content, client
        if not stream:
            assert exchange.elapsed_s > IDLE_S, f"{client}: the reply took {exchange.elapsed_s:.2f}s: case not met"


def test_a_stalled_stream_fails_on_the_idle_timeout() -> None:
    with start_reference_engine(defects=["stream-stall"]) as engine:
        target = EngineTarget(engine.url, "reference-model", timeouts=ClientTimeouts(connect=5, idle=IDLE_S, total=30))
        try:
            exchanges = asyncio.run(_both(target, True))
        finally:
            engine_health.forget(engine.url)
    for client, exchange in exchanges.items():
        assert exchange.error_kind == "timeout" and not exchange.ok, client
        assert exchange.error.startswith("idle timeout: the reply stalled mid-way, no byte for 1s after "), \
            (client, exchange.error)
        assert "(--idle-timeout 1s; the stream stopped and hung)" in exchange.error, client
        assert exchange.elapsed_s <= IDLE_S + TIMER_SLACK_S, f"{client} took {exchange.elapsed_s:.2f}s"


@MODES
def test_a_request_never_answered_names_the_limit_that_ended_it(stream: bool) -> None:
    """Streamed: no status within the idle timeout. Non-streamed: nothing can come early, so the total."""
    total = 2.0
    with start_reference_engine(defects=["never-answer"]) as engine:
        target = EngineTarget(engine.url, "reference-model",
                              timeouts=ClientTimeouts(connect=5, idle=IDLE_S, total=total))
        try:
            exchanges = asyncio.run(_both(target, stream))
        finally:
            engine_health.forget(engine.url)
    for client, exchange in exchanges.items():
        assert exchange.error_kind == "timeout" and exchange.status is None, client
        if stream:
            assert exchange.error.startswith("idle timeout: the engine accepted the request and sent no response "
                                             "within 1s (--idle-timeout 1s;"), (client, exchange.error)
            assert exchange.elapsed_s <= IDLE_S + TIMER_SLACK_S, f"{client} took {exchange.elapsed_s:.2f}s"
        else:
            assert exchange.error.startswith("total timeout: the engine accepted the request and sent no response "
                                             "within 2s (--request-timeout 2s;"), (client, exchange.error)
            assert total <= exchange.elapsed_s + 0.05 <= total + TIMER_SLACK_S, \
                f"{client} took {exchange.elapsed_s:.2f}s"


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    event = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


@asynccontextmanager
async def _late_first_event_server(first_event_after_s: float | None) -> AsyncIterator[str]:
    """Sends a stream's status and headers at once, like vLLM, and its first event after a 'prefill'.

    ``None``: the first event never comes (a prefill that outlasts the request timeout).
    """
    async def chat(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if first_event_after_s is not None:
            await asyncio.sleep(first_event_after_s)
        else:  # until the client leaves: a hung handler would hold the server's cleanup
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.05)
            return response
        for delta in ({"role": "assistant", "content": ""}, {"content": "hello"}, {"content": " world"}):
            await response.write(_chunk(delta))
        await response.write(_chunk({}, "stop") + b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    async with serving(app) as url:
        yield url


def test_a_streams_first_event_may_wait_for_a_long_prefill() -> None:
    """Headers at once, then 2 s of silence (over the 1 s idle timeout) before the first event."""
    async def scenario() -> dict[str, Exchange]:
        async with _late_first_event_server(2.0) as url:
            target = EngineTarget(url, "m", timeouts=ClientTimeouts(connect=5, idle=IDLE_S, total=30))
            return await _both(target, True)

    for client, exchange in asyncio.run(scenario()).items():
        assert exchange.ok, (client, exchange.describe_failure())
        assert exchange.reply is not None and exchange.reply.content == "hello world" and exchange.reply.done_received
        assert exchange.elapsed_s >= 2.0, client


def test_a_prefill_longer_than_the_request_timeout_fails_naming_it() -> None:
    async def scenario() -> dict[str, Exchange]:
        async with _late_first_event_server(None) as url:
            target = EngineTarget(url, "m", timeouts=ClientTimeouts(connect=5, idle=IDLE_S, total=2.0))
            try:
                return await _both(target, True)
            finally:
                engine_health.forget(url)

    for client, exchange in asyncio.run(scenario()).items():
        assert exchange.error_kind == "timeout" and exchange.status == 200, client
        assert exchange.error.startswith("total timeout: response headers came, then no event within 2s "
                                         "(--request-timeout 2s bounds the wait for a stream's first event"), \
            (client, exchange.error)
        assert 2.0 <= exchange.elapsed_s + 0.05 <= 2.0 + TIMER_SLACK_S, f"{client} took {exchange.elapsed_s:.2f}s"
