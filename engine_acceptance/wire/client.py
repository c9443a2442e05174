"""The two HTTP clients: the openai SDK for functional checks, aiohttp for timing.

The SDK's client is the only httpx in the suite: there the SDK and its transport are the
point. Every other request of the suite's own goes through aiohttp, its sessions opened
by :mod:`engine_acceptance.wire.http`.

Functional checks speak through ``openai.AsyncOpenAI`` because applications do;
it never retries (``max_retries=0``): a gate that retries silently hides the
failures it exists to find. Streamed bytes are read raw from the SDK's response
and parsed by :mod:`engine_acceptance.wire.sse`, so both clients rebuild replies with
the same code (:mod:`engine_acceptance.wire.reassembly`) and a missing ``[DONE]`` is
visible. Neither client raises on an HTTP error or a bad stream: the
:class:`Exchange` says what happened and keeps the raw bytes (capped).

A broken engine must not hang or exhaust the suite either: each timeout that
fires is named with what had arrived by then (a request never answered, a
stream that stalled, a slow drip stopped by the total timeout); a reply larger
than ``MAX_REPLY_BYTES`` is abandoned, never held whole; and after a failure at
the connection level :mod:`engine_acceptance.wire.health` decides whether the
engine is gone, after which nothing more is sent to it.

Which limit bounds which silence (both clients alike). Silence is only a fault
where the engine has something to send; where it is still working (queueing,
prefilling, generating a reply that is sent whole) only the total bounds it:

==========================================  =======================================
wait                                        bounded by
==========================================  =======================================
connecting                                  ``connect`` (``--connect-timeout``)
streamed: the response status and headers   ``idle``: vLLM and SGLang send them as
                                            soon as the request is accepted, before
                                            the prefill; nothing means never answered
streamed: the first event after them        ``total`` only: it waits for the queue
                                            and the prefill of the whole prompt
streamed: between reads after that          ``idle`` (``--idle-timeout``): a stall
non-streamed: the response (status, body)   ``total`` only: sent whole when
                                            generation ends, however long that takes
non-streamed: between reads of the body     ``idle``: the reply had begun
every request, from sending to the end      ``total`` (``--request-timeout``)
==========================================  =======================================

httpx's and aiohttp's own read timeouts count every read alike, so they are left
at the total; the idle timer is the client's own (``asyncio.timeout`` moved on at
each read, see :func:`_silence`), and a timeout's message says which limit fired.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
from typing import Any

import aiohttp
import httpx2 as httpx
import openai

from engine_acceptance.wire import health as engine_health
from engine_acceptance.wire import http
from engine_acceptance.wire.reassembly import reassemble_stream, reply_from_body
from engine_acceptance.wire.sse import SSEParser
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget, Exchange
from engine_acceptance.errors import EngineAcceptanceError

__all__ = [
    "MAX_REPLY_BYTES",
    "RawStreamingClient",
    "ReplyTooLarge",
    "SdkChatClient",
    "tls_context",
]

RAW_CAPTURE_LIMIT = 1 << 20
# No reply the suite asks for comes near this (a 1M-token recall answer is a few
# KB; a long non-streamed chat reply a few MB). Past it the reply is abandoned:
# an engine sending hundreds of MB must fail its check, not exhaust the suite.
MAX_REPLY_BYTES = 32 * 1024 * 1024
# How long the load generator's idle pooled connections may wait to be reused.
# Engines close idle connections after a few seconds (vLLM's
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE and SGLang's uvicorn: 5 s; llama.cpp's server: 5 s):
# a request written onto a connection the engine is closing fails with "Broken
# pipe" before any response, no fault of the engine. The engine's 5 s count from
# its last byte sent, the client's from its last byte read: a client that reads
# late (CI's two cores stalled both for about 10 s once) races the close even
# within this limit. So the functional clients below open a connection of their
# own for each request (a handshake is nothing beside a generated reply); only the
# load generator, which opens its connections before the schedule so that no
# handshake enters a measured time and keeps them busy through a cell, reuses them.
IDLE_CONNECTION_REUSE_S = 2.0


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every SDK client of the suite shares (httpx's default, made once).

    Building one reads the whole CA bundle, about 60 ms of CPU; a run makes a client for each
    check, and each made its own (as much CPU as the check's requests on a local engine).
    (aiohttp builds its verifying default once, at import.)
    """
    return httpx.create_ssl_context()


# Parameters the SDK's create() takes by name; everything else (chat_template_kwargs,
# ignore_eos, top_k, ...) is engine-specific and goes through extra_body.
_SDK_CHAT_PARAMS = frozenset(
    {
        "messages", "model", "frequency_penalty", "logit_bias", "logprobs", "max_completion_tokens",
        "max_tokens", "n", "parallel_tool_calls", "presence_penalty", "reasoning_effort",
        "response_format", "seed", "stop", "stream_options", "temperature", "tool_choice", "tools",
        "top_logprobs", "top_p", "user",
    }
)


class ReplyTooLarge(EngineAcceptanceError):
    """A reply passed MAX_REPLY_BYTES; reading stopped there."""

    def __init__(self, limit: int, received: int, status: int | None = None) -> None:
        self.limit, self.received, self.status = limit, received, status
        status_text = f"HTTP {status} " if status is not None else ""
        super().__init__(f"the {status_text}reply is larger than the {limit / 2**20:g} MiB cap: abandoned after "
                         f"{received / 2**20:.1f} MiB (the raw bytes kept are the first "
                         f"{RAW_CAPTURE_LIMIT // 1024} KiB)")


class _CappedStream(httpx.AsyncByteStream):
    """A response body that raises ReplyTooLarge past the cap, wherever it is read.

    The SDK reads 4xx/5xx bodies whole by itself before raising its status error;
    wrapping the stream in a response hook bounds those reads too.
    """

    def __init__(self, stream: Any, status: int) -> None:
        self._stream = stream
        self._status = status

    async def __aiter__(self) -> Any:
        received = 0
        async for part in self._stream:
            received += len(part)
            if received > MAX_REPLY_BYTES:
                raise ReplyTooLarge(MAX_REPLY_BYTES, received, self._status)
            yield part

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _cap_response_body(response: httpx.Response) -> None:
    response.stream = _CappedStream(response.stream, response.status_code)


def _count_read(exchange: Exchange, chunk: bytes, after_s: float) -> None:
    """Count and keep (capped) one read; raises ReplyTooLarge past MAX_REPLY_BYTES."""
    exchange.bytes_received += len(chunk)
    exchange.last_byte_after_s = after_s
    _keep_raw(exchange, chunk)
    if exchange.bytes_received > MAX_REPLY_BYTES:
        raise ReplyTooLarge(MAX_REPLY_BYTES, exchange.bytes_received, exchange.status)


def _keep_raw(exchange: Exchange, chunk: bytes) -> None:
    room = RAW_CAPTURE_LIMIT - len(exchange.raw)
    if room <= 0:
        exchange.raw_truncated = True
        return
    exchange.raw += chunk[:room]
    exchange.raw_truncated |= len(chunk) > room


def _short(value: Any, limit: int = 300) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= limit else text[:limit] + "…"


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: hostile nesting
        return raw.decode("utf-8", "replace")


def _silence(stream: bool, idle: float) -> asyncio.Timeout:
    """The idle timer of one request, before its response has begun.

    A streamed request's status and headers must come within ``idle``; a
    non-streamed one has nothing to send until its reply is complete, so no
    idle deadline is set (the total still applies). :func:`_began` and
    :func:`_read` move it on as the response arrives.
    """
    return asyncio.timeout_at(asyncio.get_running_loop().time() + idle if stream else None)


def _began(silence: asyncio.Timeout, stream: bool, idle: float) -> None:
    """The response status and headers came: what silence is allowed until the first body byte.

    Streamed: the first event waits for the queue and the prefill, bounded by the
    total only. Non-streamed: the reply is complete, its body must follow.
    """
    silence.reschedule(None if stream else asyncio.get_running_loop().time() + idle)


def _read(silence: asyncio.Timeout, idle: float) -> None:
    """A body byte came: from here on, ``idle`` seconds without one is a stall."""
    silence.reschedule(asyncio.get_running_loop().time() + idle)


class SdkChatClient:
    """Chat completions through the official SDK, streamed or not, never retried."""

    def __init__(self, target: EngineTarget) -> None:
        self.target = target
        timeouts = target.timeouts
        # httpx's read timeout counts every read alike, the wait for a non-streamed reply
        # (generated whole, minutes for a long one) included: it is left at the total, and
        # the client's own idle timer (_silence) bounds only the silences that mean a fault.
        timeout = httpx.Timeout(timeouts.total, connect=timeouts.connect)
        # The SDK's own pool size; no connection is kept for reuse (IDLE_CONNECTION_REUSE_S).
        sdk_limits = openai.DEFAULT_CONNECTION_LIMITS
        self._client = openai.AsyncOpenAI(
            base_url=target.v1_url,
            # The SDK insists on a key; an engine without auth ignores it.
            api_key=target.api_key or "no-key",
            max_retries=0,
            timeout=timeout,
            # The SDK's own HTTP client, plus a cap on every body it reads.
            http_client=openai.DefaultAsyncHttpxClient(
                timeout=timeout, event_hooks={"response": [_cap_response_body]}, verify=tls_context(),
                limits=httpx.Limits(max_connections=sdk_limits.max_connections, max_keepalive_connections=0)),
        )

    @property
    def sdk(self) -> openai.AsyncOpenAI:
        return self._client

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> "SdkChatClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def chat(self, body: dict[str, Any], *, stream: bool) -> Exchange:
        """Send one chat request; ``body`` is the JSON an application would send."""
        body = {"model": self.target.model, **body}
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        exchange = Exchange("POST", self.target.v1_url + "/chat/completions", body, stream)
        named = {key: value for key, value in body.items() if key in _SDK_CHAT_PARAMS}
        extra = {key: value for key, value in body.items() if key not in _SDK_CHAT_PARAMS and key != "stream"}
        loss = engine_health.lost(self.target.base_url)
        if loss is not None:
            return _not_sent(exchange, loss)
        started = time.monotonic()
        silence = _silence(stream, self.target.timeouts.idle)
        try:
            async with asyncio.timeout(self.target.timeouts.total), silence:
                await self._send(exchange, named, extra, started, silence)
        except openai.APIStatusError as exc:
            exchange.status = exc.status_code
            content = _read_error_content(exc.response)
            _keep_raw(exchange, content)
            exchange.body = exc.body if exc.body is not None else _json_or_text(content)
        except ReplyTooLarge as exc:
            exchange.status = exchange.status or exc.status
            exchange.error_kind, exchange.error = "protocol", str(exc)
        except (openai.APITimeoutError, TimeoutError, httpx.TimeoutException) as exc:
            exchange.error_kind = "timeout"
            limit = "idle" if silence.expired() else _sdk_timeout_limit(exc)
            exchange.error = _timeout_message(limit, self.target.timeouts, exchange)
        except (openai.APIConnectionError, httpx.TransportError) as exc:
            exchange.error_kind = "connection"
            exchange.error = _connection_message(exc, exchange)
        finally:
            exchange.elapsed_s = time.monotonic() - started
        if exchange.stream and exchange.events:
            exchange.reply = exchange.reply or reassemble_stream(exchange.events, sent_at=started)
        _judge_success(exchange)
        await engine_health.check_after_failure(self.target, exchange)
        return exchange

    async def _send(self, exchange: Exchange, named: dict[str, Any], extra: dict[str, Any], started: float,
                    silence: asyncio.Timeout) -> None:
        # Streamed or not, the body is read in pieces as it arrives (never whole by the
        # SDK), so a reply past MAX_REPLY_BYTES is abandoned without being held.
        idle = self.target.timeouts.idle
        parser = SSEParser() if exchange.stream else None
        flag = {"stream": True} if exchange.stream else {}
        body = bytearray()
        async with self._client.chat.completions.with_streaming_response.create(
            **named, **flag, extra_body=extra or None
        ) as response:
            exchange.status = response.status_code
            exchange.headers_after_s = time.monotonic() - started
            _began(silence, exchange.stream, idle)
            try:
                async for chunk in response.iter_bytes():
                    _read(silence, idle)
                    now = time.monotonic()
                    _count_read(exchange, chunk, now - started)
                    if parser is not None:
                        exchange.events.extend(parser.feed(chunk, now))
                    else:
                        body.extend(chunk)
            finally:
                if parser is not None:
                    tail, _leftover = parser.close(time.monotonic())
                    exchange.events.extend(tail)
                    # Even a broken stream is reassembled: what arrived is evidence.
                    exchange.reply = reassemble_stream(exchange.events, sent_at=started)
        if parser is None:
            exchange.body = _json_or_text(bytes(body))
            if isinstance(exchange.body, dict):
                exchange.reply = reply_from_body(exchange.body)
            else:
                exchange.error_kind = "protocol"
                exchange.error = f"2xx body is not a JSON object: {_short(bytes(body))}"


class RawStreamingClient:
    """aiohttp client that timestamps every SSE event with a monotonic clock.

    One instance opens at most ``pool_size`` connections at once, one for each request and
    closed after it (``IDLE_CONNECTION_REUSE_S`` says why); a caller sizes it to the requests
    it sends together, so the client never queues requests the engine could take.
    """

    def __init__(self, target: EngineTarget, *, pool_size: int = 16) -> None:
        self.target = target
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "RawStreamingClient":
        # A connection of its own for each request, closed after it (IDLE_CONNECTION_REUSE_S); no
        # sock_read: the client's own idle timer (_silence) bounds the silences that mean a fault.
        self._session = http.session(timeout=http.deadline_timeout(self.target.timeouts), pool_size=self._pool_size)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def get(self, path: str) -> Exchange:
        return await self.request("GET", path, None)

    async def post(self, path: str, body: dict[str, Any], *, stream: bool | None = None) -> Exchange:
        return await self.request("POST", path, body, stream=stream)

    async def request(self, method: str, path: str, body: dict[str, Any] | None, *, stream: bool | None = None,
                      headers: dict[str, str] | None = None) -> Exchange:
        assert self._session is not None, "use RawStreamingClient as an async context manager"
        stream = bool(body and body.get("stream")) if stream is None else stream
        url = self.target.base_url.rstrip("/") + path
        exchange = Exchange(method, url, body, stream)
        loss = engine_health.lost(self.target.base_url)
        if loss is not None:
            return _not_sent(exchange, loss)
        all_headers = {**self.target.auth_headers(), **(headers or {})}
        parser = SSEParser()
        idle = self.target.timeouts.idle
        started = time.monotonic()
        silence = _silence(stream, idle)
        try:
            async with silence, self._session.request(method, url, json=body, headers=all_headers) as response:
                exchange.status = response.status
                exchange.headers_after_s = time.monotonic() - started
                exchange.headers = {name.lower(): value for name, value in response.headers.items()}
                _began(silence, stream, idle)
                is_sse = response.content_type == "text/event-stream"
                async for chunk in response.content.iter_any():
                    _read(silence, idle)
                    now = time.monotonic()
                    _count_read(exchange, chunk, now - started)
                    if is_sse and stream:
                        exchange.events.extend(parser.feed(chunk, now))
        except ReplyTooLarge as exc:
            exchange.error_kind, exchange.error = "protocol", str(exc)
        except (asyncio.TimeoutError, TimeoutError) as exc:
            exchange.error_kind = "timeout"
            limit = "idle" if silence.expired() else _aiohttp_timeout_limit(exc)
            exchange.error = _timeout_message(limit, self.target.timeouts, exchange)
        except aiohttp.ClientError as exc:
            exchange.error_kind = "connection"
            exchange.error = _connection_message(exc, exchange)
        finally:
            exchange.elapsed_s = time.monotonic() - started
        tail, _leftover = parser.close(time.monotonic())
        exchange.events.extend(tail)
        if exchange.events:
            exchange.reply = reassemble_stream(exchange.events, sent_at=started)
        elif exchange.raw and exchange.error_kind is None:
            exchange.body = _json_or_text(exchange.raw)
            if (exchange.status or 0) < 300 and isinstance(exchange.body, dict) and "choices" in exchange.body:
                exchange.reply = reply_from_body(exchange.body)
        _judge_success(exchange)
        await engine_health.check_after_failure(self.target, exchange)
        return exchange


def _read_error_content(response: httpx.Response) -> bytes:
    try:
        return response.content
    except httpx.ResponseNotRead:
        return b""


def _not_sent(exchange: Exchange, loss: engine_health.EngineLost) -> Exchange:
    exchange.error_kind = "connection"
    exchange.error = f"not sent: {loss.message()}"
    exchange.elapsed_s = 0.0
    return exchange


def _judge_success(exchange: Exchange) -> None:
    """A 2xx that is not a usable reply becomes a protocol error, so no check passes on it."""
    if exchange.error_kind is not None or exchange.status is None or not 200 <= exchange.status < 300:
        return
    body = exchange.body
    # Both error shapes: {"error": {...}} and the older flat {"object": "error", ...}.
    # A null error is none: the Responses API's response object carries "error": null.
    if not exchange.stream and isinstance(body, dict) and "choices" not in body and (
            body.get("error") is not None or body.get("object") == "error"):
        exchange.reply = None
        exchange.error_kind = "protocol"
        exchange.error = f"HTTP {exchange.status} with an error body instead of a reply: {_short(body)}"
        return
    reply = exchange.reply
    if reply is not None and reply.unreadable:
        more = f" (and {len(reply.unreadable) - 1} more)" if len(reply.unreadable) > 1 else ""
        what = "stream with an unusable event" if reply.streamed else "body that is not a usable reply"
        exchange.error_kind = "protocol"
        exchange.error = f"HTTP {exchange.status} {what}: {reply.unreadable[0]}{more}"


def _sdk_timeout_limit(exc: BaseException) -> str:
    """Which limit fired, when it was not the client's own idle timer.

    The SDK wraps httpx's timeouts; httpx's read, write and pool timeouts are set to
    the total (see SdkChatClient), as is our asyncio.timeout around the request.
    """
    cause = exc.__cause__ if isinstance(exc, openai.APITimeoutError) else exc
    if isinstance(cause, httpx.ConnectTimeout):
        return "connect"
    return "total"


def _aiohttp_timeout_limit(exc: BaseException) -> str:
    """Which limit fired, when it was not the client's own idle timer (aiohttp has no sock_read here)."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "connect"
    return "total"


def _timeout_message(limit: str, timeouts: ClientTimeouts, exchange: Exchange) -> str:
    """What the engine did up to the timeout, in words that name the fault and the limit that fired."""
    received = f"{exchange.bytes_received} bytes" + (f" in {len(exchange.events)} event(s)" if exchange.events else "")
    idle, total = f"--idle-timeout {timeouts.idle:g}s", f"--request-timeout {timeouts.total:g}s"
    if limit == "connect":
        return f"connect timeout: no connection within {timeouts.connect:g}s (--connect-timeout)"
    if limit == "idle" and exchange.headers_after_s is None:
        # Only a streamed request gets here: its status and headers come before the prefill.
        return (f"idle timeout: the engine accepted the request and sent no response within {timeouts.idle:g}s "
                f"({idle}; a streamed reply's status and headers come before the prefill: never answered)")
    if limit == "idle":
        what = "stream" if exchange.stream else "reply body"
        return (f"idle timeout: the reply stalled mid-way, no byte for {timeouts.idle:g}s after {received} "
                f"({idle}; the {what} stopped and hung)")
    if exchange.bytes_received:
        return (f"total timeout: the request took longer than {timeouts.total:g}s although bytes kept arriving "
                f"({received}, the last {exchange.last_byte_after_s or 0:.1f}s after sending; {total}): the reply "
                "trickles in (a slow drip) or is too long for the request timeout")
    if exchange.headers_after_s is not None:
        if exchange.stream:
            return (f"total timeout: response headers came, then no event within {timeouts.total:g}s ({total} "
                    "bounds the wait for a stream's first event: the queue and the prefill)")
        return f"total timeout: response headers came, then no body byte within {timeouts.total:g}s ({total})"
    if not exchange.stream:
        return (f"total timeout: the engine accepted the request and sent no response within {timeouts.total:g}s "
                f"({total}; a non-streamed reply comes whole when generation ends: never answered, or generating "
                "for longer than that)")
    return f"total timeout: no response within {timeouts.total:g}s ({total})"


def _connection_message(exc: BaseException, exchange: Exchange) -> str:
    """Why the connection failed (the errno's words where there is one) and how far the reply got."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    # The OS error says it plainly ("Connection reset by peer", "Connection refused");
    # wrappers often carry no text at all (httpx's ReadError).
    os_error = next((e for e in chain if isinstance(e, OSError) and str(e).strip()), None)
    texts = [" ".join(str(e).split()) for e in chain if str(e).strip()]
    if os_error is not None:
        detail = str(os_error)
    elif len(texts) > 1:
        detail = f"{texts[0]} (cause: {texts[-1]})"
    else:
        detail = texts[0] if texts else "no detail"
    where = ("before any response" if exchange.headers_after_s is None else
             f"mid-reply, after HTTP {exchange.status} and {exchange.bytes_received} bytes"
             + (f" in {len(exchange.events)} event(s)" if exchange.events else ""))
    return f"{type(exc).__name__}: {_short(detail, 200)} ({where})"
