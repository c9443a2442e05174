"""The two HTTP clients: the openai SDK for functional checks, aiohttp for timing.

Functional checks speak through ``openai.AsyncOpenAI`` because applications do;
it never retries (``max_retries=0``): a gate that retries silently hides the
failures it exists to find. Streamed bytes are read raw from the SDK's response
and parsed by :mod:`engine_acceptance.sse`, so both clients rebuild replies with
the same code (:mod:`engine_acceptance.reassembly`) and a missing ``[DONE]`` is
visible. Neither client raises on an HTTP error or a bad stream: the
:class:`Exchange` says what happened and keeps the raw bytes (capped).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx2 as httpx
import openai

from engine_acceptance.reassembly import Reply, reassemble_stream, reply_from_body
from engine_acceptance.sse import SSEEvent, SSEParser

__all__ = [
    "ClientTimeouts",
    "EngineTarget",
    "Exchange",
    "RawStreamingClient",
    "SdkChatClient",
]

RAW_CAPTURE_LIMIT = 1 << 20
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


@dataclass(frozen=True)
class ClientTimeouts:
    """Seconds: to connect, of silence between two reads, and for the whole request."""

    connect: float = 10.0
    idle: float = 60.0
    total: float = 300.0


@dataclass(frozen=True)
class EngineTarget:
    """Where the engine is and how to talk to it."""

    base_url: str
    model: str
    api_key: str | None = None
    timeouts: ClientTimeouts = ClientTimeouts()

    @property
    def v1_url(self) -> str:
        return self.base_url.rstrip("/") + "/v1"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass
class Exchange:
    """One request and what came back. ``reply`` is set when a 2xx body arrived."""

    method: str
    url: str
    request: dict[str, Any] | None
    stream: bool
    status: int | None = None
    reply: Reply | None = None
    body: Any = None
    error_kind: str | None = None
    error: str | None = None
    raw: bytes = b""
    raw_truncated: bool = False
    elapsed_s: float | None = None
    events: list[SSEEvent] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and self.reply is not None

    def describe_failure(self) -> str:
        """One line for an assertion message when the exchange did not succeed."""
        if self.error_kind:
            return f"{self.error_kind}: {self.error}"
        if self.status is not None and not 200 <= self.status < 300:
            return f"HTTP {self.status}: {_short(self.body if self.body is not None else self.raw)}"
        if self.reply is None:
            return f"no reply could be read: {_short(self.raw)}"
        return "ok"

    def _keep_raw(self, chunk: bytes) -> None:
        room = RAW_CAPTURE_LIMIT - len(self.raw)
        if room <= 0:
            self.raw_truncated = True
            return
        self.raw += chunk[:room]
        self.raw_truncated |= len(chunk) > room


def _short(value: Any, limit: int = 300) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= limit else text[:limit] + "…"


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


class SdkChatClient:
    """Chat completions through the official SDK, streamed or not, never retried."""

    def __init__(self, target: EngineTarget) -> None:
        self.target = target
        timeouts = target.timeouts
        self._client = openai.AsyncOpenAI(
            base_url=target.v1_url,
            # The SDK insists on a key; an engine without auth ignores it.
            api_key=target.api_key or "no-key",
            max_retries=0,
            timeout=httpx.Timeout(timeouts.total, connect=timeouts.connect, read=timeouts.idle),
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
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.target.timeouts.total):
                if stream:
                    await self._stream(exchange, named, extra, started)
                else:
                    response = await self._client.chat.completions.with_raw_response.create(
                        **named, extra_body=extra or None
                    )
                    exchange.status = response.status_code
                    exchange._keep_raw(response.content)
                    exchange.body = _json_or_text(response.content)
                    if isinstance(exchange.body, dict):
                        exchange.reply = reply_from_body(exchange.body)
                    else:
                        exchange.error_kind = "protocol"
                        exchange.error = f"2xx body is not a JSON object: {_short(response.content)}"
        except openai.APIStatusError as exc:
            exchange.status = exc.status_code
            content = _read_error_content(exc.response)
            exchange._keep_raw(content)
            exchange.body = exc.body if exc.body is not None else _json_or_text(content)
        except (openai.APITimeoutError, TimeoutError, httpx.TimeoutException) as exc:
            exchange.error_kind = "timeout"
            exchange.error = _timeout_message(exc, self.target.timeouts)
        except (openai.APIConnectionError, httpx.TransportError) as exc:
            exchange.error_kind = "connection"
            exchange.error = f"{type(exc).__name__}: {exc.__cause__ or exc}"
        finally:
            exchange.elapsed_s = time.monotonic() - started
        if exchange.stream and exchange.events:
            exchange.reply = exchange.reply or reassemble_stream(exchange.events, sent_at=started)
        return exchange

    async def _stream(self, exchange: Exchange, named: dict[str, Any], extra: dict[str, Any], started: float) -> None:
        parser = SSEParser()
        async with self._client.chat.completions.with_streaming_response.create(
            **named, stream=True, extra_body=extra or None
        ) as response:
            exchange.status = response.status_code
            try:
                async for chunk in response.iter_bytes():
                    now = time.monotonic()
                    exchange._keep_raw(chunk)
                    exchange.events.extend(parser.feed(chunk, now))
            finally:
                tail, _leftover = parser.close(time.monotonic())
                exchange.events.extend(tail)
                # Even a broken stream is reassembled: what arrived is evidence.
                exchange.reply = reassemble_stream(exchange.events, sent_at=started)


class RawStreamingClient:
    """aiohttp client that timestamps every SSE event with a monotonic clock.

    One instance holds one connection pool; the load generator sizes it to its
    concurrency so the client never queues requests the engine could take.
    """

    def __init__(self, target: EngineTarget, *, pool_size: int = 16) -> None:
        self.target = target
        timeouts = target.timeouts
        self._timeout = aiohttp.ClientTimeout(
            total=timeouts.total, sock_connect=timeouts.connect, sock_read=timeouts.idle
        )
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "RawStreamingClient":
        connector = aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=self._pool_size)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
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
        all_headers = {**self.target.auth_headers(), **(headers or {})}
        parser = SSEParser()
        started = time.monotonic()
        try:
            async with self._session.request(method, url, json=body, headers=all_headers) as response:
                exchange.status = response.status
                is_sse = response.content_type == "text/event-stream"
                async for chunk in response.content.iter_any():
                    now = time.monotonic()
                    exchange._keep_raw(chunk)
                    if is_sse and stream:
                        exchange.events.extend(parser.feed(chunk, now))
        except (asyncio.TimeoutError, TimeoutError) as exc:
            exchange.error_kind = "timeout"
            exchange.error = _timeout_message(exc, self.target.timeouts)
        except aiohttp.ClientError as exc:
            exchange.error_kind = "connection"
            exchange.error = f"{type(exc).__name__}: {exc}"
        finally:
            exchange.elapsed_s = time.monotonic() - started
        tail, _leftover = parser.close(time.monotonic())
        exchange.events.extend(tail)
        if exchange.events:
            exchange.reply = reassemble_stream(exchange.events, sent_at=started)
        elif exchange.raw:
            exchange.body = _json_or_text(exchange.raw)
            if (exchange.status or 0) < 300 and isinstance(exchange.body, dict) and "choices" in exchange.body:
                exchange.reply = reply_from_body(exchange.body)
        return exchange


def _read_error_content(response: httpx.Response) -> bytes:
    try:
        return response.content
    except httpx.ResponseNotRead:
        return b""


def _timeout_message(exc: BaseException, timeouts: ClientTimeouts) -> str:
    return (
        f"{type(exc).__name__} (limits: connect {timeouts.connect:g}s, idle {timeouts.idle:g}s, "
        f"total {timeouts.total:g}s){': ' + str(exc) if str(exc) else ''}"
    )
