"""Prefix reuse (issue 41; docs/agent-traffic.md): a long prefix sent again is a cache hit and changes no answer.

Agent traffic sends the same long prefix (a system prompt, the tools, the history) turn after turn;
seed 002's deployment keeps it warm on purpose (a cache-aware router sends each session to the
replica that holds its prefix, a hierarchical KV cache keeps evicted prefixes in host memory).
A cache that reports hits it never had, or that answers another thing once the prefix is cached,
passes every single-request check. Each check builds its own document, unique to it (a fresh nonce
in every code), so its first request is cold and its second warm:

- where the engine reports cached tokens (usage or its ``/metrics`` counters: the ``prefix_cache``
  capability, found by its probe), the second request is a hit;
- whatever the engine reports, a greedy reply with the prefix cached equals the reply without it,
  one request after the other and in a batch of requests that share the prefix (each then sent
  alone), streamed and not: a cache that returns another answer is a broken deployment. These test
  text (``requires("text")``): any deployment may cache prefixes, reported or not. Where the engine
  reports that the warm request found nothing cached, the one-after-the-other check has nothing to
  compare and skips saying so (the batch still compares batched with alone);
- time to first token cold and warm is reported (``gate.json`` figures), gated only when the model
  profile states a limit (``prefix_cache.warm_ttft_ratio_max``).

They run in the measurement phase, alone on the engine: the counters count every client's hits,
another client's traffic could evict the prefix between the two requests, and the TTFT is timed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import string
from dataclasses import dataclass
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, reply_of, short
from engine_acceptance.profiles.profile import EngineProfile, ModelProfile
from engine_acceptance.reporting.csv_text import rows_csv
from engine_acceptance.wire.prefix_cache import cache_report, read_cache_counters, warm_ttft_problem
from engine_acceptance.wire.reassembly import Reply

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.prefix_cache]

# A hit must cover at least this share of the warm request's prompt: the document is nearly all of it, and
# every engine's block (vLLM 16 tokens, SGLang pages up to 128) is far smaller than the document.
HIT_SHARE = 0.5
# Output tokens of the hit and TTFT checks: only the prompt's lookup and the first token matter there.
FEW_TOKENS = 4
# Documents (cold, then warm) the TTFT figures are the median of.
TTFT_PAIRS = 3


@dataclass(frozen=True)
class Document:
    """A long document unique to one check: the shared prefix, and the code each field asks for."""

    text: str
    codes: dict[int, str]
    nonce: str

    def field(self, index: int) -> str:
        return self.codes[index].rsplit("-", 1)[0] + "-"


def _document(prompts: dict[str, Any]) -> Document:
    case = prompts["prefix_cache"]["document"]
    nonce = "".join(secrets.choice(string.ascii_lowercase) for _ in range(8))
    codes = {index: f"{nonce}-{index}-1-{secrets.randbelow(900000) + 100000}" for index in range(case["lines"])}
    lines = [case["line"].format(index=index, nonce=nonce, code=codes[index]) for index in range(case["lines"])]
    header = case["header"].format(nonce=nonce)
    return Document(f"{header}\n<document>\n" + "\n".join(lines) + "\n</document>\n", codes, nonce)


def _body(prompts: dict[str, Any], document: Document, index: int, max_tokens: int, stream: bool) -> dict[str, Any]:
    ask = prompts["prefix_cache"]["ask"].format(field=document.field(index))
    body: dict[str, Any] = {"messages": [{"role": "user", "content": document.text + ask}], "temperature": 0,
                            "max_tokens": max_tokens}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _said(reply: Reply) -> dict[str, Any]:
    """What must not change when the prefix is cached: everything the reply says."""
    return {"content": reply.content, "reasoning": reply.reasoning, "finish_reason": reply.finish_reason,
            "tool_calls": [(call.name, call.arguments) for call in reply.tool_calls]}


def _difference(first: Reply, second: Reply) -> str | None:
    """Where two replies to one request differ, in words; None when they say the same."""
    one, other = _said(first), _said(second)
    changed = [key for key in one if one[key] != other[key]]
    if not changed:
        return None
    return "; ".join(f"{key} {short(str(one[key]), 100)!r} then {short(str(other[key]), 100)!r}" for key in changed)


def _reply_tokens(model_profile: ModelProfile) -> int:
    return model_profile.output_budget(model_profile.reply_tokens)


def _counter_names(engine_profile: EngineProfile) -> dict[str, tuple[str, ...]]:
    return {key: engine_profile.metric_names(key) for key in ("prefix_cache_queries", "prefix_cache_hits")}


@pytest.mark.requires("prefix_cache")
async def test_repeated_long_prefix_is_reported_as_a_cache_hit(chat, raw_client, prompts, engine_profile, stream,
                                                                request) -> None:
    document = _document(prompts)
    body = _body(prompts, document, prompts["prefix_cache"]["fields"][0], FEW_TOKENS, stream)
    metrics = engine_profile.features.get("metrics_endpoint")
    reply_of(await chat(body, stream=stream, label="cold"))
    before = await read_cache_counters(raw_client, metrics, _counter_names(engine_profile))
    warm = reply_of(await chat(body, stream=stream, label="warm"))
    after = await read_cache_counters(raw_client, metrics, _counter_names(engine_profile))
    report = cache_report(warm, engine_profile.cached_tokens_in, before, after)
    request.node.user_properties.append(("prefix_cache_warm_cached_tokens", report.cached_tokens))
    assert report.cached_tokens is not None, (
        f"the engine reported no cached tokens for the warm request: {report.source} (discovery found it "
        f"reporting them)")
    prompt = report.prompt_tokens or 0
    assert report.cached_tokens >= HIT_SHARE * prompt, (
        f"the same {prompt}-token prompt sent again is no prefix-cache hit: {report.describe()}, less than "
        f"{HIT_SHARE:.0%} of the prompt")


@pytest.mark.requires("text")
async def test_reply_with_the_prefix_cached_equals_the_reply_without_it(chat, raw_client, prompts, engine_profile,
                                                                        model_profile, stream) -> None:
    document = _document(prompts)
    body = _body(prompts, document, prompts["prefix_cache"]["fields"][0], _reply_tokens(model_profile), stream)
    metrics = engine_profile.features.get("metrics_endpoint")
    cold = reply_of(await chat(body, stream=stream, label="cold"))
    before = await read_cache_counters(raw_client, metrics, _counter_names(engine_profile))
    warm = reply_of(await chat(body, stream=stream, label="warm"))
    after = await read_cache_counters(raw_client, metrics, _counter_names(engine_profile))
    difference = _difference(cold, warm)
    report = cache_report(warm, engine_profile.cached_tokens_in, before, after)
    if report.cached_tokens == 0:
        # The engine says nothing was cached: two uncached replies that agree show nothing about a cached prefix.
        # (Reported nothing at all: a cache may still have served the warm one, so the comparison stands.)
        assert difference is None, (
            f"the same greedy request answered differently the second time, with nothing cached "
            f"({report.describe()}): first then second, {difference}")
        pytest.skip(f"the engine reported no hit for the warm request ({report.describe()}), so no reply was "
                    "answered with the prefix cached: nothing to compare")
    assert difference is None, (
        f"the same greedy request answered differently once its prefix was cached ({report.describe()}): "
        f"cold then warm, {difference}")


@pytest.mark.requires("text")
async def test_shared_prefix_batch_answers_equal_the_same_requests_sent_alone(chat, prompts, model_profile,
                                                                              engine_profile, stream) -> None:
    if engine_profile.greedy_depends_on_batch:
        pytest.skip(f"engine profile {engine_profile.name!r} says a greedy reply may change with the batch it is "
                    "decoded in (features.greedy_depends_on_batch): a batched reply unlike the same request alone "
                    "would show the batch, not the cache (warm against cold, one at a time, is checked)")
    document = _document(prompts)
    fields = prompts["prefix_cache"]["fields"]
    bodies = {index: _body(prompts, document, index, _reply_tokens(model_profile), stream) for index in fields}
    # Cold, together: the requests share the prefix while none of it is cached yet.
    batch = await asyncio.gather(*(chat(body, stream=stream, label=f"batch, {document.field(index)}")
                                   for index, body in bodies.items()))
    batched = {index: reply_of(exchange) for index, exchange in zip(bodies, batch)}
    # Warm, one at a time.
    alone = {index: reply_of(await chat(body, stream=stream, label=f"alone, {document.field(index)}"))
             for index, body in bodies.items()}
    problems = []
    for index in fields:
        difference = _difference(alone[index], batched[index])
        if difference is None:
            continue
        other = next((document.field(o) for o in fields if o != index and _difference(alone[o], batched[index]) is None),
                     None)
        crossed = f" (it is the answer to the request for {other})" if other else ""
        problems.append(f"the request for {document.field(index)} answered differently in a batch that shares its "
                        f"prefix than alone{crossed}: alone then batched, {difference}")
    assert_no_problems(problems)


@pytest.mark.requires("text")
async def test_time_to_first_token_cold_and_warm_is_reported(raw_client, prompts, model_profile, acceptance,
                                                             request) -> None:
    rows: list[list[str]] = []
    cold_ms: list[float] = []
    warm_ms: list[float] = []
    for pair in range(TTFT_PAIRS):
        document = _document(prompts)
        body = {**_body(prompts, document, prompts["prefix_cache"]["fields"][0], FEW_TOKENS, True),
                "model": acceptance.target.model, "stream": True}
        times = []
        for label in ("cold", "warm"):
            with allure.step(f"POST /v1/chat/completions (streamed): pair {pair + 1}, {label}"):
                reply = reply_of(await raw_client.post("/v1/chat/completions", body))
            assert reply.first_output_time is not None, f"pair {pair + 1}, {label}: the stream carried no output"
            times.append(reply.first_output_time * 1000.0)
        cold_ms.append(times[0])
        warm_ms.append(times[1])
        rows.append([str(pair + 1), f"{times[0]:.1f}", f"{times[1]:.1f}"])
    cold, warm = statistics.median(cold_ms), statistics.median(warm_ms)
    allure.attach(rows_csv(["pair", "TTFT cold ms", "TTFT warm ms"], rows), name="time to first token, cold and warm",
                  attachment_type=allure.attachment_type.CSV)
    request.node.user_properties += [("prefix_cache_ttft_cold_ms", round(cold, 3)),
                                     ("prefix_cache_ttft_warm_ms", round(warm, 3)),
                                     ("prefix_cache_ttft_ms", json.dumps({"cold": cold_ms, "warm": warm_ms}))]
    problem = warm_ttft_problem(cold, warm, model_profile.prefix_cache.get("warm_ttft_ratio_max"))
    assert problem is None, problem
