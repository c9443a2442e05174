"""Transport faults: the reference engine misbehaving on the wire, on purpose.

The defects in `defects.py` make the engine answer wrongly; these make it fail the
way broken or overloaded deployments fail in the field: a stream that stops
mid-way and hangs, a request accepted and never answered, a connection reset
mid-stream, an SSE event whose JSON is cut, an HTTP 200 carrying an error, a 503
storm, a reply of hundreds of megabytes, a slow drip of one byte per second. They
prove that the suite never hangs, crashes or passes by accident on such an engine:
each affected check fails within its timeout, naming the fault.

Faults live in the engine rather than in a proxy in front of it because the
engine knows where "mid-stream" is (after the N-th event of a real reply, not the
N-th TCP read), is selected with the same `--inject NAME` as every defect, and
keeps `/health` and `/v1/models` honest, so readiness passes and only generation
misbehaves. A reset is a real TCP RST (SO_LINGER 0), a hang is a real open socket.

Only `POST /v1/chat/completions` is affected (what the functional checks send);
completions, tokenize and the info endpoints stay correct. `FaultInjector.middleware`
handles the faults decided before a reply starts; `FaultInjector.stream_writer`
hands `EventStream` a writer that tampers with the events of a streamed reply.
`auth-ignored` (an engine that serves requests without its API key) lives here
too, because it is the server's front door, not the model, that is broken.

This module imports nothing from the engine's own modules: `defect_names.py` imports
`FAULTS` from here, and `config` imports `defect_names`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

__all__ = [
    "CHAT_PATH",
    "FAULTS",
    "HANG_LIMIT_S",
    "HUGE_REPLY_BYTES",
    "EventWriter",
    "FaultInjector",
]

log = logging.getLogger("engine_acceptance.reference_engine.faults")

FAULTS: dict[str, str] = {
    "stream-stall": (
        "streamed chat: the role chunk and the first piece arrive, then nothing more, on a connection"
        " kept open (a stream that stops mid-way and hangs)"
    ),
    "never-answer": "chat requests are accepted and read, and never answered: no status, no byte, the socket stays open",
    "stream-reset": "streamed chat: after the role chunk and the first piece the TCP connection is reset (RST)",
    "sse-bad-json": "streamed chat: the second event's JSON is cut in half; the rest of the stream is correct",
    "error-body-200": (
        "chat requests get HTTP 200 carrying an error body instead of a completion (streamed: the role chunk,"
        " then an error event and [DONE])"
    ),
    "503-storm": "every chat request is answered 503 Service Unavailable with Retry-After: 1",
    "huge-reply": (
        "chat replies are about 512 MiB: one endless content string (non-streamed, chunked, no Content-Length)"
        " or 64 KiB content events (streamed), produced lazily until the client stops reading"
    ),
    "slow-drip": "chat replies trickle out one byte per second, non-streamed and streamed, so no gap is ever idle",
    "auth-ignored": "with an API key configured, requests without the key or with a wrong one are served anyway",
    "degrading-503": (
        "after its first 20 chat requests, every second chat request is answered 503 Service Unavailable"
        " (a deployment that degrades during a long run: what a soak exists to see)"
    ),
}

CHAT_PATH = "/v1/chat/completions"
# degrading-503 serves this many chat requests well before it starts failing.
DEGRADE_AFTER = 20
# A hung handler gives up after this long even if the client never leaves, so a
# forgotten engine does not hold sockets forever.
HANG_LIMIT_S = 3600.0
# How often a hung or dripping handler looks whether its client has gone.
_CLIENT_POLL_S = 0.25
HUGE_REPLY_BYTES = 512 * 1024 * 1024
_HUGE_BLOCK = 1024 * 1024
_HUGE_EVENT_CONTENT = 64 * 1024
DRIP_INTERVAL_S = 1.0
# Events of a streamed reply sent intact before a stall or a reset: the role
# chunk and the first piece of output, so the fault happens mid-way.
_EVENTS_BEFORE_CUT = 2
# The event (0-based) whose JSON sse-bad-json cuts: the first piece of output.
_BAD_JSON_EVENT = 1
# Pause between the last intact event and the reset, so the client has read them
# (a RST discards what is still unread in the receiver's buffer).
_RESET_PAUSE_S = 0.2

ErrorBody = Callable[..., dict[str, Any]]
ResponseWrite = Callable[[bytes], Awaitable[None]]


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _hang(request: web.Request, fault: str) -> None:
    """Keep the connection open and silent until the client leaves (or HANG_LIMIT_S)."""
    log.info("fault %s: holding %s %s open without a byte", fault, request.method, request.path)
    deadline = time.monotonic() + HANG_LIMIT_S
    while not _client_gone(request) and time.monotonic() < deadline:
        await asyncio.sleep(_CLIENT_POLL_S)
    log.info("fault %s: client left after the hang", fault)


def _reset(request: web.Request, fault: str) -> None:
    """Close the connection with a TCP RST instead of a FIN."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # Linger on, timeout 0: close() discards the send buffer and sends RST.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    log.info("fault %s: resetting the connection of %s %s", fault, request.method, request.path)
    transport.abort()


async def _drip(request: web.Request, write: ResponseWrite, data: bytes) -> None:
    """Send `data` one byte per DRIP_INTERVAL_S; raises ConnectionError once the client left."""
    for index in range(len(data)):
        if _client_gone(request):
            raise ConnectionResetError("slow-drip: the client left")
        await write(data[index:index + 1])
        await asyncio.sleep(DRIP_INTERVAL_S)


class StreamCut(ConnectionError):
    """The fault ended the stream itself; the handler stops as if the client had left."""


class EventWriter:
    """Writes the events of one streamed chat reply the way the active fault wants.

    `EventStream` calls `write(response, data)` for each event (``data: ...\\n\\n``).
    Raising a ConnectionError ends the handler's stream quietly (it becomes ClientGone).
    """

    def __init__(self, fault: str, request: web.Request, error_body: ErrorBody) -> None:
        self.fault = fault
        self.request = request
        self.error_body = error_body
        self.events = 0

    async def write(self, response: web.StreamResponse, data: bytes) -> None:
        index = self.events
        self.events += 1
        fault = self.fault
        if fault in ("stream-stall", "stream-reset") and index == _EVENTS_BEFORE_CUT:
            if fault == "stream-stall":
                await _hang(self.request, fault)
                raise StreamCut("stream-stall: the client gave up")
            await asyncio.sleep(_RESET_PAUSE_S)
            _reset(self.request, fault)
            raise StreamCut("stream-reset: connection reset")
        if fault == "sse-bad-json" and index == _BAD_JSON_EVENT:
            payload = data.removeprefix(b"data: ").rstrip(b"\n")
            log.info("fault %s: cutting the JSON of event %d", fault, index)
            await response.write(b"data: " + payload[: len(payload) // 2] + b"\n\n")
            return
        if fault == "error-body-200" and index == 1:
            # What vLLM sends when generation fails after the stream began.
            error = self.error_body("The engine failed while generating: CUDA error: an illegal memory access",
                                    err_type="InternalServerError", status=500)
            log.info("fault %s: error event instead of output", fault)
            await response.write(b"data: " + _dump(error) + b"\n\ndata: [DONE]\n\n")
            await response.write_eof()
            raise StreamCut("error-body-200: the stream ended with an error event")
        if fault == "huge-reply" and index == 1:
            # The endless content comes first; should a client read all of it, the real
            # reply follows, so the stream stays valid.
            await self._endless_content(response, data)
        if fault == "slow-drip":
            await _drip(self.request, response.write, data)
            return
        await response.write(data)

    async def _endless_content(self, response: web.StreamResponse, first: bytes) -> None:
        """Content events of 64 KiB each until HUGE_REPLY_BYTES, modelled on the real event."""
        try:
            chunk = json.loads(first.removeprefix(b"data: "))
        except ValueError:
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}
        chunk["choices"] = [{"index": 0, "delta": {"content": "x" * _HUGE_EVENT_CONTENT}, "finish_reason": None}]
        event = b"data: " + _dump(chunk) + b"\n\n"
        log.info("fault huge-reply: streaming %d bytes of content events", HUGE_REPLY_BYTES)
        sent = 0
        while sent < HUGE_REPLY_BYTES:
            await response.write(event)
            sent += len(event)


class FaultInjector:
    """The active transport faults of one engine (those of `FAULTS` among its defects)."""

    def __init__(self, active: frozenset[str], *, error_body: ErrorBody) -> None:
        self.active = frozenset(name for name in active if name in FAULTS)
        self.error_body = error_body
        # Chat requests seen so far (degrading-503 fails from DEGRADE_AFTER on).
        self.chat_requests = 0

    def ignores_api_key(self) -> bool:
        return "auth-ignored" in self.active

    def _fault_for(self, request: web.Request) -> str | None:
        if request.method != "POST" or request.path != CHAT_PATH:
            return None
        # More than one transport fault at once has no meaning; the first by name wins.
        return min(self.active - {"auth-ignored"}, default=None)

    def stream_writer(self, request: web.Request) -> EventWriter | None:
        """The writer for a streamed chat reply, or None when no stream fault is active."""
        fault = self._fault_for(request)
        if fault in ("stream-stall", "stream-reset", "sse-bad-json", "error-body-200", "huge-reply", "slow-drip"):
            return EventWriter(fault, request, self.error_body)
        return None

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        fault = self._fault_for(request)
        if fault is None:
            return await handler(request)
        if fault == "degrading-503":
            self.chat_requests += 1
            if self.chat_requests <= DEGRADE_AFTER or self.chat_requests % 2:
                return await handler(request)
            log.info("fault degrading-503: 503 for chat request %d", self.chat_requests)
            body = self.error_body("Service Unavailable: the engine is overloaded, try again later",
                                   err_type="ServiceUnavailableError", status=503)
            return web.json_response(body, status=503, headers={"Retry-After": "1"})
        # aiohttp keeps the body once read, so the handler can still read it.
        streamed = _is_streamed(await request.read())
        if fault == "503-storm":
            log.info("fault 503-storm: 503 for %s %s", request.method, request.path)
            body = self.error_body("Service Unavailable: the engine is overloaded, try again later",
                                   err_type="ServiceUnavailableError", status=503)
            return web.json_response(body, status=503, headers={"Retry-After": "1"})
        if fault == "never-answer":
            await _hang(request, fault)
            # Whatever is returned now goes to a client that has left.
            return web.Response(status=504)
        if streamed:
            return await handler(request)
        if fault == "error-body-200":
            log.info("fault error-body-200: HTTP 200 with an error body")
            body = self.error_body("The engine failed while generating: CUDA error: an illegal memory access",
                                   err_type="InternalServerError", status=500)
            return web.json_response(body, status=200)
        if fault == "huge-reply":
            return await _huge_body(request)
        if fault == "slow-drip":
            return await _drip_response(request, await handler(request))
        return await handler(request)


def _is_streamed(raw: bytes) -> bool:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(body, dict) and body.get("stream") is True


async def _huge_body(request: web.Request) -> web.StreamResponse:
    """A valid chat.completion of HUGE_REPLY_BYTES, made as it is sent (never held in memory)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    head = (b'{"id":"chatcmpl-huge","object":"chat.completion","created":0,"model":"reference-model",'
            b'"choices":[{"index":0,"message":{"role":"assistant","content":"')
    tail = b'"},"finish_reason":"stop"}]}'
    block = b"x" * _HUGE_BLOCK
    log.info("fault huge-reply: sending a %d-byte body", HUGE_REPLY_BYTES)
    try:
        await response.prepare(request)
        await response.write(head)
        for _ in range(HUGE_REPLY_BYTES // _HUGE_BLOCK):
            await response.write(block)
        await response.write(tail)
        await response.write_eof()
    except ConnectionError:
        log.info("fault huge-reply: the client stopped reading")
    return response


async def _drip_response(request: web.Request, answer: web.StreamResponse) -> web.StreamResponse:
    """Send the handler's real answer, one byte per second."""
    body = answer.body if isinstance(answer, web.Response) and isinstance(answer.body, bytes) else b""
    response = web.StreamResponse(status=answer.status,
                                  headers={"Content-Type": answer.headers.get("Content-Type", "application/json")})
    log.info("fault slow-drip: %d bytes at one per %.0fs", len(body), DRIP_INTERVAL_S)
    try:
        await response.prepare(request)
        await _drip(request, response.write, body)
        await response.write_eof()
    except ConnectionError:
        log.info("fault slow-drip: the client left")
    return response
