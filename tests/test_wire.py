"""The wire, read raw (issue 15): what a chat completion's chunks, bytes and headers say.

Applications and SDKs parse the stream chunk by chunk, and each rule checked here is one a
client relies on without looking: the first chunk of each choice carries ``role: assistant``
(vLLM and SGLang send it alone, with empty content); with ``stream_options.include_usage`` usage
comes once, in a final chunk whose ``choices`` is ``[]`` (OpenAI's contract; the chunks before carry
none), and with ``continuous_usage_stats`` in the chunks the engine profile names, never going
down; each choice gets exactly one ``finish_reason``; tool-call fragments are indexed from 0, a
new call taking the next index; no U+FFFD reaches the text of a CJK and emoji reply however
tokens and TCP writes cut its characters; a stream is ``text/event-stream`` made of ``data:``
lines and a whole reply ``application/json``; a streamed reply leaves its connection open for the
next request unless it says ``Connection: close`` (clients pool connections). ``[DONE]`` and events
after it are ``test_streaming.py``'s. Requests go through the raw aiohttp client, so nothing between
the engine and the check (an SDK's parsing) hides a fault; a stream is read from its raw bytes even
when it is mislabelled, so each check judges only its own part of the wire.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, short
from engine_acceptance.profiles.tool_schemas import load_tool
from engine_acceptance.report_attachments import attach_exchange, attach_json
from engine_acceptance.resources import load_prompts
from engine_acceptance.wire.keep_alive import next_request_after_stream
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.reassembly import reassemble_stream
from engine_acceptance.wire.stream_contract import (
    CONTINUOUS_USAGE_MODES,
    chunks_of,
    continuous_usage_problems,
    finish_reason_problems,
    framing_problems,
    media_type,
    multibyte_characters,
    replacement_problems,
    role_problems,
    stream_events,
    tool_call_fragments,
    tool_index_problems,
    usage_chunk_problems,
)

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.wire]

CASE: dict[str, Any] = load_prompts("contract")["wire"]
WireSender = Callable[..., Awaitable[Exchange]]


@pytest.fixture
def wire_chat(acceptance, raw_client) -> WireSender:
    """``await wire_chat(body, stream=...)``: one chat request over the raw client, attached to the report."""
    redactor = acceptance.redactor

    async def send(body: dict[str, Any], *, stream: bool, label: str = "") -> Exchange:
        mode = "streamed" if stream else "non-streamed"
        full = {"model": acceptance.target.model, **body, **({"stream": True} if stream else {})}
        with allure.step(f"POST /v1/chat/completions raw ({mode}){': ' + label if label else ''}"):
            exchange = await raw_client.post("/v1/chat/completions", full, stream=stream)
            attach_exchange(exchange, redactor, label)
        assert exchange.status == 200, f"the request was not answered: {exchange.describe_failure()}"
        return exchange

    return send


def _request(model_profile, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": CASE["prompt"]}], "temperature": 0,
            "max_tokens": model_profile.output_budget(CASE["max_tokens"]), **fields}


def _chunks(exchange: Exchange) -> list:
    chunks = chunks_of(stream_events(exchange))
    assert chunks, f"the stream has no JSON chunk: {short(exchange.raw.decode('utf-8', 'replace'))!r}"
    return chunks


async def test_first_chunk_of_the_stream_carries_the_assistant_role(wire_chat, model_profile) -> None:
    chunks = _chunks(await wire_chat(_request(model_profile), stream=True))
    assert_no_problems(role_problems(chunks))


async def test_include_usage_sends_usage_once_in_a_final_chunk_without_choices(wire_chat, model_profile) -> None:
    body = _request(model_profile, stream_options={"include_usage": True})
    assert_no_problems(usage_chunk_problems(_chunks(await wire_chat(body, stream=True))))


async def test_continuous_usage_stats_put_running_usage_in_the_chunks(wire_chat, model_profile,
                                                                     engine_profile) -> None:
    mode = engine_profile.continuous_usage_stats
    if mode is None:
        pytest.skip(f"engine profile {engine_profile.name!r} says the engine has no stream_options."
                    f"continuous_usage_stats (features.continuous_usage_stats: false)")
    body = _request(model_profile, stream_options={"include_usage": True, "continuous_usage_stats": True})
    problems = continuous_usage_problems(_chunks(await wire_chat(body, stream=True)), mode)
    assert_no_problems(problems, header=f"continuous_usage_stats (engine profile {engine_profile.name!r}: usage in "
                                        f"{CONTINUOUS_USAGE_MODES[mode]})")


@pytest.mark.parametrize("n", [1, 2], ids=["n1", "n2"])
async def test_each_choice_gets_exactly_one_finish_reason(wire_chat, model_profile, n: int) -> None:
    # n > 1 is sampled (vLLM refuses it greedy); a small max_tokens keeps each choice short.
    fields: dict[str, Any] = {"n": n, "temperature": CASE["n_temperature"]} if n > 1 else {}
    chunks = _chunks(await wire_chat(_request(model_profile, **fields), stream=True, label=f"n={n}"))
    assert_no_problems(finish_reason_problems(chunks, n))


@pytest.mark.requires("tools")
async def test_tool_call_deltas_are_indexed_from_zero_in_call_order(wire_chat, prompts, model_profile) -> None:
    case = prompts["tools"]["parallel_weather"]
    body = {"messages": [{"role": "user", "content": case["prompt"]}], "tools": [load_tool("get_weather")],
            "tool_choice": "auto", "temperature": 0, "max_tokens": model_profile.output_budget(case["max_tokens"])}
    exchange = await wire_chat(body, stream=True)
    fragments = tool_call_fragments(_chunks(exchange))
    if not fragments:
        reply = reassemble_stream(stream_events(exchange))
        pytest.skip(f"the model called no tool in the streamed reply, so there are no tool-call deltas to read "
                    f"(finish_reason {reply.finish_reason!r}, content {short(reply.content)!r}); whether it "
                    f"should have is test_tools.py's verdict")
    problems = tool_index_problems(fragments)
    assert_no_problems(problems, header=f"{len(fragments)} tool-call fragments")


def _text_of(exchange: Exchange) -> tuple[str, str, list[str]]:
    """Content, reasoning, and the events that were not valid UTF-8 (streamed) of a reply."""
    if exchange.stream:
        events = stream_events(exchange)
        reply = reassemble_stream(events)
        broken = [f"event {number} is not valid UTF-8 ({event.decode_error})"
                  for number, event in enumerate(events, 1) if event.decode_error]
        return reply.content, reply.reasoning, broken
    assert isinstance(exchange.body, dict), f"the reply is not a JSON object: {short(exchange.raw)!r}"
    message = ((exchange.body.get("choices") or [{}])[0] or {}).get("message") or {}
    reasoning = next((message[f] for f in ("reasoning_content", "reasoning") if isinstance(message.get(f), str)), "")
    return message.get("content") or "", reasoning, []


async def test_cjk_and_emoji_reply_has_no_replacement_character(wire_chat, model_profile, stream) -> None:
    body = {"messages": [{"role": "user", "content": CASE["multibyte_prompt"]}], "temperature": 0,
            "max_tokens": model_profile.output_budget(CASE["multibyte_max_tokens"])}
    content, reasoning, broken = _text_of(await wire_chat(body, stream=stream))
    assert_no_problems(broken + replacement_problems(content, "content") + replacement_problems(reasoning, "reasoning"))
    if not multibyte_characters(content + reasoning):
        pytest.skip(f"the reply has no character of more than one UTF-8 byte (no CJK, no emoji), so nothing "
                    f"could be cut: content {short(content)!r}")


async def test_reply_has_the_content_type_and_framing_of_its_mode(wire_chat, model_profile, stream) -> None:
    exchange = await wire_chat(_request(model_profile), stream=stream)
    kind = media_type(exchange.headers)
    if not stream:
        assert kind == "application/json", (f"a non-streamed reply is labelled Content-Type "
                                            f"{exchange.headers.get('content-type')!r}, not application/json")
        assert isinstance(exchange.body, dict), f"the non-streamed body is not a JSON object: {short(exchange.raw)!r}"
        return
    assert kind == "text/event-stream", (f"a streamed reply is labelled Content-Type "
                                         f"{exchange.headers.get('content-type')!r}, not text/event-stream")
    assert_no_problems(framing_problems(exchange.raw, truncated=exchange.raw_truncated))


async def test_a_streamed_reply_leaves_its_connection_open_for_the_next_request(acceptance, model_profile) -> None:
    # Its own pool of one connection: the raw client opens a connection per request on purpose.
    stream_body = {"model": acceptance.target.model, **_request(model_profile), "stream": True}
    next_body = {"model": acceptance.target.model, **_request(model_profile)}
    with allure.step("POST /v1/chat/completions streamed, then another request on the same connection"):
        result = await next_request_after_stream(acceptance.target, stream_body, next_body)
        attach_json("connection reuse after a streamed reply", result.describe(), acceptance.redactor)
    assert_no_problems(result.problems())
