"""Cancellation (issue 15): clients that disconnect leave the engine serving, and free what they held.

Applications give up on requests all the time (a user closes the tab, a gateway times out);
each such request must end on the engine. Several clients leave at once here: four streams
of a long generation are closed abruptly after a few events (``[streamed]``), or four
non-streamed requests are given up before their reply (``[non-streamed]``). Then:

- the engine still serves: a normal request gets a whole reply (an engine that wedges after
  an abort fails here);
- where the engine exposes Prometheus metrics (the engine profile's ``metrics_endpoint``),
  the requests running and waiting return to 0 and the KV-cache usage to its value before
  the disconnects, within ``--cancellation-timeout`` (60 s): the gauges are named in the
  engine profile (``features.metric_names``: vLLM's ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc`` or the older
  ``vllm:gpu_cache_usage_perc``; SGLang's ``sglang:num_running_reqs``,
  ``sglang:num_queue_reqs``, ``sglang:token_usage``), and the report says which name the
  engine served. The time it took is a figure (``seconds_to_idle``); only the timeout gates.
  A leaked request (still generating for nobody, holding its KV cache) fails here.

The gauges count every client's requests, so these checks run in the measurement phase,
one at a time, alone on the engine (docs/architecture.md, "Two phases"), and the idle values are
read there before the disconnects, once nothing is running or waiting. The idle check comes
first in this module, so its baseline is the engine's idle before any of this module's
disconnects (a leaked request of the serving check would otherwise sit in it).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, short
from engine_acceptance.profiles.profile import EngineProfile, ModelProfile
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.resources import load_prompts
from engine_acceptance.wire.cancellation import (
    GAUGES,
    Cut,
    GaugeReading,
    abandon_before_reply,
    cut_mid_stream,
    not_idle,
    read_gauges,
    watch_until_idle,
)
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.types import EngineTarget

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.cancellation]

CASE: dict[str, Any] = load_prompts("contract")["cancellation"]


def _long_request(engine_profile: EngineProfile, model_profile: ModelProfile) -> dict[str, Any]:
    # Capped by the model profile as every long reply is: an engine that keeps generating after the client
    # left (llama.cpp's server, non-streamed) is then held for the cap, not for thousands of tokens.
    body: dict[str, Any] = {"messages": [{"role": "user", "content": CASE["prompt"]}], "temperature": 0,
                            "max_tokens": model_profile.output_budget(CASE["max_tokens"])}
    if engine_profile.supports_ignore_eos:
        # The generation lasts to max_tokens whatever the model would say: it outlives the cut.
        body["ignore_eos"] = True
    return body


async def _leave(target: EngineTarget, body: dict[str, Any], stream: bool,
                 while_open: Callable[[], Awaitable[Any]] | None = None) -> list[Cut]:
    """Several clients leave at once: streams cut after a few events, or non-streamed requests given up."""
    body = {**body, "model": target.model}
    if stream:
        return await cut_mid_stream(target, body, count=CASE["clients"], after_events=CASE["cut_after_events"],
                                    while_open=while_open)
    return await abandon_before_reply(target, body, count=CASE["clients"], after_s=CASE["abandon_after_s"],
                                      while_open=while_open)


def _assert_all_left(cuts: list[Cut], stream: bool, engine_profile: EngineProfile) -> None:
    if all(cut.answered for cut in cuts) and not engine_profile.supports_ignore_eos:
        # Without ignore_eos the model decides how long it talks; a reply shorter than the wait cancels nothing.
        pytest.skip(f"the engine answered all {len(cuts)} non-streamed requests within {CASE['abandon_after_s']:g}s, "
                    f"before they could be given up, and engine profile {engine_profile.name!r} says it takes no "
                    f"ignore_eos (features.ignore_eos) to make the reply long: nothing was left to cancel")
    failed = [f"client {cut.index}: {cut.problem}" for cut in cuts if not cut.ok]
    how = (f"{len(cuts)} streams to close after {CASE['cut_after_events']} events" if stream else
           f"{len(cuts)} non-streamed requests to give up after {CASE['abandon_after_s']:g}s")
    assert_no_problems(failed, header=f"of {how}, not every one could be left as planned")


def _gauge_names(engine_profile: EngineProfile) -> dict[str, tuple[str, ...]]:
    return {gauge: engine_profile.metric_names(gauge) for gauge in GAUGES}


async def test_running_waiting_and_kv_cache_return_to_idle_after_clients_disconnect(
        acceptance, engine_profile, model_profile, stream, pytestconfig, request) -> None:
    path = engine_profile.features.get("metrics_endpoint")
    names = _gauge_names(engine_profile)
    if not path:
        pytest.skip(f"engine profile {engine_profile.name!r} names no metrics_endpoint: the engine's running "
                    f"requests and KV cache cannot be read")
    if not names["running"] or not names["waiting"]:
        pytest.skip(f"engine profile {engine_profile.name!r} names no running or waiting gauge "
                    f"(features.metric_names): nothing to read at {path}")
    timeout_s: float = pytestconfig.getoption("cancellation_timeout")
    target = acceptance.target
    async with RawStreamingClient(target, pool_size=2) as client:
        first = await read_gauges(client, path, names, time.monotonic())
        if first.problem and "HTTP 404" in first.problem:
            pytest.skip(f"the engine serves no metrics: {first.problem}")
        assert not first.problem, f"the metrics endpoint could not be read: {first.problem}"
        missing = [f"{gauge} (none of {', '.join(names[gauge])})" for gauge, found in first.gauges.items()
                   if found is None]
        assert not missing, (f"GET {path} answered, but without the gauges engine profile {engine_profile.name!r} "
                             f"names (features.metric_names): {'; '.join(missing)}")
        notes = [] if names["kv_cache_usage"] else [
            f"engine profile {engine_profile.name!r} names no KV-cache gauge: running and waiting are checked, "
            f"the KV cache is not"]

        # The idle values: once nothing is running or waiting (a request still finishing, of an earlier
        # check, is given the request timeout to end), the KV usage then is the idle one.
        started = time.monotonic()
        before = await watch_until_idle(lambda: read_gauges(client, path, names, started),
                                        timeout_s=target.timeouts.total, kv_idle=None)
        assert before.idle is not None, (
            f"the engine was not idle before the disconnects, within --request-timeout {target.timeouts.total:g}s: "
            f"{', '.join(not_idle(before.readings[-1], None))} (is another client using it?)")
        kv_idle = before.idle.value("kv_cache_usage")

        busy: list[GaugeReading] = []

        async def look() -> None:
            busy.append(await read_gauges(client, path, names, time.monotonic()))

        cuts = await _leave(target, _long_request(engine_profile, model_profile), stream, look)
        _assert_all_left(cuts, stream, engine_profile)
        left_at = max(cut.closed_at or 0.0 for cut in cuts)
        watch = await watch_until_idle(lambda: read_gauges(client, path, names, left_at), timeout_s=timeout_s,
                                       kv_idle=kv_idle)

    served = {gauge: found.name for gauge, found in first.gauges.items() if found is not None}
    figures = {"seconds_to_idle": watch.seconds_to_idle, "timeout_s": timeout_s, "gauges": served,
               "idle": before.idle.describe(), "while_open": busy[0].describe() if busy else None,
               "after": [reading.describe() for reading in watch.readings], "notes": notes}
    attach_json("cancellation: the engine's gauges before, during and after the disconnects", figures,
                acceptance.redactor)
    if notes:
        allure.attach("\n".join(notes), name="cancellation: not checked", attachment_type=allure.attachment_type.TEXT)
    request.node.user_properties.append(("seconds_to_idle", watch.seconds_to_idle))
    request.node.user_properties.append(("cancellation", json.dumps(figures)))
    how = "streams cut mid-way" if stream else "non-streamed requests given up before their reply"
    last = watch.readings[-1]
    assert watch.idle is not None, (
        f"{len(cuts)} {how}: {timeout_s:g}s later (--cancellation-timeout) the engine still holds them: "
        f"{', '.join(watch.not_idle(last))} ({last.describe()}; before: {before.idle.describe()})")


async def test_engine_keeps_serving_after_clients_disconnect(chat, acceptance, engine_profile, model_profile,
                                                             stream) -> None:
    follow_up = {"messages": [{"role": "user", "content": CASE["follow_up_prompt"]}], "temperature": 0,
                 "max_tokens": CASE["follow_up_max_tokens"]}
    if stream:
        follow_up["stream_options"] = {"include_usage": True}
    before = await chat(follow_up, stream=stream, label="normal request before the disconnects")
    assert before.ok, ("the engine did not answer a normal request before this check's clients left "
                       f"({before.describe_failure()}); an earlier check's disconnects may already have stopped it")
    cuts = await _leave(acceptance.target, _long_request(engine_profile, model_profile), stream)
    attach_json("clients that left", [dataclasses.asdict(cut) for cut in cuts], acceptance.redactor)
    _assert_all_left(cuts, stream, engine_profile)
    how = "streams were cut mid-way" if stream else "non-streamed requests were given up before their reply"
    after = await chat(follow_up, stream=stream, label="normal request after the disconnects")
    assert after.ok and after.reply is not None, (
        f"the engine stopped serving: after {len(cuts)} {how}, a normal request failed: {after.describe_failure()}")
    reply = after.reply
    assert reply.finish_reason is not None and not reply.problems, (
        f"after {len(cuts)} {how}, a normal request got no whole reply: finish_reason {reply.finish_reason!r}, "
        f"problems {reply.problems}; content {short(reply.content)!r}")
