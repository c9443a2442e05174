"""Error codes (issue 15): an invalid request gets a 4xx with an error body naming the problem.

Clients tell their own mistakes from the engine's by the status: a 4xx is not retried and
is shown to the developer, a 5xx is retried and pages someone. So each invalid value
(temperature below 0, ``n: 0``, ``max_tokens`` below 1, a model the engine does not serve,
a message without a role, a tool result with no call before it, a prompt longer than the
context the engine advertises, an image at a URL the engine cannot fetch) must get a 4xx,
never a 5xx (filed as "Engine error (5xx)") nor a 200 that quietly repairs the request; its
body must be the error object the engine profile names (``features.error_shape``: OpenAI's
nested ``{"error": {...}}`` or SGLang's flat one), with a message that names the problem; and
the engine keeps serving afterwards. These hold for every chat deployment: no capability
beyond text is needed, but for the image URL, asked only where image input is served (a
text-only model refuses any image, whatever its URL).

The status is decided before any token is generated, so each case is sent streamed and
not: an engine must refuse ``stream: true`` the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.resources import load_prompts
from engine_acceptance.session import AcceptanceSession
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.contract import error_body_of, error_message, error_shape_problem, refusal_problem

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.error_codes]

PROMPTS: dict[str, Any] = load_prompts("contract")["errors"]
_USER = {"role": "user", "content": PROMPTS["recovery_prompt"]}
# Words for the context case's prompt: distinct short words, each at least one token in any tokenizer.
_FILLER_WORDS = ("alpha", "bravo", "charlie", "delta")
# Prompt tokens beyond the advertised context, so template tokens and word merges cannot bring it under.
_CONTEXT_MARGIN = 256


@dataclass(frozen=True)
class Case:
    """One invalid request: what is wrong, the fields that make it so, and how its message may name it."""

    what: str
    fields: dict[str, Any] = field(default_factory=dict)
    # A message naming the problem matches this (case-insensitive).
    names: str = ""
    # The capability the case needs served (media parts need image input), or None.
    requires: str | None = None


CASES: dict[str, Case] = {
    "temperature-below-zero": Case("temperature -1", {"temperature": -1}, r"temperature"),
    "n-zero": Case("n 0", {"n": 0}, r"(?<![A-Za-z_])n(?![A-Za-z_])"),
    "max-tokens-zero": Case("max_tokens 0", {"max_tokens": 0}, r"max_tokens|max_completion_tokens|max tokens"),
    "unknown-model": Case("a model the engine does not serve", {"model": "no-such-model-engine-acceptance"},
                          r"model"),
    "message-without-role": Case("a message without a role", {"messages": [{"content": "hello"}]}, r"role"),
    "tool-result-without-call": Case(
        "a tool result that answers no tool call",
        {"messages": [_USER, {"role": "tool", "tool_call_id": "call_engine_acceptance_missing", "content": "{}"}]},
        # A chat template's "roles must alternate" names it too.
        r"tool|role"),
    "prompt-over-context": Case("a prompt longer than the advertised context", {},
                                r"context|length|too long|too many|tokens"),
    # Port 9 (discard) on the engine's own host: nothing listens there, the fetch is refused at once.
    "image-url-unreachable": Case(
        "an image at a URL the engine cannot fetch",
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": PROMPTS["recovery_prompt"]},
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/engine-acceptance-unreachable.png"}}]}]},
        r"url|fetch|connect|download|image|unreachable|refused|resolve", requires="image"),
}
# Each case as a parameter; one that needs a capability is skipped, with the reason, where it is not served.
CASE_PARAMS = [pytest.param(case_id, marks=[pytest.mark.requires(case.requires)] if case.requires else [])
               for case_id, case in CASES.items()]


def _unaskable(case_id: str, acceptance: AcceptanceSession, engine_profile: EngineProfile) -> str | None:
    """Why this deployment cannot be asked the case (the skip reason), or None."""
    requires = CASES[case_id].requires
    if requires is not None and not acceptance.model_profile.has(requires):
        return acceptance.skip_reason(requires)
    if case_id == "unknown-model" and not engine_profile.rejects_unknown_model:
        return (f"engine profile {engine_profile.name!r} ({engine_profile.source}) says the engine serves its "
                "model under any name (features.rejects_unknown_model: false)")
    if case_id == "max-tokens-zero" and not engine_profile.rejects_max_tokens_zero:
        # Sent anyway, it would hold the engine until the context is full (minutes on a CPU), and a
        # non-streamed request is not cancelled there when the client gives up.
        return (f"engine profile {engine_profile.name!r} ({engine_profile.source}) says max_tokens 0 means no "
                "limit on this engine, not an invalid value (features.rejects_max_tokens_zero: false)")
    if case_id == "prompt-over-context" and not acceptance.engine.max_model_len:
        return "the engine advertises no max_model_len in /v1/models: no context to exceed"
    return None


def _body(case_id: str, acceptance: AcceptanceSession) -> dict[str, Any]:
    """The invalid request of `case_id`."""
    body: dict[str, Any] = {"messages": [_USER], "temperature": 0, "max_tokens": 16, **CASES[case_id].fields}
    if case_id == "prompt-over-context":
        words = acceptance.engine.max_model_len + _CONTEXT_MARGIN
        filler = " ".join(_FILLER_WORDS[i % len(_FILLER_WORDS)] for i in range(words))
        body["messages"] = [{"role": "user", "content": filler}]
        body["max_tokens"] = 1
    return body


async def _send(chat, acceptance: AcceptanceSession, engine_profile: EngineProfile, case_id: str,
                stream: bool) -> Exchange:
    reason = _unaskable(case_id, acceptance, engine_profile)
    if reason is not None:
        pytest.skip(reason)
    return await chat(_body(case_id, acceptance), stream=stream, label=case_id)


def _outcome(exchange: Exchange) -> str:
    return f"HTTP {exchange.status}" if exchange.status is not None else f"no answer: {exchange.describe_failure()}"


@pytest.mark.parametrize("case_id", CASE_PARAMS)
async def test_invalid_request_is_refused_with_4xx(chat, acceptance, engine_profile, case_id: str,
                                                   stream: bool) -> None:
    exchange = await _send(chat, acceptance, engine_profile, case_id, stream)
    refused = exchange.status is not None and 400 <= exchange.status < 500
    # refusal_problem words a 5xx "server error on client data: HTTP 5xx", filed as "Engine error (5xx)".
    problem = None if refused else refusal_problem(exchange)
    assert problem is None, f"{CASES[case_id].what}: {problem}"


@pytest.mark.parametrize("case_id", CASE_PARAMS)
async def test_refusal_has_an_error_body_that_names_the_problem(chat, acceptance, engine_profile, case_id: str,
                                                                stream: bool) -> None:
    case = CASES[case_id]
    exchange = await _send(chat, acceptance, engine_profile, case_id, stream)
    if exchange.ok:
        pytest.fail(f"{case.what}: the engine accepted it ({_outcome(exchange)}), so there is no error body to read")
    assert exchange.status is not None, f"{case.what}: no answer: {exchange.describe_failure()}"
    body = error_body_of(exchange)
    shape = error_shape_problem(body, engine_profile.error_shape)
    assert shape is None, (f"{case.what} got {_outcome(exchange)}, and {shape} (engine profile "
                           f"{engine_profile.name!r}, features.error_shape: {engine_profile.error_shape})")
    message = error_message(body) or ""
    assert re.search(case.names, message, re.IGNORECASE), (
        f"{case.what} got {_outcome(exchange)} with the message {message!r}, which does not name the problem "
        f"(expected a match for /{case.names}/)")


async def test_engine_keeps_serving_after_invalid_requests(chat, acceptance, engine_profile) -> None:
    before = await chat({"messages": [_USER], "temperature": 0, "max_tokens": 16}, stream=False,
                        label="normal request before the invalid ones")
    assert before.ok, ("the engine did not answer a normal request before this check sent anything invalid "
                       f"({before.describe_failure()}); an earlier request may already have stopped it")
    sent: list[str] = []
    for case_id in CASES:
        if _unaskable(case_id, acceptance, engine_profile) is not None:
            continue  # its own checks are skipped with the reason
        invalid = await chat(_body(case_id, acceptance), stream=False, label=case_id)
        sent.append(f"{case_id}: {_outcome(invalid)}")
        after = await chat({"messages": [_USER], "temperature": 0, "max_tokens": 16}, stream=False,
                           label=f"normal request after {case_id}")
        assert after.ok, (f"the engine stopped serving: after {CASES[case_id].what} ({_outcome(invalid)}) "
                          f"a normal request failed: {after.describe_failure()}")
    attach_json("invalid requests sent, each followed by a normal request", sent, acceptance.redactor)
