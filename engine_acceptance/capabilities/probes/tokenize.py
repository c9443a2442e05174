"""Probe of the engine's tokenize endpoint, which the token counts use when it is served.

The route is the engine profile's ``features.tokenize_endpoint``, else ``/tokenize``
(vLLM and SGLang both have it even where a profile does not say), and the body the
profile's ``features.tokenize_body`` (:mod:`engine_acceptance.wire.tokenize_api`): vLLM's
``{"prompt"}`` unless it says llama-server's ``{"content"}``. llama-server answers a body it
does not read with an empty list, so an empty list says which body the engine may want.
"""

from __future__ import annotations

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, body_text, cap, refusal_or_fault
from engine_acceptance.profiles.refusals import RefusalRules
from engine_acceptance.wire.tokenize_api import TOKENIZE_BODIES, TokenizeApi
from engine_acceptance.wire.types import Exchange

__all__ = ["DEFAULT_TOKENIZE_ENDPOINT", "classify_tokenize", "probe_tokenize"]

# Any server may have it even when its engine profile does not say (vLLM, SGLang both do).
DEFAULT_TOKENIZE_ENDPOINT = "/tokenize"
_TOKENIZE_TEXT = "hello"


def classify_tokenize(exchange: Exchange, api: TokenizeApi, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the tokenize probe: 200 with a token list or count is served."""
    endpoint = api.endpoint
    outcome = refusal_or_fault(exchange, "tokenize", rules, f"POST {endpoint}: ")
    if outcome is not None:
        return outcome
    body = exchange.body
    tokens = body.get("tokens") if isinstance(body, dict) else None
    count = body.get("count") if isinstance(body, dict) else None
    if isinstance(tokens, list) and tokens and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return "served", f"POST {endpoint}: {len(tokens)} token(s) for {_TOKENIZE_TEXT!r}"
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return "served", f"POST {endpoint}: count {count} for {_TOKENIZE_TEXT!r}"
    sent = f"sent {TOKENIZE_BODIES[api.body]}"
    if tokens == [] and count is None:
        others = "; ".join(f"{name!r}, {shape}" for name, shape in TOKENIZE_BODIES.items() if name != api.body)
        return "broken", cap(f"POST {endpoint}: HTTP {exchange.status} with an empty token list for "
                             f"{_TOKENIZE_TEXT!r} ({sent}): the engine may take another body "
                             f"(features.tokenize_body: {others})")
    return "broken", cap(f"POST {endpoint}: HTTP {exchange.status} without a token list or count ({sent}): "
                         f"{body_text(exchange)}")


async def probe_tokenize(context: ProbeContext) -> Probe:
    api = TokenizeApi(context.engine_profile.tokenize_endpoint or DEFAULT_TOKENIZE_ENDPOINT,
                      context.engine_profile.tokenize_body)
    exchange = await context.raw.post(api.endpoint, api.text_request(context.model, _TOKENIZE_TEXT,
                                                                     special_tokens=None), stream=False)
    state, evidence = classify_tokenize(exchange, api, context.rules)
    return Probe("tokenize", state, evidence,
                 {"endpoint": api.endpoint, "body": api.body} if state != "not_served" else {})
