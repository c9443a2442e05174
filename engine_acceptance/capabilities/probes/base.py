"""What every probe family shares: a probe's result, what it is given, and how a single reply is judged.

Each capability comes out of its probe in one of four states:

* ``served``: a usable reply.
* ``not_served``: a 4xx the engine profile lists as this engine's refusal of the
  capability (``refusals:``, :mod:`engine_acceptance.profiles.refusals`); its evidence
  is the engine's own words (vLLM: ``400 gemma-3-270m is not a multimodal model``,
  ``400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser
  to be set``).
* ``broken``: anything else: any other 4xx (a crashing tool parser's 400, a decoder
  that cannot read valid media, a proxy's 403: the evidence says it is no refusal the
  profile recognizes and names ``--not-served CAP``), a 5xx, a timeout, a failed
  connection, a malformed reply, a 200 that is not a usable reply. Broken counts as
  served: the checks run and fail, naming the fault, rather than being skipped.
* ``not_probed``: the suite cannot ask, and says why (the engine profile does not
  say how a video is sent, the committed media are missing).

Probes go through the suite's own clients (:class:`SdkChatClient` for chat,
:class:`RawStreamingClient` for other routes), so a probe sees what a check would see
and never raises on a bad reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.profiles.refusals import RefusalRules, unrecognized_note
from engine_acceptance.wire.client import RawStreamingClient, SdkChatClient
from engine_acceptance.wire.contract import error_message
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.reassembly import Reply

__all__ = [
    "CAPABILITY_STATES",
    "EVIDENCE_CHARS",
    "PROBE_MAX_TOKENS",
    "Probe",
    "ProbeContext",
    "body_text",
    "cap",
    "chat_body",
    "classify_exchange",
    "engine_words",
    "readable_reply",
    "refusal_or_fault",
]

CAPABILITY_STATES = ("served", "not_served", "broken", "not_probed")
# Enough for a reasoning model to start reasoning and for any model to answer a word;
# small enough that the whole discovery costs a few dozen tokens per probe.
PROBE_MAX_TOKENS = 32
# Evidence goes into a table cell and gate.json: the engine's words, capped.
EVIDENCE_CHARS = 200
# 4xx answers that refuse the client, not the capability: auth, a proxy's auth,
# a request timeout, rate limiting. A probe answered so learned nothing: broken.
NOT_A_REFUSAL = frozenset({401, 407, 408, 429})


@dataclass(frozen=True)
class Probe:
    """What one capability's probe found."""

    capability: str
    state: str
    evidence: str
    # What the checks need to use the capability (request fields, an endpoint).
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.state not in CAPABILITY_STATES:
            raise ValueError(f"probe of {self.capability!r}: state {self.state!r} is not one of "
                             f"{', '.join(CAPABILITY_STATES)}")

    @property
    def served(self) -> bool:
        """Whether the checks of this capability run: broken counts as served (they run and fail)."""
        return self.state in ("served", "broken")

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "evidence": self.evidence, "settings": self.settings}

    @classmethod
    def from_dict(cls, capability: str, data: Mapping[str, Any]) -> "Probe":
        return cls(capability, data["state"], data["evidence"], dict(data.get("settings") or {}))


@dataclass(frozen=True)
class ProbeContext:
    """What every probe is given: the clients, the engine profile and its refusals, the media, the token cap."""

    chat: SdkChatClient
    raw: RawStreamingClient
    model: str
    engine_profile: EngineProfile
    media_dir: Path
    max_tokens: int

    @property
    def rules(self) -> RefusalRules:
        return self.engine_profile.refusal_rules


def cap(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def chat_body(messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "temperature": 0, "max_tokens": max_tokens, **extra}


def body_text(exchange: Exchange) -> str:
    """The engine's words in an answer: the error message, else the body or raw bytes."""
    message = error_message(exchange.body)
    if message is not None:
        return message
    if exchange.body is not None:
        return exchange.body if isinstance(exchange.body, str) else json.dumps(exchange.body, ensure_ascii=False,
                                                                               default=str)
    return exchange.raw.decode("utf-8", "replace") or "(empty body)"


def engine_words(exchange: Exchange, where: str = "") -> tuple[str, bool] | None:
    """None for a 2xx that arrived whole; else what the engine answered, led by `where`, and whether it may be
    a refusal.

    The words are uncapped: the status and the engine's message (``HTTP 400: ...``), or how
    the answer was lost (a timeout, a reset, no answer). Only a 4xx that refuses the request
    rather than the client (:data:`NOT_A_REFUSAL`) may be a refusal of a capability.
    """
    if exchange.error_kind is not None:
        return f"{where}{exchange.error_kind}: {exchange.error}", False
    status = exchange.status
    if status is None:
        return f"{where}no answer", False
    if 200 <= status < 300:
        return None
    return f"{where}HTTP {status}: {body_text(exchange)}", 400 <= status < 500 and status not in NOT_A_REFUSAL


def refusal_or_fault(exchange: Exchange, capability: str, rules: RefusalRules,
                     where: str = "") -> tuple[str, str] | None:
    """not_served or broken when `exchange` is not a 2xx that arrived whole; None when it is.

    A 4xx is not_served only when `rules` (the engine profile's refusals) recognize it for
    `capability`; any other 4xx is broken, and its evidence says so after the engine's
    words and names the way to state the capability off on purpose. `where` leads the
    evidence (``POST /tokenize: ``).
    """
    answer = engine_words(exchange, where)
    if answer is None:
        return None
    said, may_refuse = answer
    if not may_refuse:
        return "broken", cap(said)
    assert exchange.status is not None  # a 4xx
    if rules.recognizes(capability, exchange.status, body_text(exchange)):
        return "not_served", cap(said)
    note = unrecognized_note(rules, capability)
    # The engine's words first (capped), then the note whole: it names the command.
    return "broken", f"{cap(said, EVIDENCE_CHARS - 40)}: {note}" if note else cap(said)


def readable_reply(exchange: Exchange, capability: str, rules: RefusalRules) -> Reply | tuple[str, str]:
    """The reply of a chat probe answered 2xx and read whole; else its (state, evidence)."""
    outcome = refusal_or_fault(exchange, capability, rules)
    if outcome is not None:
        return outcome
    if exchange.reply is None:
        return "broken", cap(f"HTTP {exchange.status} without a usable reply: {body_text(exchange)}")
    return exchange.reply


def classify_exchange(exchange: Exchange, capability: str, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of one chat probe of `capability`: a usable reply, a refusal `rules` recognize,
    or anything else.

    A usable reply is a 2xx whose reply could be read whole and says something
    (content, reasoning or a tool call); an empty one is broken.
    """
    reply = readable_reply(exchange, capability, rules)
    if isinstance(reply, tuple):
        return reply
    if not (reply.content.strip() or reply.reasoning.strip() or reply.tool_calls):
        return "broken", cap(f"HTTP {exchange.status} with nothing in content, reasoning or tool calls "
                             f"(finish_reason {reply.finish_reason!r})")
    said = (f"called {', '.join(call.name or '?' for call in reply.tool_calls)}" if reply.tool_calls else
            f"content {reply.content.strip()!r}" if reply.content.strip() else "reasoning only")
    return "served", cap(f"HTTP {exchange.status}: {said}")
