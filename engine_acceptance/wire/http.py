"""The suite's own HTTP requests, on one stack: aiohttp, with its sessions opened here.

Where the openai SDK is not the point, the suite speaks aiohttp: the raw client
(:mod:`~engine_acceptance.wire.client`), readiness and engine detection
(:mod:`~engine_acceptance.wire.readiness`), the engine's ``/tokenize`` and the usage
calibration (:mod:`~engine_acceptance.wire.token_count`), the ``/health`` probe after a
failure (:mod:`~engine_acceptance.wire.health`) and the clients that leave
(:mod:`~engine_acceptance.wire.cancellation`). aiohttp because the raw client and the load
generator need what only it exposes (a timestamp at each read, aiohttp's connection
protocol for the load's arrival times, a pool sized to the load), so one library serves
them all; httpx stays only under the SDK (``SdkChatClient``), whose transport is part of
what the SDK checks test. The load generator builds its own session on the same library
(its connector carries a timing protocol), and the reference engine is apart.

What this module settles for every such request:

* **Connections**: one per request, closed after it (``force_close``), as the raw
  client's ``IDLE_CONNECTION_REUSE_S`` explains: an engine closes idle connections
  after a few seconds, and a request written onto one it is closing fails for nothing.
* **Auth**: the caller's headers (``EngineTarget.auth_headers()``) on every request.
* **Timeouts**: :func:`deadline_timeout` (the whole request bounded, as the raw client
  and the cuts have it) or :func:`per_wait_timeout` (each wait bounded on its own, as
  the blocking calls before this had it: urllib's socket timeout, httpx's ``Timeout``).
* **TLS**: aiohttp's verifying default context (``ssl.create_default_context()``, the
  system CA store, built once at import), the same for every request to the engine.
* **Synchronous callers**: readiness runs before any event loop, and the token counter
  is called from worker threads and sometimes from inside a running loop.
  :func:`run_sync` runs the coroutine on a loop of its own in a thread of its own, so
  ``asyncio.run`` never nests and the caller's loop (pytest-asyncio's, say) is never
  replaced or cleared; the caller blocks, as it did on urllib or ``httpx.Client``.

:func:`fetch` never raises for what the engine or the network does: its :class:`Answer`
holds the status and the body, or why no answer came.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import json
import os
import socket
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from engine_acceptance.wire.types import ClientTimeouts

__all__ = ["Answer", "deadline_timeout", "fetch", "fetch_sync", "per_wait_timeout", "run_sync", "session"]

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """What one request got: its status and body (up to the limit read), or why no answer came."""

    status: int | None
    body: bytes = b""
    # Why there was no HTTP answer: "ConnectionRefusedError: [Errno 111] Connection refused", "no answer within 5s".
    error: str | None = None
    # Nothing listens at the address, or no such host: an engine not started yet, or a wrong URL.
    refused: bool = False

    def json(self) -> Any:
        """The body as JSON, or None when it is not."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def deadline_timeout(timeouts: ClientTimeouts) -> aiohttp.ClientTimeout:
    """``total`` bounds the whole request, ``connect`` the connecting.

    No ``sock_read``: it counts every read alike, the wait for a non-streamed reply included;
    the raw client's own idle timer bounds the silences that mean a fault.
    """
    return aiohttp.ClientTimeout(total=timeouts.total, sock_connect=timeouts.connect)


def per_wait_timeout(*, connect: float, read: float) -> aiohttp.ClientTimeout:
    """Connecting bounded by ``connect``, each read by ``read``, and no deadline for the whole."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)


def session(*, timeout: aiohttp.ClientTimeout, headers: Mapping[str, str] | None = None, pool_size: int = 0,
            proxies_from_environment: bool = False) -> aiohttp.ClientSession:
    """A session whose every request has a connection of its own, closed after it.

    ``pool_size`` bounds the connections open at once (0: no bound). Call it inside the
    running loop that will use it. ``proxies_from_environment`` reads ``HTTP(S)_PROXY`` and
    ``NO_PROXY``: the synchronous requests did so on urllib and httpx and still do; the raw
    client and the cuts never did.
    """
    connector = aiohttp.TCPConnector(limit=pool_size, limit_per_host=pool_size, force_close=True)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, headers=dict(headers or {}),
                                 trust_env=proxies_from_environment)


async def fetch(client: aiohttp.ClientSession, method: str, url: str, *, json_body: Any = None,
                limit: int | None = None, follow_redirects: bool = True) -> Answer:
    """Send one request and read its body (at most ``limit`` bytes; all of it when None)."""
    try:
        async with client.request(method, url, json=json_body, allow_redirects=follow_redirects) as response:
            return Answer(response.status, await _read(response, limit))
    except (asyncio.TimeoutError, TimeoutError) as exc:
        # aiohttp's own timeouts are TimeoutErrors too; say the limit that was waited out.
        limit_s = client.timeout.sock_connect if isinstance(exc, aiohttp.ConnectionTimeoutError) else (
            client.timeout.sock_read or client.timeout.total)
        return Answer(None, error=f"no answer within {limit_s:g}s" if limit_s else "timed out")
    except aiohttp.ClientConnectorError as exc:
        cause = _plain(exc.os_error)
        text = f"{type(cause).__name__}: {cause}"
        refused = (cause.errno == errno.ECONNREFUSED or isinstance(cause, socket.gaierror)
                   or "refused" in text.lower())
        return Answer(None, error=text, refused=refused)
    except (aiohttp.ClientError, OSError) as exc:
        return Answer(None, error=f"{type(exc).__name__}: {exc}")


def _plain(error: OSError) -> OSError:
    """The error in the C library's words (``[Errno 111] Connection refused``), as urllib gave it.

    asyncio words a failed connect "Connect call failed (address)", and several addresses that
    failed alike (IPv6 and IPv4 of localhost) become one OSError carrying the shared errno;
    ``OSError(errno, ...)`` gives back the subclass (``ConnectionRefusedError``) for that errno.
    """
    if isinstance(error, socket.gaierror) or not error.errno or error.errno < 0:
        return error
    return OSError(error.errno, os.strerror(error.errno))


async def _read(response: aiohttp.ClientResponse, limit: int | None) -> bytes:
    if limit is None:
        return await response.read()
    body = bytearray()
    while len(body) < limit:
        chunk = await response.content.read(limit - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


def run_sync(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``work()`` to its end on an event loop of its own, in a thread of its own, and return its result.

    The caller may be in no loop (readiness, a worker thread) or inside a running one (a check
    that counts tokens in between awaits): either way nothing is nested and the caller's loop
    is left alone. The thread is a daemon: an interrupted caller (Ctrl-C, SIGTERM) does not
    wait for a request in flight to time out.
    """
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(asyncio.run(work()))
        except BaseException as exc:  # handed to the caller, who raises it
            done.set_exception(exc)

    threading.Thread(target=run, name="engine-acceptance-http", daemon=True).start()
    return done.result()


def fetch_sync(method: str, url: str, *, timeout: aiohttp.ClientTimeout, headers: Mapping[str, str] | None = None,
               json_body: Any = None, limit: int | None = None, follow_redirects: bool = True,
               proxies_from_environment: bool = True) -> Answer:
    """One request from synchronous code, on a session of its own (:func:`run_sync`)."""

    async def one() -> Answer:
        async with session(timeout=timeout, headers=headers, proxies_from_environment=proxies_from_environment) as client:
            return await fetch(client, method, url, json_body=json_body, limit=limit,
                               follow_redirects=follow_redirects)

    return run_sync(one)
