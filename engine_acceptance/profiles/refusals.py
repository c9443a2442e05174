"""Which 4xx answers mean "this deployment does not offer that capability".

A probe answered 4xx learned one of two things: the deployment refuses the capability
on purpose (vLLM: ``400 gemma-3-270m is not a multimodal model``), or something in
front of or inside the engine failed (a tool parser that crashes, ``400 Error in
extracting tool call``; an image decoder that cannot read valid media; a firewall's
403). Only the first may skip the capability's checks. The status code cannot tell
them apart, so each engine profile lists, per probed capability, the refusals its
engine sends (status and a pattern of the message, taken from the engine's source);
any other 4xx is broken and its checks run. A capability the user turned off on
purpose is stated with ``--not-served`` or a model profile's ``not_served:``.

Which capabilities a profile may list refusals for (the probed ones) and how each one's
intent is stated are the registry's (:mod:`engine_acceptance.capabilities.registry`).
No pytest here; the engine profile loader builds the rules, discovery applies them.

A refusal that would read a fault as "not offered" is refused when the profile loads,
naming the file and the field: a message pattern that matches an empty message or a
generic error text (``Internal Server Error``, a tool parser's crash, ...;
profiles/generic_texts.py), and a 404 or 405 for a capability without a route of its own
(the registry's ``own_route``): a chat capability's 404 is a wrong path or a proxy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine_acceptance.capabilities.registry import CAPABILITIES, stated_intent
from engine_acceptance.capabilities.registry import capability as registry_entry
from engine_acceptance.profiles.generic_texts import matches_generic_error

__all__ = ["ROUTE_MISSING", "Refusal", "RefusalRules", "parse_refusals", "unrecognized_note"]

# The statuses that say a route is not there: a refusal only of a capability with a route of its own.
ROUTE_MISSING = (404, 405)


@dataclass(frozen=True)
class Refusal:
    """One answer that means "not offered": its HTTP status and a regular expression its message matches."""

    status: int
    message: re.Pattern[str]

    def matches(self, status: int, text: str) -> bool:
        return status == self.status and self.message.search(text) is not None


@dataclass(frozen=True)
class RefusalRules:
    """An engine profile's refusals, per capability, and the profile's name for the evidence."""

    profile: str
    by_capability: Mapping[str, tuple[Refusal, ...]] = field(default_factory=dict)
    # For a request every chat server must answer (the plain question): no 4xx is a refusal,
    # and no --not-served is offered for it.
    plain_request: bool = False

    def recognizes(self, capability: str, status: int, text: str) -> bool:
        return any(refusal.matches(status, text) for refusal in self.by_capability.get(capability, ()))


def unrecognized_note(rules: RefusalRules, capability: str) -> str:
    """What broken evidence says after the engine's words: not a known refusal, and how to state the intent
    (empty for the plain chat request, whose every failure is a fault)."""
    if rules.plain_request:
        return ""  # the evidence already says a plain chat request failed
    return (f"not a refusal engine profile {rules.profile!r} recognizes for {capability}; "
            f"{stated_intent(capability)}")


def parse_refusals(data: Mapping[str, Any] | None, path: Path,
                   error: type[Exception]) -> dict[str, tuple[Refusal, ...]]:
    """The ``refusals:`` mapping of an engine profile (already schema-checked), each message compiled.

    A message that is not a regular expression, or one that matches a generic error text, and a
    404 or 405 for a capability without a route of its own, raise `error` naming the file and the field.
    """
    parsed: dict[str, tuple[Refusal, ...]] = {}
    for capability, entries in (data or {}).items():
        refusals = []
        for index, entry in enumerate(entries):
            field_name = f"{path}: field refusals/{capability}/{index}"
            try:
                pattern = re.compile(entry["message"])
            except re.error as exc:
                raise error(f"{field_name}/message: {entry['message']!r} is not a regular expression ({exc})") from exc
            generic = matches_generic_error(pattern)
            if generic is not None:
                raise error(f"{field_name}/message: {entry['message']!r} matches {generic}, what an engine or a proxy "
                            f"answers when something fails, so it would read a fault as {capability} not offered; "
                            f"write the engine's own words for declining {capability}, taken from its source (like "
                            f"' is not a multimodal model$')")
            status = int(entry["status"])
            if status in ROUTE_MISSING and not registry_entry(capability).own_route:
                routed = ", ".join(entry.name for entry in CAPABILITIES if entry.own_route)
                raise error(f"{field_name}/status: {status} for {capability}, which has no route of its own: "
                            f"{capability} rides on /v1/chat/completions, where {status} means a wrong path or a proxy "
                            f"in front of the engine, not {capability} declined; only a capability served on a route "
                            f"of its own (the registry's own_route: {routed}) may list 404 or 405")
            refusals.append(Refusal(status, pattern))
        parsed[capability] = tuple(refusals)
    return parsed
