"""Server-sent events and pacing: how a reply leaves the engine over time.

`Pacer` places output token k at `start + ttft + k * tpot` (deadlines, not summed
sleeps, so timing does not drift under load); with a batch slowdown the per-token
time grows with the number of requests generating at once (`BatchLoad`, counted by
the server). `EventStream` writes `data: <json>`
events and turns a client that went away into `ClientGone`, so one dropped
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

__all__ = ["EVENT_STREAM_TYPE", "BatchLoad", "ClientGone", "EventStream", "Pacer", "dump_json",
           "split_inside_character"]

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


class BatchLoad:
    """How many generation requests the engine serves right now (its batch size)."""

    def __init__(self) -> None:
        self.active = 0


class Pacer:
    """Waits until the n-th output token would have been generated."""

    def __init__(self, latency: LatencyModel, prompt_tokens: int, load: BatchLoad | None = None,
                 start: float | None = None) -> None:
        self._latency = latency
        self._load = load
        # Deadline of the newest token reached so far; token 1 comes TTFT after the
        # request arrived (`start`, a time.monotonic() value), not after it was parsed.
        self._tokens = 1
        self._deadline = (time.monotonic() if start is None else start) + latency.ttft_seconds(prompt_tokens)

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
        delay = self._deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class EventStream:
    """One `text/event-stream` response."""

    def __init__(self, response: web.StreamResponse, *, stamp: bool = False, fault: Any = None) -> None:
        self.response = response
        self.stamp = stamp
        # A faults.EventWriter when a transport fault is injected (it writes, stalls, resets...).
        self.fault = fault

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
        return cls(response, stamp=stamp, fault=fault)

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

    async def finish(self, *, send_done: bool) -> None:
        if send_done:
            await self._write("data: [DONE]\n\n")
        try:
            await self.response.write_eof()
        except ConnectionError as exc:
            raise ClientGone from exc
