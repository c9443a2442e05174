"""Probe of structured outputs: ``response_format`` ``json_schema`` with the smallest telling schema."""

from __future__ import annotations

import json
from typing import Any

from engine_acceptance.capabilities.probes.base import (
    PROBE_MAX_TOKENS,
    Probe,
    ProbeContext,
    cap,
    chat_body,
    readable_reply,
)
from engine_acceptance.profiles.refusals import RefusalRules
from engine_acceptance.wire.types import Exchange

__all__ = ["STRUCTURED_PROBE_SCHEMA", "classify_structured", "probe_structured"]

_STRUCTURED_PROMPT = "Is the sky blue? Answer as JSON."
# The smallest schema that tells a constrained reply from free text: `{"ok": true}` is a few tokens.
STRUCTURED_PROBE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                           "required": ["ok"], "additionalProperties": False}


def classify_structured(exchange: Exchange, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the structured-outputs probe.

    Served: a 2xx whose content is the JSON the schema asks for, or JSON cut at the probe's
    few tokens (a small model may pad a constrained reply with whitespace). A 4xx the
    engine profile recognizes refuses ``response_format`` (not served); free text under a
    2xx means the constraint was ignored: broken, so the checks run and say so.
    """
    reply = readable_reply(exchange, "structured_outputs", rules)
    if isinstance(reply, tuple):
        return reply
    content = reply.content.strip()
    if not content and reply.reasoning.strip():
        # A reasoning model spends the probe's tokens reasoning; the grammar applies after it.
        # Served or broken, the checks run either way: they judge the constraint.
        return "served", cap(f"HTTP {exchange.status}: accepted; reasoning only within {PROBE_MAX_TOKENS} tokens, "
                             "the JSON is judged by the checks")
    try:
        parsed = json.loads(content)
    except ValueError:
        if reply.finish_reason == "length" and content.startswith("{"):
            return "served", cap(f"HTTP {exchange.status}: JSON begun, cut at {PROBE_MAX_TOKENS} tokens: {content!r}")
        return "broken", cap(f"HTTP {exchange.status}: response_format json_schema accepted, but the content is "
                             f"not JSON (the constraint was ignored?): {content!r}")
    if not isinstance(parsed, dict) or not isinstance(parsed.get("ok"), bool):
        return "broken", cap(f"HTTP {exchange.status}: the content is JSON that does not fit the schema "
                             f"{json.dumps(STRUCTURED_PROBE_SCHEMA)}: {content!r}")
    return "served", cap(f"HTTP {exchange.status}: content {content!r}")


async def probe_structured(context: ProbeContext) -> Probe:
    body = chat_body([{"role": "user", "content": _STRUCTURED_PROMPT}], context.max_tokens,
                     response_format={"type": "json_schema",
                                      "json_schema": {"name": "probe", "schema": STRUCTURED_PROBE_SCHEMA,
                                                      "strict": True}})
    state, evidence = classify_structured(await context.chat.chat(body, stream=False), context.rules)
    return Probe("structured_outputs", state, evidence)
