"""Clients that leave: requests cut mid-stream or abandoned before their reply, and the wait
for the engine to return to idle afterwards (``tests/test_cancellation.py``).

A client that disconnects must end its request on the engine: vLLM aborts it (a streaming
response whose client is gone is closed; a non-streamed one is cancelled by its
``with_cancellation`` listener), SGLang too (``is_disconnected`` checks). What is left when
it does not is seen in the engine's Prometheus gauges: requests still counted running or
waiting, KV cache still held. So the cuts here are real TCP closes, done the way an
application that gives up does it (the response is closed after a few events; a
non-streamed request's task is cancelled), each on a connection of its own that is never
reused, and :func:`watch_until_idle` reads the gauges the engine profile names until they
are back at their idle values or a timeout passes. Nothing here knows about pytest; the
waiting is tested with a fake reader and clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from engine_acceptance.wire import http
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.wire.prometheus import Gauge, parse_prometheus, read_gauge
from engine_acceptance.wire.sse import SSEParser

__all__ = ["GAUGES", "Cut", "GaugeReading", "IdleWatch", "abandon_before_reply", "cut_mid_stream",
           "read_gauges", "watch_until_idle"]

# The gauges read, as the engine profile names them (features.metric_names), and how several
# series of one are combined: counts add up over engines, a usage fraction does not.
GAUGES: dict[str, str] = {"running": "sum", "waiting": "sum", "kv_cache_usage": "max"}
# A KV usage this close to its idle value is idle: a fraction printed with float noise.
KV_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Cut:
    """One request the client left: how far it got, and whether it could be left as planned."""

    index: int
    status: int | None = None
    events: int = 0
    # Why it could not be cut as planned (refused, never answered, ended before the cut); None: cut.
    problem: str | None = None
    # time.monotonic() when the client closed the connection.
    closed_at: float | None = None
    # A non-streamed request answered before it could be abandoned (the reply was short).
    answered: bool = False

    @property
    def ok(self) -> bool:
        return self.problem is None


def _session(target: EngineTarget) -> aiohttp.ClientSession:
    # A connection per request, closed with it (http.session), so a cut is a TCP close the engine sees.
    return http.session(timeout=http.deadline_timeout(target.timeouts), headers=target.auth_headers())


def _url(target: EngineTarget) -> str:
    return target.base_url.rstrip("/") + "/v1/chat/completions"


async def _cut_one(session: aiohttp.ClientSession, target: EngineTarget, body: dict[str, Any], index: int,
                   after_events: int, ready: asyncio.Event, close: asyncio.Event) -> Cut:
    idle = target.timeouts.idle
    events = 0
    status: int | None = None
    try:
        # A streamed reply's status and headers come before the prefill (client.py's table): idle bounds them.
        async with asyncio.timeout(idle):
            response = await session.post(_url(target), json=body)
        status = response.status
        try:
            if status != 200:
                text = (await response.read())[:300].decode("utf-8", "replace")
                return Cut(index, status, problem=f"HTTP {status}: {text}")
            parser = SSEParser()
            while events < after_events:
                # The first event waits for the queue and the prefill (the total bounds it), later ones idle.
                async with asyncio.timeout(idle if events else target.timeouts.total):
                    chunk = await response.content.readany()
                if not chunk:
                    return Cut(index, status, events, problem=f"the stream ended after {events} event(s), before "
                                                              f"the cut after {after_events}")
                events += sum(1 for event in parser.feed(chunk, time.monotonic()) if not event.is_done)
            # Every stream is open and generating: the caller looks at the engine, then all are closed at once.
            ready.set()
            await close.wait()
        finally:
            ready.set()
            # Closing a response before its end closes its connection: the disconnect.
            response.close()
        return Cut(index, status, events, closed_at=time.monotonic())
    except (asyncio.TimeoutError, TimeoutError):
        where = "no response" if status is None else f"{events} event(s)"
        return Cut(index, status, events, problem=f"timed out waiting for the stream ({where} so far; "
                                                  f"--idle-timeout {idle:g}s, --request-timeout "
                                                  f"{target.timeouts.total:g}s)")
    except aiohttp.ClientError as exc:
        return Cut(index, status, events, problem=f"{type(exc).__name__}: {exc}")


async def cut_mid_stream(target: EngineTarget, body: dict[str, Any], *, count: int, after_events: int,
                         while_open: Callable[[], Awaitable[Any]] | None = None) -> list[Cut]:
    """Open ``count`` streams of ``body`` at once; once each has ``after_events`` events (or failed),
    await ``while_open()`` (a look at the engine while they generate), then close them all abruptly."""
    async with _session(target) as session:
        readies = [asyncio.Event() for _ in range(count)]
        close = asyncio.Event()
        tasks = [asyncio.ensure_future(_cut_one(session, target, {**body, "stream": True}, index, after_events,
                                                readies[index], close)) for index in range(count)]
        try:
            await asyncio.gather(*(ready.wait() for ready in readies))
            if while_open is not None:
                await while_open()
        finally:
            close.set()
        return list(await asyncio.gather(*tasks))


async def abandon_before_reply(target: EngineTarget, body: dict[str, Any], *, count: int, after_s: float,
                               while_open: Callable[[], Awaitable[Any]] | None = None) -> list[Cut]:
    """Send ``count`` non-streamed requests at once; after ``after_s`` seconds (and ``while_open()``, a
    look at the engine while they generate), give each up unanswered.

    A request answered before that could not be abandoned: its cut says so.
    """
    async with _session(target) as session:
        async def send() -> int:
            async with session.post(_url(target), json={**body, "stream": False}) as response:
                await response.read()
                return response.status

        tasks = [asyncio.ensure_future(send()) for _ in range(count)]
        await asyncio.wait(tasks, timeout=after_s)
        if while_open is not None:
            await while_open()
        cuts = []
        for index, task in enumerate(tasks):
            if task.done():
                error = task.exception()
                problem = (f"{type(error).__name__}: {error}" if error is not None else
                           f"answered (HTTP {task.result()}) within {after_s:g}s, before it could be abandoned")
                cuts.append(Cut(index, None if error is not None else task.result(), problem=problem,
                                answered=error is None))
                continue
            # Cancelling a request in flight closes its connection: the disconnect.
            task.cancel()
            cuts.append(Cut(index, closed_at=time.monotonic()))
        await asyncio.gather(*tasks, return_exceptions=True)
        return cuts


@dataclass(frozen=True)
class GaugeReading:
    """One read of the engine's gauges; ``at_s``: when its reply came, seconds after the disconnects."""

    at_s: float
    gauges: Mapping[str, Gauge | None] = field(default_factory=dict)
    # Why the endpoint could not be read (a failed request, a non-200).
    problem: str | None = None

    def value(self, gauge: str) -> float | None:
        found = self.gauges.get(gauge)
        return None if found is None else found.value

    def describe(self) -> str:
        if self.problem:
            return f"at {self.at_s:.1f}s: {self.problem}"
        shown = ", ".join(f"{found.name} {found.value:g}" for found in self.gauges.values() if found is not None)
        return f"at {self.at_s:.1f}s: {shown}"


async def read_gauges(client: RawStreamingClient, path: str, names: Mapping[str, Sequence[str]],
                      since: float) -> GaugeReading:
    """The gauges ``names`` lists (gauge -> candidate names), read once at ``path``."""
    exchange = await client.get(path)
    at_s = time.monotonic() - since
    if exchange.error_kind is not None or exchange.status != 200:
        return GaugeReading(at_s, problem=f"GET {path}: {exchange.describe_failure()}")
    text = exchange.body if isinstance(exchange.body, str) else exchange.raw.decode("utf-8", "replace")
    series = parse_prometheus(text)
    return GaugeReading(at_s, {gauge: read_gauge(series, gauge_names, combine=GAUGES[gauge])
                               for gauge, gauge_names in names.items() if gauge_names})


@dataclass(frozen=True)
class IdleWatch:
    """What the gauges did after the disconnects: every reading, and the first idle one (None: never)."""

    timeout_s: float
    readings: list[GaugeReading]
    idle: GaugeReading | None
    kv_idle: float | None

    @property
    def seconds_to_idle(self) -> float | None:
        return None if self.idle is None else self.idle.at_s

    def not_idle(self, reading: GaugeReading) -> list[str]:
        """Why one reading is not idle, in words (empty: idle)."""
        return not_idle(reading, self.kv_idle)


def not_idle(reading: GaugeReading, kv_idle: float | None) -> list[str]:
    """Why ``reading`` is not idle: requests running or waiting, KV usage above ``kv_idle``."""
    if reading.problem:
        return [reading.problem]
    why = []
    for gauge in ("running", "waiting"):
        found = reading.gauges.get(gauge)
        if found is not None and found.value > 0:
            why.append(f"{found.name} {found.value:g}")
    kv = reading.gauges.get("kv_cache_usage")
    if kv is not None and kv_idle is not None and kv.value > kv_idle + KV_TOLERANCE:
        why.append(f"{kv.name} {kv.value:g} (idle: {kv_idle:g})")
    return why


async def watch_until_idle(read: Callable[[], Awaitable[GaugeReading]], *, timeout_s: float, kv_idle: float | None,
                           interval_s: float = 0.2, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
                           ) -> IdleWatch:
    """Read the gauges every ``interval_s`` until a reading is idle or one arrives past ``timeout_s``.

    A reading counts when its reply came within the timeout (``at_s``), so a slow read that
    straddles the deadline cannot pass a leftover request off as gone.
    """
    readings: list[GaugeReading] = []
    while True:
        reading = await read()
        readings.append(reading)
        if reading.at_s > timeout_s:
            return IdleWatch(timeout_s, readings, None, kv_idle)
        if not not_idle(reading, kv_idle):
            return IdleWatch(timeout_s, readings, reading, kv_idle)
        await sleep(interval_s)
