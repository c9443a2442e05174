"""Probe of a thinking token budget: a question the model reasons about, asked with a small budget.

Where the engine profile names the request field (vLLM's ``thinking_token_budget``), the probe asks
with a budget of :data:`DEFAULT_THINKING_BUDGET` tokens and room for an answer after it:

* the engine's own refusal (vLLM without ``--reasoning-parser``: "thinking_token_budget is set but
  reasoning_config is not configured"), listed in the engine profile: **not served**;
* reasoning within the budget (plus the end-of-thinking marker an engine forces), then an answer: **served**;
* reasoning past the budget, or no answer after it: **broken** (an engine that ignores the field
  looks the same as one that takes none: the evidence names ``--not-served thinking_budget``);
* no reasoning at all, as asked nor with any known thinking switch turned on: **not served** (a model
  that does not reason has nothing to budget). A deployment that reasons only when a switch asks (vLLM's
  qwen3 parser with thinking off by default) is probed with the first switch that turns it on.

The reasoning's tokens are what the reply's usage reports (``completion_tokens_details.reasoning_tokens``,
SGLang's top-level ``reasoning_tokens``: ``REASONING_TOKENS_PATHS``) where the engine reports them, else
the engine's tokenize endpoint counts the reasoning text.
"""

from __future__ import annotations

from typing import Any

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, cap, chat_body, readable_reply
from engine_acceptance.capabilities.probes.chat_features import THINKING_SWITCHES
from engine_acceptance.capabilities.registry import stated_intent
from engine_acceptance.profiles.request_options import deep_merge, with_thinking_budget
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.reassembly import REASONING_TOKENS_PATHS, Reply
from engine_acceptance.wire.tokenize_api import TokenizeApi

__all__ = ["ANSWER_ROOM", "BUDGET_SLACK", "DEFAULT_THINKING_BUDGET", "budget_problem", "count_reasoning_tokens",
           "probe_thinking_budget"]

# The budget the probe sends, and the checks where the model profile states none (thinking.budget_tokens).
DEFAULT_THINKING_BUDGET = 32
# Tokens a reply may count as reasoning beyond the budget: the end-of-thinking marker the engine forces
# once the budget is spent (vLLM appends it), and a newline around it.
BUDGET_SLACK = 4
# Output tokens left for the answer after the budget.
ANSWER_ROOM = 96
_QUESTION = "What is 17 + 25? Answer with the number only."


async def count_reasoning_tokens(reply: Reply, raw: RawStreamingClient, model: str,
                                 api: TokenizeApi | None) -> tuple[int | None, str]:
    """The reply's reasoning tokens and how they were counted; None (and why) when nothing can count them."""
    reported = reply.usage.first_detail(REASONING_TOKENS_PATHS) if reply.usage is not None else None
    if reported is not None:
        return reported[0], f"usage.{reported[1]}"
    if api is None:
        return None, "usage reports no reasoning tokens and there is no tokenize endpoint to count with"
    exchange = await raw.post(api.endpoint, api.text_request(model, reply.reasoning), stream=False)
    count = api.count_in(exchange.body)
    if exchange.status == 200 and count is not None:
        return count, f"POST {api.endpoint} of the reasoning text"
    return None, f"POST {api.endpoint} could not count the reasoning: {exchange.describe_failure()}"


def budget_problem(reply: Reply, tokens: int | None, budget: int, field: str) -> str | None:
    """What is wrong with a reply to a request that set a thinking budget of `budget` tokens, or None."""
    if tokens is not None and tokens > budget + BUDGET_SLACK:
        return (f"the reasoning ran {tokens} tokens with {field}={budget} (at most {budget + BUDGET_SLACK} with the "
                "end-of-thinking marker): the thinking budget is not applied")
    if not reply.content.strip():
        return (f"the reasoning stopped within {field}={budget}, yet no answer came after it "
                f"(finish_reason {reply.finish_reason!r}, content empty)")
    return None


async def _reasoning_reply(context: ProbeContext, body: dict[str, Any]) -> tuple[Reply | tuple[str, str], str]:
    """The budget question's reply, and how reasoning was turned on ("" as sent).

    A deployment that reasons only when asked (vLLM's qwen3 parser with thinking off by default) gives
    no reasoning to a plain request: the known switches are tried in turn, the first reply that reasons
    is the one judged. A switch the deployment refuses is the thinking_modes probe's to judge.
    """
    reply = readable_reply(await context.chat.chat(body, stream=False), "thinking_budget", context.rules)
    if isinstance(reply, tuple) or reply.reasoning.strip():
        return reply, ""
    for switch in THINKING_SWITCHES:
        answer = readable_reply(await context.chat.chat(deep_merge(body, switch.enabled), stream=False),
                                "thinking_budget", context.rules)
        if not isinstance(answer, tuple) and answer.reasoning.strip():
            return answer, f" with {switch.name} on"
    return reply, ""


async def probe_thinking_budget(context: ProbeContext) -> Probe:
    profile = context.engine_profile
    field = profile.thinking_budget_field
    if field is None:
        return Probe("thinking_budget", "not_probed",
                     f"engine profile {profile.name!r} names no thinking_budget_field: no way to send a budget")
    body = with_thinking_budget(chat_body([{"role": "user", "content": _QUESTION}],
                                          DEFAULT_THINKING_BUDGET + ANSWER_ROOM), profile, DEFAULT_THINKING_BUDGET)
    reply, switched = await _reasoning_reply(context, body)
    if isinstance(reply, tuple):
        return Probe("thinking_budget", *reply)
    if not reply.reasoning.strip():
        return Probe("thinking_budget", "not_served", "no reasoning in the reply, with or without a known thinking "
                                                      "switch: nothing for a budget to limit")
    tokens, counted = await count_reasoning_tokens(reply, context.raw, context.model, profile.tokenize_api)
    if tokens is None:
        return Probe("thinking_budget", "not_probed", cap(f"the reasoning's tokens cannot be counted: {counted}"))
    problem = budget_problem(reply, tokens, DEFAULT_THINKING_BUDGET, field)
    if problem is not None:
        return Probe("thinking_budget", "broken", f"{cap(problem, 140)}; {stated_intent('thinking_budget')}")
    return Probe("thinking_budget", "served", cap(f"{field}={DEFAULT_THINKING_BUDGET}{switched}: reasoning of {tokens} tokens "
                                                  f"({counted}), then the answer {reply.content.strip()!r}"),
                 {"field": field})
