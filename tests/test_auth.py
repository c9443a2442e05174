"""API keys (TEST-PLAN §9): without the key or with a wrong one the engine refuses, with it it serves.

An engine started with ``--api-key`` that answers anyone who reaches its port is
open to the whole network it sits on. Each check sends one request with exactly
the credentials it names (none, a random wrong key, the configured key) to the
generation endpoint and to the model list. Without a configured key (``--api-key``
or ``$ENGINE_API_KEY``) there is nothing to check, and the checks say so.

The wrong key is random and the real one never leaves the client: requests are
attached to the report with the key redacted.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import short
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.types import EngineTarget, Exchange
from engine_acceptance.report_attachments import attach_exchange
from engine_acceptance.session import AcceptanceSession

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.auth]

REFUSED = (401, 403)
# (method, path) of what an unauthorised caller must not get: generation, and the model list.
ENDPOINTS = {
    "chat-completions": ("POST", "/v1/chat/completions"),
    "models": ("GET", "/v1/models"),
}


@pytest.fixture
def key_configured(acceptance: AcceptanceSession) -> None:
    """Skips without a key. Returns nothing: pytest prints a failing test's arguments, never the key."""
    if not acceptance.api_key:
        pytest.skip("no API key is configured (--api-key or $ENGINE_API_KEY): whether the engine refuses "
                    "requests without it cannot be checked")


def _body(endpoint: str, model: str, prompts: dict[str, Any]) -> dict[str, Any] | None:
    if endpoint != "chat-completions":
        return None
    return {"model": model, "messages": [{"role": "user", "content": prompts["text"]["basic"]["prompt"]}],
            "max_tokens": 16, "temperature": 0}


async def _send(target: EngineTarget, acceptance: AcceptanceSession, endpoint: str, prompts: dict[str, Any],
                label: str) -> Exchange:
    method, path = ENDPOINTS[endpoint]
    with allure.step(f"{method} {path} {label}"):
        async with RawStreamingClient(target, pool_size=1) as client:
            exchange = await client.request(method, path, _body(endpoint, target.model, prompts), stream=False)
        attach_exchange(exchange, acceptance.redactor, label)
    return exchange


def _refusal_problem(exchange: Exchange, endpoint: str, credentials: str) -> str | None:
    method, path = ENDPOINTS[endpoint]
    if exchange.status in REFUSED:
        return None
    if exchange.status is None:
        return f"{method} {path} {credentials} got no answer at all: {exchange.describe_failure()}"
    what = "served it: anyone who reaches the port can use the engine" if 200 <= exchange.status < 300 else \
        "did not refuse it as unauthorised"
    body = exchange.body if exchange.body is not None else exchange.raw.decode("utf-8", "replace")
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return (f"{method} {path} {credentials} was answered HTTP {exchange.status}, not 401/403: the engine {what} "
            f"(body {short(text)})")


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_request_without_a_key_is_refused_with_401_or_403(acceptance, key_configured, prompts,
                                                                endpoint: str) -> None:
    target = dataclasses.replace(acceptance.target, api_key=None)
    exchange = await _send(target, acceptance, endpoint, prompts, "without an API key")
    problem = _refusal_problem(exchange, endpoint, "without an API key")
    assert problem is None, problem


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_request_with_a_wrong_key_is_refused_with_401_or_403(acceptance, key_configured, prompts,
                                                                   endpoint: str) -> None:
    wrong = "sk-wrong-" + secrets.token_hex(16)
    target = dataclasses.replace(acceptance.target, api_key=wrong)
    exchange = await _send(target, acceptance, endpoint, prompts, "with a wrong API key")
    problem = _refusal_problem(exchange, endpoint, "with a wrong API key")
    assert problem is None, problem


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_request_with_the_right_key_is_answered(acceptance, key_configured, prompts, endpoint: str) -> None:
    method, path = ENDPOINTS[endpoint]
    exchange = await _send(acceptance.target, acceptance, endpoint, prompts, "with the configured API key")
    assert exchange.status is not None and 200 <= exchange.status < 300 and exchange.error_kind is None, (
        f"{method} {path} with the configured API key was not served: {exchange.describe_failure()}")
    if endpoint == "chat-completions":
        assert exchange.ok, f"{method} {path} with the configured API key gave no usable reply: " \
                            f"{exchange.describe_failure()}"
