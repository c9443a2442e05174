"""Reasoning under a budget (issue 41; docs/agent-traffic.md): the reasoning stays within it, the answer still comes.

An agent caps how long a model may think: vLLM takes ``thinking_token_budget`` (the engine
profile's ``features.thinking_budget_field``), applies it with a reasoning parser and forces the end
of the reasoning once it is spent, so the answer follows. An engine that accepts the budget and
ignores it lets the reasoning run on, past ``max_tokens`` in the worst case, and the reply then has
no answer at all: every check that reads answers names that case ("the reasoning used up
max_tokens", ``assertions.reasoning_used_up``), never "empty content".

The budget sent is the model profile's ``thinking.budget_tokens`` (default 32: the probe's), with
room for the answer after it; the reasoning's tokens are ``usage.completion_tokens_details.reasoning_tokens``
where the engine reports them, else the engine's tokenize endpoint counts the reasoning text.
Reasoning effort (the other budget the engines take) has its checks in test_thinking.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.assertions import reasoning_used_up, reply_of
from engine_acceptance.capabilities.probes.thinking_budget import (
    ANSWER_ROOM,
    DEFAULT_THINKING_BUDGET,
    budget_problem,
    count_reasoning_tokens,
)
from engine_acceptance.profiles.request_options import with_thinking_budget, with_thinking_mode

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.thinking, pytest.mark.requires("thinking_budget")]


def _budget_body(prompts: dict[str, Any], model_profile, engine_profile, budget: int, stream: bool) -> dict[str, Any]:
    case = prompts["thinking"]["warehouse"]
    body: dict[str, Any] = {"messages": [{"role": "user", "content": case["prompt"]}], "temperature": 0,
                            "max_tokens": budget + ANSWER_ROOM}
    if "enabled" in model_profile.thinking_modes:
        # A budget limits reasoning: the model is asked to reason.
        body = with_thinking_mode(body, model_profile, "enabled")
    if stream:
        body["stream_options"] = {"include_usage": True}
    return with_thinking_budget(body, engine_profile, budget)


async def test_reasoning_stays_within_the_thinking_budget_and_the_answer_still_comes(chat, raw_client, prompts,
                                                                                      model_profile, engine_profile,
                                                                                      acceptance, stream,
                                                                                      request) -> None:
    budget = model_profile.thinking_budget_tokens or DEFAULT_THINKING_BUDGET
    field = engine_profile.thinking_budget_field
    if field is None:
        pytest.skip(f"engine profile {engine_profile.name!r} names no thinking_budget_field: no way to send a budget")
    reply = reply_of(await chat(_budget_body(prompts, model_profile, engine_profile, budget, stream), stream=stream,
                                label=f"{field}={budget}"))
    assert reply.reasoning.strip(), f"{field}={budget}: no reasoning in the reply, nothing the budget limited"
    tokens, counted = await count_reasoning_tokens(reply, raw_client, acceptance.target.model,
                                                   acceptance.tokenize_api)
    if tokens is None:
        pytest.skip(f"the reasoning's tokens cannot be counted: {counted}")
    request.node.user_properties.append(("thinking_budget_reasoning_tokens", tokens))
    problem = budget_problem(reply, tokens, budget, str(field))
    used_up = reasoning_used_up(reply)
    assert problem is None, f"{problem} (counted by {counted})" + (f"; {used_up}" if used_up else "")
