"""Server-sent events and pacing: how a reply leaves the engine over time.

`Pacer` places output token k at `start + ttft + k * tpot` (deadlines, not summed
sleeps, so timing does not drift under load); with a batch slowdown the per-token
time grows with the number of requests generating at once (`BatchLoad`, counted by
the server, which also counts the KV cache each request holds: `KvHold`). `EventStream`
writes `data: <json>` events and turns a client that went away into `ClientGone`, so one dropped
connection ends one handler quietly instead of logging a traceback. An event that
holds a multi-byte character is written in two parts cut inside that character, as
vLLM's and SGLang's writes reach clients cut anywhere: the suite's clients must
reassemble it (`split_inside_character`).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from .config import LatencyModel
from .spec_decode import SpecDecodeCounts

__all__ = ["DEFAULT_KV_CAPACITY_TOKENS", "EVENT_STREAM_TYPE", "BatchLoad", "ClientGone", "EventStream", "KvHold",
           "Pacer", "dump_json", "split_inside_character"]

EVENT_STREAM_TYPE = "text/event-stream; charset=utf-8"


def dump_json(obj: Any) -> str:
    """Compact JSON with raw UTF-8, as pydantic's model_dump_json writes it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def split_inside_character(data: bytes) -> tuple[bytes, ...]:
    """`data` cut in two just after the lead byte of its first multi-byte UTF-8 character; whole without one."""
    for at, byte in enumerate(data):
        if byte >= 0xC0:  # 0b11xxxxxx: the lead byte of a 2- to 4-byte character
            return data[: at + 1], data[at + 1:]
    return (data,)


class ClientGone(Exception):
    """The client closed the connection while the reply was being streamed."""


# The KV cache the reference engine pretends to have, in tokens (prompt and generated tokens of the
# requests it holds count against it): large enough that the suite's requests never fill it.
DEFAULT_KV_CAPACITY_TOKENS = 1 << 20


class KvHold:
    """The KV cache one request holds: its prompt's tokens and those generated so far."""

    def __init__(self) -> None:
        self.tokens = 0


class BatchLoad:
    """What the engine's scheduler holds right now: requests running (its batch size), requests
    waiting, and the KV cache they occupy. Served as gauges at ``/metrics``; with ``spec`` the
    speculative-decoding counters too, counted as output tokens are generated (``spec_decode.py``)."""

    def __init__(self, kv_capacity_tokens: int = DEFAULT_KV_CAPACITY_TOKENS,
                 spec: SpecDecodeCounts | None = None) -> None:
        self.active = 0
        self.waiting = 0
        self.kv_capacity_tokens = kv_capacity_tokens
        self.spec = spec
        self._holds: set[KvHold] = set()

    def hold(self) -> KvHold:
        """A new request's KV cache, counted until :meth:`release`."""
        held = KvHold()
        self._holds.add(held)
        return held

    def release(self, held: KvHold) -> None:
        self._holds.discard(held)

    @property
    def kv_tokens(self) -> int:
        return sum(held.tokens for held in self._holds)

    def kv_usage(self) -> float:
        """The share of the KV cache in use, 0 to 1 (vLLM's kv_cache_usage_perc, SGLang's token_usage)."""
        return min(self.kv_tokens / self.kv_capacity_tokens, 1.0)


class Pacer:
    """Waits until the n-th output token would have been generated."""

    def __init__(self, latency: LatencyModel, prompt_tokens: int, load: BatchLoad | None = None,
                 start: float | None = None, hold: KvHold | None = None, cached_tokens: int = 0) -> None:
        self._latency = latency
        self._load = load
        # The request's KV cache grows by one token per token generated, from its prompt's.
        self._hold = hold
        self._prompt_tokens = prompt_tokens
        if hold is not None:
            hold.tokens = prompt_tokens
        # Deadline of the newest token reached so far; token 1 comes TTFT after the
        # request arrived (`start`, a time.monotonic() value), not after it was parsed.
        self._tokens = 1
        # Output tokens counted in the speculative-decoding counters so far.
        self._counted = 0
        # Tokens found in the prefix cache are not prefilled again: only the rest costs prefill time.
        self._deadline = (time.monotonic() if start is None else start) + latency.ttft_seconds(
            prompt_tokens - cached_tokens)

    async def reach(self, tokens: int) -> None:
        """Return once `tokens` output tokens exist (the first one after TTFT)."""
        if tokens <= 0:
            return
        if tokens > self._tokens:
            # Tokens up to `tokens` are priced at the batch size seen now: a step's
            # cost is known when the step runs, as in a real engine.
            active = self._load.active if self._load is not None else 1
            self._deadline += (tokens - self._tokens) * self._latency.tpot_seconds(active)
            self._tokens = tokens
        if self._hold is not None:
            self._hold.tokens = max(self._hold.tokens, self._prompt_tokens + tokens)
        if self._load is not None and self._load.spec is not None and tokens > self._counted:
            # Counted as the tokens are planned, before they are sent: a client that has read the reply
            # finds them in /metrics.
            self._load.spec.generated(tokens - self._counted)
            self._counted = tokens
        delay = self._deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class EventStream:
    """One `text/event-stream` response."""

    def __init__(self, response: web.StreamResponse, *, stamp: bool = False, fault: Any = None,
                 transport: asyncio.Transport | None = None) -> None:
        self.response = response
        self.stamp = stamp
        # A faults.EventWriter when a transport fault is injected (it writes, stalls, resets...).
        self.fault = fault
        # The request's connection, for a stream that drops it when done (drop_connection).
        self.transport = transport

    @classmethod
    async def open(cls, request: web.Request, *, close_connection: bool = False, stamp: bool = False,
                   fault: Any = None, content_type: str = EVENT_STREAM_TYPE) -> EventStream:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": content_type, "Cache-Control": "no-cache"},
        )
        if close_connection:
            # Decided before the headers go out, so the client sees Connection: close.
            response.force_close()
        try:
            await response.prepare(request)
        except ConnectionError as exc:
            raise ClientGone from exc
        return cls(response, stamp=stamp, fault=fault, transport=request.transport)

    async def _write(self, payload: str) -> None:
        try:
            if self.fault is not None:
                await self.fault.write(self.response, payload.encode("utf-8"))
            else:
                for part in split_inside_character(payload.encode("utf-8")):
                    await self.response.write(part)
        except ConnectionError as exc:
            raise ClientGone from exc

    async def send(self, obj: Any) -> None:
        if self.stamp:
            obj = {**obj, "engine_sent_at": time.monotonic()}
        await self._write(f"data: {dump_json(obj)}\n\n")

    async def send_named(self, name: str, obj: Any) -> None:
        """An event with an ``event:`` line, as the Responses API streams them."""
        if self.stamp:
            obj = {**obj, "engine_sent_at": time.monotonic()}
        await self._write(f"event: {name}\ndata: {dump_json(obj)}\n\n")

    async def finish(self, *, send_done: bool, drop_connection: bool = False) -> None:
        """The stream's end; ``drop_connection`` then closes the connection without having said
        ``Connection: close`` (defect ``stream-drops-connection``, as llama-server b11312 does)."""
        if send_done:
            await self._write("data: [DONE]\n\n")
        try:
            await self.response.write_eof()
        except ConnectionError as exc:
            raise ClientGone from exc
        if drop_connection and self.transport is not None:
            self.transport.close()
