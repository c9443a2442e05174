"""Readiness of a server without /health (llama.cpp's Python server answers it 404)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine_acceptance.wire.readiness import EngineUnavailable, wait_until_ready


def _serve(models_status: int, seen: list[tuple[str, str | None]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization")))
            status = models_status if self.path == "/v1/models" else 404
            body = b'{"object": "list", "data": []}' if status == 200 else b'{"detail": "Not Found"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_404_on_health_is_judged_by_v1_models_with_the_key() -> None:
    seen: list[tuple[str, str | None]] = []
    server = _serve(200, seen)
    messages: list[str] = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        wait_until_ready(url, readiness_timeout=5, startup_timeout=0, probe_timeout=2,
                         progress=messages.append, api_key="k")
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _ in seen] == ["/health", "/v1/models"]
    assert seen[1][1] == "Bearer k"
    assert any("answered 404" in message and "/v1/models" in message for message in messages)


def test_a_profile_path_is_polled_first_and_its_failure_named() -> None:
    seen: list[tuple[str, str | None]] = []
    server = _serve(503, seen)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(EngineUnavailable, match=r"GET .*/v1/models did not answer 200 .*HTTP 503"):
            wait_until_ready(url, readiness_timeout=1.5, startup_timeout=0, probe_timeout=1, path="/v1/models")
    finally:
        server.shutdown()
        server.server_close()
    assert {path for path, _ in seen} == {"/v1/models"}
