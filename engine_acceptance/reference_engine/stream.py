"""Server-sent events and pacing: how a reply leaves the engine over time.

`Pacer` places output token k at `start + ttft + k * tpot` (deadlines, not summed
sleeps, so timing does not drift under load). `EventStream` writes `data: <json>`
events and turns a client that went away into `ClientGone`, so one dropped
connection ends one handler quietly instead of logging a traceback.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from .config import LatencyModel

__all__ = ["ClientGone", "EventStream", "Pacer", "dump_json"]


def dump_json(obj: Any) -> str:
    """Compact JSON with raw UTF-8, as pydantic's model_dump_json writes it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class ClientGone(Exception):
    """The client closed the connection while the reply was being streamed."""


class Pacer:
    """Waits until the n-th output token would have been generated."""

    def __init__(self, latency: LatencyModel, prompt_tokens: int) -> None:
        self._start = time.monotonic()
        self._first = latency.ttft_seconds(prompt_tokens)
        self._per_token = latency.tpot_ms / 1000.0

    async def reach(self, tokens: int) -> None:
        """Return once `tokens` output tokens exist (the first one after TTFT)."""
        if tokens <= 0:
            return
        deadline = self._start + self._first + (tokens - 1) * self._per_token
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class EventStream:
    """One `text/event-stream` response."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response

    @classmethod
    async def open(cls, request: web.Request, *, close_connection: bool = False) -> EventStream:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"},
        )
        if close_connection:
            # Decided before the headers go out, so the client sees Connection: close.
            response.force_close()
        try:
            await response.prepare(request)
        except ConnectionError as exc:
            raise ClientGone from exc
        return cls(response)

    async def _write(self, payload: str) -> None:
        try:
            await self.response.write(payload.encode("utf-8"))
        except ConnectionError as exc:
            raise ClientGone from exc

    async def send(self, obj: Any) -> None:
        await self._write(f"data: {dump_json(obj)}\n\n")

    async def finish(self, *, send_done: bool) -> None:
        if send_done:
            await self._write("data: [DONE]\n\n")
        try:
            await self.response.write_eof()
        except ConnectionError as exc:
            raise ClientGone from exc
