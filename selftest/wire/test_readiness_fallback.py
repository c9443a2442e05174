"""A server without /health or /version (llama.cpp's Python server): readiness, kind and version."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine_acceptance.profiles.profile import load_engine_profile
from engine_acceptance.wire.readiness import EngineUnavailable, detect_engine, wait_until_ready


# What llama_cpp.server 0.3.36 answers (measured): one model owned by "me", the version only in OpenAPI.
LLAMA_MODELS = b'{"object": "list", "data": [{"id": "gemma-3-270m", "object": "model", "owned_by": "me"}]}'
LLAMA_OPENAPI = b'{"openapi": "3.1.0", "info": {"title": "llama.cpp Python API", "version": "0.3.36"}}'


def _serve(models_status: int, seen: list[tuple[str, str | None]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization")))
            status = models_status if self.path in ("/v1/models", "/openapi.json") else 404
            body = {"/v1/models": LLAMA_MODELS, "/openapi.json": LLAMA_OPENAPI}.get(self.path, b"")
            body = body if status == 200 else b'{"detail": "Not Found"}'
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


def test_llama_cpp_is_detected_by_owned_by_and_its_version_read_from_openapi() -> None:
    seen: list[tuple[str, str | None]] = []
    server = _serve(200, seen)
    try:
        info = detect_engine(f"http://127.0.0.1:{server.server_address[1]}", api_key="k", requested_kind="auto",
                             requested_model=None, engine_profiles=[load_engine_profile(name) for name in
                                                                    ("vllm", "sglang", "llamacpp", "generic")],
                             probe_timeout=2)
    finally:
        server.shutdown()
        server.server_close()
    assert (info.kind, info.kind_source, info.version, info.model) == ("llamacpp", "owned_by=me", "0.3.36",
                                                                        "gemma-3-270m")
    assert ("/openapi.json", "Bearer k") in seen
