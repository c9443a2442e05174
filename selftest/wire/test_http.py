"""wire/http.py: the suite's own requests, synchronous ones included, on one aiohttp stack.

Readiness runs before any event loop and the token counter is called from worker threads
and from inside a running loop (a check that counts between two awaits): the synchronous
entry must work in both without nesting ``asyncio.run`` or disturbing the caller's loop.
What goes wrong is said in the words readiness always used (urllib's), because its
messages end runs with exit 6.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine_acceptance.wire import http
from engine_acceptance.wire.token_count import ServerTokenCounter
from engine_acceptance.wire.types import EngineTarget


@pytest.fixture()
def tokenize_server() -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    """A /tokenize that counts characters and records each request's client port and key."""
    seen: list[tuple[int, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            seen.append((self.client_address[1], self.headers.get("Authorization")))
            if self.path == "/slow":
                time.sleep(2)
            prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["prompt"]
            body = json.dumps({"count": len(prompt)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_counting_inside_a_running_loop_neither_nests_nor_disturbs_it(tokenize_server) -> None:
    url, seen = tokenize_server
    counter = ServerTokenCounter(EngineTarget(url, "m", api_key="k"), "/tokenize")

    async def check_between_awaits() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        counts = counter.count_many(["a", "bb", "ccc"])
        assert asyncio.get_running_loop() is loop
        return counts, await asyncio.to_thread(counter.count, "dddd")

    assert asyncio.run(check_between_awaits()) == ([1, 2, 3], 4)
    # Each request on a connection of its own, each with the key.
    assert len({port for port, _ in seen}) == 4 and {key for _, key in seen} == {"Bearer k"}


def test_a_synchronous_request_leaves_the_callers_current_loop_set() -> None:
    # pytest-asyncio keeps a loop set between async checks; asyncio.run here would clear it.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        http.fetch_sync("GET", f"http://127.0.0.1:{_closed_port()}/health",
                        timeout=http.per_wait_timeout(connect=1, read=1))
        assert asyncio.get_event_loop() is loop
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_nothing_listening_is_refused_in_urllibs_words() -> None:
    answer = http.fetch_sync("GET", f"http://127.0.0.1:{_closed_port()}/health",
                             timeout=http.per_wait_timeout(connect=1, read=1))
    assert (answer.status, answer.refused) == (None, True)
    assert answer.error == "ConnectionRefusedError: [Errno 111] Connection refused"


def test_a_reply_that_never_comes_names_the_wait_it_outlasted(tokenize_server) -> None:
    url, _ = tokenize_server
    started = time.monotonic()
    answer = http.fetch_sync("POST", url + "/slow", json_body={"prompt": "x"},
                             timeout=http.per_wait_timeout(connect=1, read=0.3))
    assert (answer.status, answer.error, answer.refused) == (None, "no answer within 0.3s", False)
    assert time.monotonic() - started < 1.5


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
