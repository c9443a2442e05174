"""Probe of the Responses API: one short ``POST /v1/responses``."""

from __future__ import annotations

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, body_text, cap, refusal_or_fault
from engine_acceptance.profiles.refusals import RefusalRules
from engine_acceptance.wire.types import Exchange

__all__ = ["RESPONSES_PATH", "classify_responses", "probe_responses"]

RESPONSES_PATH = "/v1/responses"
_RESPONSES_INPUT = "Say hello."


def classify_responses(exchange: Exchange, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the Responses API probe.

    A server without the endpoint answers 404 (vLLM and SGLang are FastAPI apps: "Not Found")
    or 405: not served, in its words, when the engine profile lists that refusal. Served: a
    2xx whose body is a response object with an output list. Anything else (a proxy's 403,
    a 5xx, a 200 that is not a response) is broken: the checks run and say what is wrong.
    """
    outcome = refusal_or_fault(exchange, "responses", rules, f"POST {RESPONSES_PATH}: ")
    if outcome is not None:
        return outcome
    body = exchange.body
    if not isinstance(body, dict) or body.get("object") != "response" or not isinstance(body.get("output"), list):
        return "broken", cap(f"POST {RESPONSES_PATH}: HTTP {exchange.status} without a response object: "
                             f"{body_text(exchange)}")
    kinds = ", ".join(str(item.get("type")) for item in body["output"] if isinstance(item, dict)) or "no items"
    return "served", cap(f"POST {RESPONSES_PATH}: HTTP {exchange.status}: status {body.get('status')!r}, "
                         f"output {kinds}")


async def probe_responses(context: ProbeContext) -> Probe:
    body = {"model": context.model, "input": _RESPONSES_INPUT, "max_output_tokens": context.max_tokens,
            "temperature": 0}
    state, evidence = classify_responses(await context.raw.post(RESPONSES_PATH, body, stream=False), context.rules)
    return Probe("responses", state, evidence)
