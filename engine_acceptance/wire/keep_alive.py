"""Whether a connection outlives a streamed reply: the next request on it is answered.

HTTP/1.1 keeps a connection open unless a response says ``Connection: close``, and clients
that pool connections (aiohttp, httpx, requests) send their next request on it. An engine
that closes it after a streamed reply without saying so makes such a client's next request
fail before any byte of an answer ("Server disconnected"), or, when the client happened to
notice the close first, pay a new connection. llama.cpp's llama-server b11312 does this after
every stream although its headers say ``Keep-Alive: timeout=5, max=100``: its chunked content
provider returns false once the stream is done (tools/server/server-http.cpp
``process_handler_response``), which cpp-httplib takes as a failed write.

:func:`next_request_after_stream` sends a streamed request and then another on a pool of
one connection, and says whether the second went out on the first one's connection (an
aiohttp trace of connections created and reused) and how it ended. Nothing is retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from engine_acceptance.wire.types import EngineTarget

__all__ = ["KeepAliveResult", "next_request_after_stream"]


@dataclass(frozen=True)
class KeepAliveResult:
    """The streamed request, and the request sent after it on the same pool of one connection."""

    stream_status: int | None
    stream_error: str | None
    # The streamed reply's Connection and Keep-Alive headers (None: not sent).
    connection_header: str | None
    keep_alive_header: str | None
    # Whether the next request went out on the streamed reply's connection (False: the client found it
    # closed and opened another).
    reused: bool
    next_status: int | None
    next_error: str | None

    def problems(self) -> list[str]:
        if self.stream_error is not None or self.stream_status != 200:
            return [f"the streamed request itself failed ({self.stream_error or f'HTTP {self.stream_status}'}), "
                    "so what follows it on its connection cannot be judged"]
        if (self.connection_header or "").strip().lower() == "close":
            return []  # the engine said it closes the connection: a client opens another
        said = f" (its headers said Keep-Alive: {self.keep_alive_header})" if self.keep_alive_header else ""
        closed = ("the engine closed the connection after a streamed reply without saying so (no 'Connection: "
                  f"close'){said}")
        if not self.reused:
            return [f"{closed}: the client found it closed before its next request and opened another; a client "
                    "that writes sooner sends its request into a closed socket"]
        if self.next_error is not None:
            return [f"{closed}: the next request on it failed: {self.next_error}"]
        if self.next_status != 200:
            return [f"the next request on the streamed reply's connection was answered HTTP {self.next_status}"]
        return []

    def describe(self) -> dict[str, Any]:
        return dict(vars(self))


async def next_request_after_stream(target: EngineTarget, stream_body: Mapping[str, Any],
                                    next_body: Mapping[str, Any], *, path: str = "/chat/completions"
                                    ) -> KeepAliveResult:
    """POST ``stream_body`` (streamed) and read it whole, then POST ``next_body`` on the same pool of one connection."""
    created: list[None] = []
    reused: list[None] = []

    async def on_created(*_args: Any) -> None:
        created.append(None)

    async def on_reused(*_args: Any) -> None:
        reused.append(None)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_created)
    trace.on_connection_reuseconn.append(on_reused)
    timeouts = target.timeouts
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=1, keepalive_timeout=60), trace_configs=[trace],
        timeout=aiohttp.ClientTimeout(total=timeouts.total, sock_connect=timeouts.connect, sock_read=timeouts.idle))
    url = target.v1_url + path
    headers = {"Content-Type": "application/json", **target.auth_headers()}
    async with session:
        try:
            async with session.post(url, json=dict(stream_body), headers=headers) as first:
                await first.read()
                stream_status = first.status
                connection, keep_alive = first.headers.get("Connection"), first.headers.get("Keep-Alive")
        except (aiohttp.ClientError, TimeoutError) as exc:
            return KeepAliveResult(None, f"{type(exc).__name__}: {exc}", None, None, False, None, None)
        next_status = next_error = None
        try:
            async with session.post(url, json=dict(next_body), headers=headers) as second:
                await second.read()
                next_status = second.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            next_error = f"{type(exc).__name__}: {exc}"
    return KeepAliveResult(stream_status, None, connection, keep_alive, bool(reused) and len(created) == 1,
                           next_status, next_error)
