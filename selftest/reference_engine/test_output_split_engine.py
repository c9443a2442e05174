"""What the reference engine reports for the load's output split (issue 41): reasoning and cached tokens
in usage, speculative-decoding counters at /metrics, and the two defects that break those figures.

The engine runs in this process (``bare_server.serving``); streams are read with the suite's
reassembly, which the load uses too.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from bare_server import serving

from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.server import build_app
from engine_acceptance.wire.prometheus import parse_prometheus
from engine_acceptance.wire.reassembly import Reply, reassemble_stream
from engine_acceptance.wire.sse import SSEParser

MODEL = "reference-model"
# A question whose answer is longer than one streamed delta: the engine introduces itself.
QUESTION = "Hello, who are you?"


async def _chat(url: str, **extra: Any) -> Reply:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "What is 12 * 12? Explain the steps."}],
            "stream": True, "stream_options": {"include_usage": True}, **extra}
    parser = SSEParser()
    events = []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/v1/chat/completions", json=body) as response:
            async for chunk in response.content.iter_any():
                events += parser.feed(chunk, 0.0)
    return reassemble_stream(events, sent_at=0.0)


async def _series(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/metrics") as response:
            return parse_prometheus(await response.text())


def _counter(series: dict[str, float], name: str) -> float:
    return sum(value for key, value in series.items() if key.split("{")[0] == f"vllm:spec_decode_num_{name}_total")


async def test_chat_usage_reports_the_reasoning_tokens_and_no_cached_ones_and_completions_neither_detail() -> None:
    async with serving(build_app(ReferenceEngineConfig())) as url:
        reply = await _chat(url)
        assert reply.reasoning and reply.usage is not None
        usage = reply.usage.raw
        # The reasoning between its markers, counted as the engine's tokenizer counts it.
        assert 0 < usage["completion_tokens_details"]["reasoning_tokens"] < usage["completion_tokens"]
        assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 4}
                                    ) as response:
                completion = await response.json()
        assert completion["usage"]["prompt_tokens_details"] is None
        assert "completion_tokens_details" not in completion["usage"]
    async with serving(build_app(ReferenceEngineConfig(reasoning=False))) as url:
        # A model that never reasons (vLLM without a reasoning parser): no reasoning tokens reported.
        assert "completion_tokens_details" not in (await _chat(url)).usage.raw  # type: ignore[union-attr]


async def test_metrics_count_draft_and_accepted_tokens_at_the_set_acceptance_and_the_defect_quarters_it() -> None:
    for config, acceptance in ((ReferenceEngineConfig(), 0.8),
                               (ReferenceEngineConfig(spec_decode_acceptance=0.6), 0.6),
                               (ReferenceEngineConfig(defects={"spec-decode-rejects"}), 0.2)):
        async with serving(build_app(config)) as url:
            before = await _series(url)
            for _ in range(3):
                await _chat(url)
            after = await _series(url)
        drafted = _counter(after, "draft_tokens") - _counter(before, "draft_tokens")
        accepted = _counter(after, "accepted_tokens") - _counter(before, "accepted_tokens")
        assert drafted > 100 and abs(accepted / drafted - acceptance) < 0.01, (config, accepted, drafted)
        assert _counter(after, "drafts") > 0
    for config in (ReferenceEngineConfig(spec_decode_acceptance=None), ReferenceEngineConfig(convention="sglang")):
        async with serving(build_app(config)) as url:
            await _chat(url)
            assert not [key for key in await _series(url) if "spec_decode" in key], config


async def test_content_at_end_holds_the_answer_back_to_one_delta_after_its_last_token() -> None:
    body = {"messages": [{"role": "user", "content": QUESTION}]}
    async with serving(build_app(ReferenceEngineConfig())) as url:
        plain = await _chat(url, **body)
    async with serving(build_app(ReferenceEngineConfig(defects={"content-at-end"}))) as url:
        held = await _chat(url, **body)
    assert plain.content_events > 1 and held.content_events == 1, (plain.content_events, held.content_events)
    # The same reply and the same count of reasoning tokens; only when the answer leaves differs.
    assert (held.content, held.reasoning) == (plain.content, plain.reasoning)
    assert held.usage is not None and plain.usage is not None
    assert json.dumps(held.usage.raw, sort_keys=True) == json.dumps(plain.usage.raw, sort_keys=True)
