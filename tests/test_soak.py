"""Mixed-traffic soak (seed 001's observation window), off by default.

``pytest -m soak --soak-minutes N`` sends low-rate mixed traffic for N minutes
(``--soak-rate`` 0.5 req/s, ``--soak-image-share`` 0.2, ``--soak-workers`` 4, as seed
001) as streamed chat completions, and reports requests, failures, E2E median and
P95 over time, and the engine's memory and queue figures at the start and the end
when its engine profile names a Prometheus ``metrics_endpoint`` that answers. Any
failed request fails the soak; a rising error rate is named. A model without the
image capability gets text only, and the report says why. Ctrl-C (or SIGTERM) ends
the soak early: the report is written, then the run stops as interrupted.
The pacing and the report are :mod:`engine_acceptance.load.soak.traffic`, run through the
load interface (:mod:`engine_acceptance.load.soak.workload`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import allure
import pytest

from engine_acceptance.sigterm import Terminated

from engine_acceptance.media import library as media
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.media_parts import image_part, user_turn
from engine_acceptance.profiles.profile import DATA_ROOT
from engine_acceptance.progress import Write, terminal_writer
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.load.soak.traffic import SoakSettings
from engine_acceptance.load.soak.workload import SoakWorkload
from engine_acceptance.load.workload import LoadContext
from engine_acceptance.resources import read_yaml
from engine_acceptance.wire.prometheus import parse_prometheus, pick_series
from engine_acceptance.assertions import assert_no_problems

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.soak,
    pytest.mark.skipif("config.getoption('soak_minutes', None) is None",
                       reason="the soak is off by default: give --soak-minutes N"),
]

SOAK_DATA: dict[str, Any] = read_yaml(DATA_ROOT / "soak.yaml")


@pytest.fixture
def soak_write(pytestconfig: pytest.Config) -> Write:
    """A line on the terminal while the soak runs (output capture is bypassed)."""
    return terminal_writer(pytestconfig, "soak ")


def _bodies(prompts: dict[str, Any], model: str, reply_tokens: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": model, "messages": messages, "temperature": 0, "max_tokens": reply_tokens,
                "stream": True, "stream_options": {"include_usage": True}}

    texts = [body([{"role": "user", "content": prompts[stem][case]["prompt"]}]) for stem, case in SOAK_DATA["text"]]
    spec = SOAK_DATA["image"]
    stem, case = spec["prompt"]
    image = body(user_turn(prompts[stem][case]["prompt"], [image_part(media.data_uri(name)) for name in spec["files"]]))
    return texts, image


@contextmanager
def _signals_end(stop: asyncio.Event, fired: list[str]) -> Iterator[None]:
    """While the soak runs, Ctrl-C and SIGTERM end it early (with a report) instead of cutting it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(sig: signal.Signals) -> None:
        fired.append(sig.name)
        stop.set()

    for sig in previous:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)


async def _metrics(client: RawStreamingClient, path: str) -> tuple[dict[str, float] | None, str | None]:
    exchange = await client.get(path)
    if exchange.error_kind is not None or exchange.status != 200:
        return None, f"GET {path}: {exchange.describe_failure() if exchange.error_kind else f'HTTP {exchange.status}'}"
    text = exchange.body if isinstance(exchange.body, str) else exchange.raw.decode("utf-8", "replace")
    every = parse_prometheus(text)
    chosen = pick_series(every, SOAK_DATA["metrics"])
    if not chosen:
        return {}, f"GET {path}: none of its {len(every)} series is a memory or queue figure (fixtures/soak.yaml)"
    return chosen, None


async def test_mixed_traffic_soak_has_no_failed_request_and_no_rising_error_rate(
        suite_options, acceptance, engine_profile, model_profile, prompts, soak_write, request) -> None:
    texts, image = _bodies(prompts, acceptance.engine.model, model_profile.reply_tokens)

    async def send(index: int, kind: str) -> tuple[float | None, str | None]:
        # On the client opened below for the soak's traffic and the engine's metrics around it.
        body = image if kind == "image" else texts[index % len(texts)]
        exchange = await client.post("/v1/chat/completions", body, stream=True)
        if not exchange.ok or exchange.reply is None:
            return exchange.elapsed_s, exchange.describe_failure()
        if exchange.reply.problems:
            return exchange.elapsed_s, "stream: " + "; ".join(exchange.reply.problems)
        return exchange.elapsed_s, None

    stop, fired = asyncio.Event(), []
    soak = SoakWorkload(LoadContext(acceptance.target, progress=soak_write, send=send, stop=stop))
    settings: SoakSettings = soak.settings(suite_options)
    notes = []
    if settings.image_share > 0 and not model_profile.has("image"):
        notes.append(f"text only, no image requests: {acceptance.skip_reason('image')}")
        settings = dataclasses.replace(settings, image_share=0.0)
    metrics_path = engine_profile.features.get("metrics_endpoint")

    async with RawStreamingClient(acceptance.target, pool_size=settings.workers + 1) as client:
        metrics_start = metrics_end = None
        metrics_note = (f"engine profile {engine_profile.name!r} names no metrics_endpoint: no memory or queue "
                        f"figures") if not metrics_path else None
        if metrics_path:
            metrics_start, metrics_note = await _metrics(client, metrics_path)
        soak_write(f"{settings.minutes:g} min at {settings.rate_per_s:g} req/s, {settings.image_share:.0%} image, "
                   f"up to {settings.workers} workers (Ctrl-C ends it early with a report)")
        with _signals_end(stop, fired):
            runs = await soak.run(settings, soak.schedule(settings))
        if metrics_path and metrics_start is not None:
            metrics_end, end_note = await _metrics(client, metrics_path)
            metrics_note = metrics_note or end_note

    report = soak.result(settings, runs, ended_by=fired[0] if fired else None, metrics_start=metrics_start,
                         metrics_end=metrics_end, metrics_note=metrics_note, notes=notes).report
    lines = report.table_lines()
    for line in lines:
        soak_write(line)
    allure.attach("\n".join(lines), name="soak: requests, failures and E2E over time",
                  attachment_type=allure.attachment_type.TEXT)
    attach_json("soak: every request", report.as_dict(), acceptance.redactor)
    request.node.user_properties.append(("soak", json.dumps(report.summary())))
    if fired:
        # The report is written; now stop the run the way the signal asked.
        if fired[0] == "SIGTERM":
            raise Terminated("SIGTERM received during the soak: the run was stopped from outside")
        raise KeyboardInterrupt("Ctrl-C during the soak")
    problems = report.problems()
    assert_no_problems(problems)
