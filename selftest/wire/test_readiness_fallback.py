"""Servers without vLLM's /version: readiness, kind and version of llama.cpp's two servers.

llama-cpp-python's server has no /health; llama.cpp's own llama-server has /health and /props.
Both are told apart by what they serve, not by ``owned_by`` alone.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine_acceptance.profiles.profile import load_engine_profile
from engine_acceptance.wire.readiness import EngineUnavailable, detect_engine, wait_until_ready


# What llama_cpp.server 0.3.36 answers (measured): one model owned by "me", the version only in OpenAPI.
LLAMA_MODELS = b'{"object": "list", "data": [{"id": "gemma-3-270m", "object": "model", "owned_by": "me"}]}'
LLAMA_OPENAPI = b'{"openapi": "3.1.0", "info": {"title": "\xf0\x9f\xa6\x99 llama.cpp Python API", "version": "0.3.36"}}'
LLAMA_ROUTES = {"/v1/models": LLAMA_MODELS, "/openapi.json": LLAMA_OPENAPI}
# What llama.cpp's llama-server b11312 answers (measured): owned_by "llamacpp", its build in GET /props.
SERVER_MODELS = b'{"object": "list", "data": [{"id": "gemma-3-270m", "object": "model", "owned_by": "llamacpp"}]}'
SERVER_PROPS = b'{"build_info": "b11312-0c1e57098", "total_slots": 4}'
SERVER_ROUTES = {"/v1/models": SERVER_MODELS, "/props": SERVER_PROPS, "/health": b'{"status": "ok"}'}
ENGINES = ("generic", "llama-server", "llamacpp", "sglang", "vllm")


def _serve(models_status: int, seen: list[tuple[str, str | None]],
           routes: dict[str, bytes] | None = None) -> ThreadingHTTPServer:
    routes = LLAMA_ROUTES if routes is None else routes

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization")))
            status = models_status if self.path in routes else 404
            body = routes.get(self.path, b"")
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
                             requested_model=None, engine_profiles=[load_engine_profile(name) for name in ENGINES],
                             probe_timeout=2)
    finally:
        server.shutdown()
        server.server_close()
    assert (info.kind, info.version, info.model) == ("llamacpp", "0.3.36", "gemma-3-270m")
    assert info.kind_source == "owned_by=me, GET /openapi.json info.title '🦙 llama.cpp Python API'"
    assert ("/openapi.json", "Bearer k") in seen


def _detect(routes: dict[str, bytes], seen: list[tuple[str, str | None]]) -> object:
    server = _serve(200, seen, routes)
    try:
        return detect_engine(f"http://127.0.0.1:{server.server_address[1]}", api_key="k", requested_kind="auto",
                             requested_model=None, engine_profiles=[load_engine_profile(name) for name in ENGINES],
                             probe_timeout=2)
    finally:
        server.shutdown()
        server.server_close()


def test_llama_server_is_told_apart_by_its_props_and_its_build_number_is_the_version() -> None:
    seen: list[tuple[str, str | None]] = []
    info = _detect(SERVER_ROUTES, seen)
    assert (info.kind, info.version) == ("llama-server", "11312")
    assert info.kind_source == "owned_by=llamacpp, GET /props build_info 'b11312-0c1e57098'"
    # /props is behind the API key on llama-server; asked once though detection and the version both read it.
    assert [entry for entry in seen if entry[0] == "/props"] == [("/props", "Bearer k")]


def test_owned_by_llamacpp_without_llama_servers_props_is_not_llama_server() -> None:
    # Another server that says owned_by "llamacpp" (llama-cpp-python's did once) but serves no /props.
    info = _detect({"/v1/models": SERVER_MODELS}, [])
    assert (info.kind, info.kind_source) == ("generic", "no engine-specific endpoint answered")


def test_what_llama_cpp_python_serves_tells_it_apart_whatever_its_owned_by_says() -> None:
    models = LLAMA_MODELS.replace(b'"me"', b'"llamacpp"')
    info = _detect({"/v1/models": models, "/openapi.json": LLAMA_OPENAPI}, [])
    assert (info.kind, info.version) == ("llamacpp", "0.3.36")
    assert info.kind_source == "GET /openapi.json info.title '🦙 llama.cpp Python API'"
