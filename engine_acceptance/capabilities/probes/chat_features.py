"""Probes of chat features: tool calls, reasoning, and the switch that turns thinking on and off.

The known thinking switches are data (:data:`THINKING_SWITCHES`); the one under which
reasoning disappears when off and is present when on becomes the thinking modes the
checks send. The plain reasoning question goes first; the switches, each off and on,
right after it, all at once. Each switch form is judged like any capability's request: a
4xx the engine profile lists is that switch refused, anything else that is not a usable
reply is a fault (:func:`judge_reasoning`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine_acceptance.capabilities.probes.base import (EVIDENCE_CHARS, Probe, ProbeContext, body_text, cap,
                                                        chat_body, classify_exchange, engine_words)
from engine_acceptance.capabilities.registry import stated_intent
from engine_acceptance.profiles.refusals import RefusalRules, unrecognized_note
from engine_acceptance.profiles.request_options import deep_merge
from engine_acceptance.profiles.tool_schemas import load_tool
from engine_acceptance.wire.types import Exchange

__all__ = ["REASONING_MARKERS", "THINKING_SWITCHES", "SwitchAnswer", "SwitchTrial", "ThinkingSwitch", "answer_of",
           "judge_reasoning", "probe_reasoning", "probe_tools", "switch_rules"]

# The capability a switch's answers are judged for.
THINKING = "thinking_modes"
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


@dataclass(frozen=True)
class SwitchAnswer:
    """How the engine answered one form of a switch: a reply, a refusal its profile lists, or a fault."""

    state: str  # served, not_served (a refusal the engine profile lists) or broken
    form: str  # the request fields: chat_template_kwargs.enable_thinking=true
    said: str  # what the engine answered, capped: "HTTP 500: Internal server error", "HTTP 200: content '42'"
    # A 4xx that refuses the request, not the client: an engine profile could list it as a refusal.
    may_refuse: bool = False
    reasoning: str | None = None  # for a reply: "field", "markers" or None (see _reasoning_seen)
    reasoning_fields: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        return f"{self.form}: {self.said}"

    def fault_evidence(self, rules: RefusalRules, capability: str, others: int = 0) -> str:
        """The engine's words for a broken form (and how many `others` failed), then the way to state
        `capability` off on purpose."""
        words = self.words + (f" ({others} more switch{'es' if others != 1 else ''} failed too)" if others else "")
        if self.may_refuse:
            return f"{words}: {unrecognized_note(rules, capability)}"
        return f"{words}; {stated_intent(capability)}"


def switch_rules(rules: RefusalRules) -> RefusalRules:
    """The refusals of a thinking switch: what the engine profile lists under thinking_modes or reasoning.

    A deployment that does not offer reasoning may refuse every switch; one that offers it
    may refuse a switch its model's template does not take. Either is the engine's refusal
    of the switch, recognized only as the profile lists it (status and message).
    """
    return RefusalRules(rules.profile, {THINKING: (*rules.by_capability.get(THINKING, ()),
                                                   *rules.by_capability.get("reasoning", ()))})


def answer_of(exchange: Exchange, fields: Mapping[str, Any], rules: RefusalRules) -> SwitchAnswer:
    """How one switch form was answered, judged by `rules` (:func:`switch_rules`)."""
    form = _fields_text(fields)
    failed = engine_words(exchange)
    if failed is None:
        # A 2xx: a usable reply, or broken (nothing in it, or not readable).
        state, evidence = classify_exchange(exchange, THINKING, rules)
        reply = exchange.reply
        return SwitchAnswer(state, form, evidence, reasoning=_reasoning_seen(exchange) if state == "served" else None,
                            reasoning_fields=tuple(reply.reasoning_fields) if reply is not None else ())
    said, may_refuse = failed
    recognized = may_refuse and exchange.status is not None and rules.recognizes(THINKING, exchange.status,
                                                                                  body_text(exchange))
    return SwitchAnswer("not_served" if recognized else "broken", form, cap(said, EVIDENCE_CHARS - 40), may_refuse)


@dataclass(frozen=True)
class _Judged:
    """One switch's two forms, each answer judged."""

    switch: ThinkingSwitch
    off: SwitchAnswer
    on: SwitchAnswer

    @property
    def works(self) -> bool:
        """Reasoning is gone when off and there when on, in two usable replies."""
        return (self.off.state == "served" and self.off.reasoning is None
                and self.on.state == "served" and self.on.reasoning is not None)

    @property
    def fault(self) -> SwitchAnswer | None:
        """The first form that broke the engine (not a refusal the profile lists, not a usable reply)."""
        return next((answer for answer in (self.off, self.on) if answer.state == "broken"), None)

    @property
    def refusal(self) -> SwitchAnswer | None:
        return next((answer for answer in (self.off, self.on) if answer.state == "not_served"), None)


async def probe_reasoning(context: ProbeContext) -> tuple[Probe, Probe]:
    """Reasoning by default; then, if the plain request was answered, every known switch off and on at once."""
    chat = context.chat
    base = chat_body([{"role": "user", "content": _REASONING_PROMPT}], context.max_tokens)
    plain = await chat.chat(base, stream=False)
    if classify_exchange(plain, "reasoning", _PLAIN)[0] != "served":
        # Nothing to learn from the switches of an engine that fails the plainest request,
        # and no reason to send six more requests into a fault.
        return judge_reasoning(plain, [], context.rules)
    forms = [deep_merge(base, fields) for switch in THINKING_SWITCHES for fields in (switch.disabled, switch.enabled)]
    replies = await asyncio.gather(*(chat.chat(body, stream=False) for body in forms))
    trials = [SwitchTrial(switch, replies[2 * i], replies[2 * i + 1]) for i, switch in enumerate(THINKING_SWITCHES)]
    return judge_reasoning(plain, trials, context.rules)


def judge_reasoning(plain: Exchange, trials: Sequence[SwitchTrial], rules: RefusalRules) -> tuple[Probe, Probe]:
    """The reasoning and thinking_modes probes from the plain reply and each switch's two replies.

    Reasoning is served when the plain reply reasons (in a reasoning field), or when a
    switch's "on" form makes it reason; markers in content instead are broken (reasoning
    not separated). The first switch under which reasoning is gone when off and present
    when on gives the thinking modes.

    A switch form is judged like any capability's request (`rules`: the engine profile's
    refusals, :func:`switch_rules`): a 4xx the profile lists under ``thinking_modes`` or
    ``reasoning`` is that switch refused, and another switch may work; any other 4xx, a
    5xx, a lost answer or an unusable reply is a fault, and thinking_modes is broken
    whatever the model does by default. Reasoning too is broken when the model does not
    reason by default and the form that would turn it on faulted: whether it reasons
    cannot be told.
    """
    state, evidence = classify_exchange(plain, "reasoning", _PLAIN)
    if state != "served":
        # The plainest chat request failed: nothing about reasoning can be told, and
        # whatever is wrong must fail the checks, not skip them.
        why = cap(f"a plain chat request failed: {evidence}")
        return Probe("reasoning", "broken", why), Probe("thinking_modes", "broken", why)
    by_switch = switch_rules(rules)
    judged = [_Judged(t.switch, answer_of(t.off, t.switch.disabled, by_switch),
                      answer_of(t.on, t.switch.enabled, by_switch)) for t in trials]
    reasoning = _judge_default(plain, judged, rules)
    return reasoning, _judge_switches(judged, reasoning, rules)


def _judge_default(plain: Exchange, judged: Sequence[_Judged], rules: RefusalRules) -> Probe:
    """The reasoning probe: by default, else as the first switch turns it on."""
    default = _reasoning_seen(plain)
    fields = plain.reply.reasoning_fields if plain.reply is not None else []
    if default == "field":
        return Probe("reasoning", "served", cap(f"reasoning by default, in {', '.join(fields)}"),
                     {"default_on": True, "fields": list(fields)})
    if default == "markers":
        return Probe("reasoning", "broken", cap(
            f"no reasoning field, but content holds reasoning markers ({', '.join(REASONING_MARKERS)}): "
            f"reasoning is not separated (no reasoning parser?): {plain.reply.content.strip()!r}"),
            {"default_on": True, "fields": []})
    turned_on = next((j.on for j in judged if j.on.state == "served" and j.on.reasoning), None)
    if turned_on is not None:
        in_field = turned_on.reasoning == "field"
        return Probe("reasoning", "served" if in_field else "broken",
                     cap(f"no reasoning by default; {turned_on.form} turns it on"
                         + (f", in {', '.join(turned_on.reasoning_fields)}" if in_field
                            else ", as markers in content (no parser?)")),
                     {"default_on": False, "fields": list(turned_on.reasoning_fields)})
    failed_on = next((j.on for j in judged if j.on.state == "broken"), None)
    if failed_on is not None:
        return Probe("reasoning", "broken", "no reasoning by default, and the switch that would turn it on failed: "
                     + failed_on.fault_evidence(rules, "reasoning"), {"default_on": False, "fields": []})
    return Probe("reasoning", "not_served", "no reasoning in the reply")


def _judge_switches(judged: Sequence[_Judged], reasoning: Probe, rules: RefusalRules) -> Probe:
    """The thinking_modes probe: broken on any fault, else the first switch that works, else not served."""
    faults = [fault for j in judged if (fault := j.fault) is not None]
    if faults:
        return Probe("thinking_modes", "broken", faults[0].fault_evidence(rules, THINKING, others=len(faults) - 1))
    working = [j for j in judged if j.works]
    if working:
        chosen = working[0].switch
        others = [j.switch.name for j in working[1:]]
        return Probe(
            "thinking_modes", "served",
            cap(f"{_fields_text(chosen.disabled)} turns reasoning off, "
                f"{_fields_text(chosen.enabled)} on" + (f" (also: {', '.join(others)})" if others else "")),
            {"switch": chosen.name, "modes": {"enabled": dict(chosen.enabled), "disabled": dict(chosen.disabled)}})
    refused = any(j.refusal is not None for j in judged)
    if reasoning.state == "not_served":
        return Probe("thinking_modes", "not_served", cap("no reasoning in the reply, with or without a known switch"
                                                         + (f" (tried {_tried(judged)})" if refused else ""),
                                                         2 * EVIDENCE_CHARS))
    direction = "off" if reasoning.settings.get("default_on") else "both off and on"
    tried = _tried(judged) if refused else ", ".join(j.switch.name for j in judged)
    return Probe("thinking_modes", "not_served",
                 cap(f"no known switch turned reasoning {direction} (tried {tried})", 2 * EVIDENCE_CHARS))


def _tried(judged: Sequence[_Judged]) -> str:
    """What each known switch got: a refusal in the engine's words, else that it was answered."""
    return "; ".join(j.refusal.words if j.refusal is not None else f"{j.switch.name}: answered" for j in judged)
