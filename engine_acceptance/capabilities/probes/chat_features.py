"""Probes of chat features: tool calls, reasoning, and the switch that turns thinking on and off.

The known thinking switches are data (:data:`THINKING_SWITCHES`); the one under which
reasoning disappears when off and is present when on becomes the thinking modes the
checks send. The plain reasoning question goes first; the switches, each off and on,
right after it, all at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, cap, chat_body, classify_exchange
from engine_acceptance.profiles.refusals import ANY_CLIENT_ERROR, RefusalRules
from engine_acceptance.profiles.request_options import deep_merge
from engine_acceptance.profiles.tool_schemas import load_tool
from engine_acceptance.wire.types import Exchange

__all__ = ["REASONING_MARKERS", "THINKING_SWITCHES", "SwitchTrial", "ThinkingSwitch", "judge_reasoning",
           "probe_reasoning", "probe_tools"]

# Markers of reasoning left in content by a server without a reasoning parser.
REASONING_MARKERS = ("<think>", "</think>")

_TOOL_PROMPT = "What is the weather in Paris right now? Use the tool."
# A question a reasoning model reasons about, and any model answers in a few tokens.
_REASONING_PROMPT = "What is 17 + 25? Answer with the number only."

# The plain reasoning question recognizes no refusal: a 4xx to the plainest chat request is a
# fault whatever the engine profile lists (judge_reasoning calls it broken).
_PLAIN = RefusalRules("(none)", plain_request=True)


@dataclass(frozen=True)
class ThinkingSwitch:
    """One known way to turn a model's thinking on and off: the request fields of each form."""

    name: str
    used_by: str
    enabled: Mapping[str, Any]
    disabled: Mapping[str, Any]


# The known switches, tried on every deployment; the first that works is used. Each
# is what the model's chat template reads from chat_template_kwargs.
THINKING_SWITCHES: tuple[ThinkingSwitch, ...] = (
    ThinkingSwitch("enable_thinking", "Qwen3, GLM-4.5 and later",
                   enabled={"chat_template_kwargs": {"enable_thinking": True}},
                   disabled={"chat_template_kwargs": {"enable_thinking": False}}),
    ThinkingSwitch("thinking", "DeepSeek-V3.1",
                   enabled={"chat_template_kwargs": {"thinking": True}},
                   disabled={"chat_template_kwargs": {"thinking": False}}),
    ThinkingSwitch("thinking_mode", "MiniMax-M3 (seed 001)",
                   enabled={"chat_template_kwargs": {"thinking_mode": "enabled"}},
                   disabled={"chat_template_kwargs": {"thinking_mode": "disabled"}}),
)


async def probe_tools(context: ProbeContext) -> Probe:
    body = chat_body([{"role": "user", "content": _TOOL_PROMPT}], context.max_tokens,
                     tools=[load_tool("get_weather")], tool_choice="auto")
    state, evidence = classify_exchange(await context.chat.chat(body, stream=False), "tools", context.rules)
    return Probe("tools", state, evidence)


def _reasoning_seen(exchange: Exchange) -> str | None:
    """``field`` when the reply reasons in its reasoning field, ``markers`` when in content, else None."""
    reply = exchange.reply
    if reply is None:
        return None
    if reply.reasoning.strip():
        return "field"
    if any(marker in reply.content for marker in REASONING_MARKERS):
        return "markers"
    return None


def _fields_text(fields: Mapping[str, Any], prefix: str = "") -> str:
    """``chat_template_kwargs.enable_thinking=false`` for a switch's request fields."""
    parts = []
    for key, value in fields.items():
        if isinstance(value, Mapping):
            parts.append(_fields_text(value, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key}={json.dumps(value)}")
    return ", ".join(parts)


@dataclass(frozen=True)
class SwitchTrial:
    """One known switch tried on the reasoning question: the reply with it off, and with it on."""

    switch: ThinkingSwitch
    off: Exchange
    on: Exchange

    # A switch the engine answers with a 4xx is a switch this deployment does not take (another
    # may work): that is no fault of the capability, whatever the engine profile lists.
    @property
    def off_outcome(self) -> tuple[str, str]:
        return classify_exchange(self.off, "thinking_modes", ANY_CLIENT_ERROR)

    @property
    def on_outcome(self) -> tuple[str, str]:
        return classify_exchange(self.on, "thinking_modes", ANY_CLIENT_ERROR)

    @property
    def works(self) -> bool:
        """Reasoning is gone when off and there when on, in two usable replies."""
        return (self.off_outcome[0] == "served" and _reasoning_seen(self.off) is None
                and self.on_outcome[0] == "served" and _reasoning_seen(self.on) is not None)

    def fault(self) -> str | None:
        """Evidence when either form broke the engine (not a refusal, not a reply)."""
        for form, (state, evidence) in (("off", self.off_outcome), ("on", self.on_outcome)):
            if state == "broken":
                fields = self.switch.disabled if form == "off" else self.switch.enabled
                return f"{_fields_text(fields)}: {evidence}"
        return None


async def probe_reasoning(context: ProbeContext) -> tuple[Probe, Probe]:
    """Reasoning by default; then, if the plain request was answered, every known switch off and on at once."""
    chat = context.chat
    base = chat_body([{"role": "user", "content": _REASONING_PROMPT}], context.max_tokens)
    plain = await chat.chat(base, stream=False)
    if classify_exchange(plain, "reasoning", _PLAIN)[0] != "served":
        # Nothing to learn from the switches of an engine that fails the plainest request,
        # and no reason to send six more requests into a fault.
        return judge_reasoning(plain, [])
    forms = [deep_merge(base, fields) for switch in THINKING_SWITCHES for fields in (switch.disabled, switch.enabled)]
    replies = await asyncio.gather(*(chat.chat(body, stream=False) for body in forms))
    trials = [SwitchTrial(switch, replies[2 * i], replies[2 * i + 1]) for i, switch in enumerate(THINKING_SWITCHES)]
    return judge_reasoning(plain, trials)


def judge_reasoning(plain: Exchange, trials: Sequence[SwitchTrial]) -> tuple[Probe, Probe]:
    """The reasoning and thinking_modes probes from the plain reply and each switch's two replies.

    Reasoning is served when the plain reply reasons (in a reasoning field), or when a
    switch's "on" form makes it reason; markers in content instead are broken (reasoning
    not separated). The first switch under which reasoning is gone when off and present
    when on gives the thinking modes.
    """
    state, evidence = classify_exchange(plain, "reasoning", _PLAIN)
    if state != "served":
        # The plainest chat request failed: nothing about reasoning can be told, and
        # whatever is wrong must fail the checks, not skip them.
        why = cap(f"a plain chat request failed: {evidence}")
        return Probe("reasoning", "broken", why), Probe("thinking_modes", "broken", why)
    default = _reasoning_seen(plain)
    turned_on = next((t for t in trials if t.on_outcome[0] == "served" and _reasoning_seen(t.on)), None)
    working = [t for t in trials if t.works]

    fields = plain.reply.reasoning_fields if plain.reply is not None else []
    if default == "field":
        reasoning = Probe("reasoning", "served", cap(f"reasoning by default, in {', '.join(fields)}"),
                          {"default_on": True, "fields": list(fields)})
    elif default == "markers":
        reasoning = Probe("reasoning", "broken", cap(
            f"no reasoning field, but content holds reasoning markers ({', '.join(REASONING_MARKERS)}): "
            f"reasoning is not separated (no reasoning parser?): {plain.reply.content.strip()!r}"),
            {"default_on": True, "fields": []})
    elif turned_on is not None:
        on_fields = turned_on.on.reply.reasoning_fields if turned_on.on.reply is not None else []
        seen = _reasoning_seen(turned_on.on)
        reasoning = Probe(
            "reasoning", "served" if seen == "field" else "broken",
            cap(f"no reasoning by default; {_fields_text(turned_on.switch.enabled)} turns it on"
                + (f", in {', '.join(on_fields)}" if seen == "field" else ", as markers in content (no parser?)")),
            {"default_on": False, "fields": list(on_fields)})
    else:
        reasoning = Probe("reasoning", "not_served", "no reasoning in the reply")

    if working:
        chosen = working[0]
        others = [t.switch.name for t in working[1:]]
        thinking = Probe(
            "thinking_modes", "served",
            cap(f"{_fields_text(chosen.switch.disabled)} turns reasoning off, "
                f"{_fields_text(chosen.switch.enabled)} on" + (f" (also: {', '.join(others)})" if others else "")),
            {"switch": chosen.switch.name,
             "modes": {"enabled": dict(chosen.switch.enabled), "disabled": dict(chosen.switch.disabled)}})
    elif reasoning.state == "not_served":
        thinking = Probe("thinking_modes", "not_served", "no reasoning in the reply, with or without a known switch")
    elif (fault := next((f for t in trials if (f := t.fault())), None)) is not None:
        thinking = Probe("thinking_modes", "broken", cap(fault))
    else:
        direction = "off" if default else "both off and on"
        tried = ", ".join(t.switch.name for t in trials)
        thinking = Probe("thinking_modes", "not_served", cap(f"no known switch turned reasoning {direction} "
                                                             f"(tried {tried})"))
    return reasoning, thinking
