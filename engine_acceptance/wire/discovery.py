"""Capability discovery: ask the deployment what it serves before the checks run.

Why: a model profile lists the capabilities of the models someone wrote a profile
for. A served model without one got the ``generic`` profile, and only text and
streaming were tested, so a deployment serving images, tools or reasoning passed
the gate with all of that untested. A few cheap requests (temperature 0, a few
dozen output tokens, sent together; the thinking switches right after the plain
question) ask the deployment itself instead, and each capability comes out in one
of four states:

* ``served``: a usable reply.
* ``not_served``: a 4xx the engine profile lists as this engine's refusal of the
  capability (``refusals:``, :mod:`engine_acceptance.profiles.refusals`); its evidence
  is the engine's own words (vLLM: ``400 gemma-3-270m is not a multimodal model``,
  ``400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser
  to be set``).
* ``broken``: anything else: any other 4xx (a crashing tool parser's 400, a decoder
  that cannot read valid media, a proxy's 403: the evidence says it is no refusal the
  profile recognizes and names ``--not-served CAP``), a 5xx, a timeout, a failed
  connection, a malformed reply, a 200 that is not a usable reply, an image or video
  answered 200 but not counted in ``usage.prompt_tokens`` (dropped in silence).
  Broken counts as served: the checks run and fail, naming the fault, rather than
  being skipped.
* ``not_probed``: the suite cannot ask, and says why (the engine profile does not
  say how a video is sent, the committed media are missing).

Probes go through the suite's own clients (:class:`SdkChatClient` for chat,
:class:`RawStreamingClient` for ``/tokenize``), so a probe sees what a check
would see and never raises on a bad reply. The known thinking switches are data
(:data:`THINKING_SWITCHES`); the one under which reasoning disappears when off
and is present when on becomes the thinking modes the checks send.

No pytest here: the plugin runs :func:`discover` once in the controller and hands
the result to pytest-xdist workers as JSON (:meth:`Discovery.to_dict`,
:meth:`Discovery.from_dict`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine_acceptance.wire.client import ClientTimeouts, EngineTarget, Exchange, RawStreamingClient, SdkChatClient
from engine_acceptance.wire.reassembly import Reply
from engine_acceptance.wire.media_parts import media_part, user_turn
from engine_acceptance.wire.contract import error_message
from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.profiles.refusals import ANY_CLIENT_ERROR, RefusalRules, unrecognized_note
from engine_acceptance.profiles.request_options import deep_merge
from engine_acceptance.profiles.tool_schemas import load_tool

__all__ = [
    "CAPABILITIES",
    "CAPABILITY_STATES",
    "DEFAULT_TOKENIZE_ENDPOINT",
    "PROBE_MAX_TOKENS",
    "REASONING_MARKERS",
    "THINKING_SWITCHES",
    "Discovery",
    "Probe",
    "SwitchTrial",
    "ThinkingSwitch",
    "STRUCTURED_PROBE_SCHEMA",
    "RESPONSES_PATH",
    "classify_exchange",
    "classify_media",
    "classify_responses",
    "classify_structured",
    "classify_tokenize",
    "discover",
    "judge_reasoning",
]

CAPABILITY_STATES = ("served", "not_served", "broken", "not_probed")
# The model profiles' vocabulary, in the order of the capability table.
CAPABILITIES = ("tools", "image", "video", "reasoning", "thinking_modes", "tokenize", "structured_outputs",
                "responses")
# Enough for a reasoning model to start reasoning and for any model to answer a word;
# small enough that the whole discovery costs a few dozen tokens per probe.
PROBE_MAX_TOKENS = 32
# Evidence goes into a table cell and gate.json: the engine's words, capped.
EVIDENCE_CHARS = 200
# Any server may have it even when its engine profile does not say (vLLM, SGLang both do).
DEFAULT_TOKENIZE_ENDPOINT = "/tokenize"
# Markers of reasoning left in content by a server without a reasoning parser.
REASONING_MARKERS = ("<think>", "</think>")
# 4xx answers that refuse the client, not the capability: auth, a proxy's auth,
# a request timeout, rate limiting. A probe answered so learned nothing: broken.
NOT_A_REFUSAL = frozenset({401, 407, 408, 429})
# Containers sent when the engine profile lists none (as tests/test_video.py does).
DEFAULT_VIDEO_CONTAINERS = ("mp4",)


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

_TOOL_PROMPT = "What is the weather in Paris right now? Use the tool."
_IMAGE_PROMPT = "What colour is this image? Answer in one word."
_VIDEO_PROMPT = "Which background colours does this video show, in order? Answer in one line."
# A question a reasoning model reasons about, and any model answers in a few tokens.
_REASONING_PROMPT = "What is 17 + 25? Answer with the number only."
_TOKENIZE_TEXT = "hello"
_STRUCTURED_PROMPT = "Is the sky blue? Answer as JSON."
# The smallest schema that tells a constrained reply from free text: `{"ok": true}` is a few tokens.
STRUCTURED_PROBE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                           "required": ["ok"], "additionalProperties": False}
RESPONSES_PATH = "/v1/responses"
_RESPONSES_INPUT = "Say hello."


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
class Discovery:
    """Every capability's probe, what the engine says of its context, and how long it took."""

    probes: dict[str, Probe]
    advertised_context: int | None
    elapsed_s: float

    def state(self, capability: str) -> str:
        """The capability's state; ``not_probed`` for one no probe asked about."""
        probe = self.probes.get(capability)
        return probe.state if probe is not None else "not_probed"

    def settings(self, capability: str) -> dict[str, Any]:
        probe = self.probes.get(capability)
        return dict(probe.settings) if probe is not None else {}

    def served(self, capability: str) -> bool:
        """Whether the capability's checks run (served or broken)."""
        return self.state(capability) in ("served", "broken")

    def table_rows(self) -> list[tuple[str, str, str]]:
        """(capability, state, evidence) per probe, in the capability table's order."""
        order = {name: index for index, name in enumerate(CAPABILITIES)}
        names = sorted(self.probes, key=lambda name: (order.get(name, len(order)), name))
        return [(name, self.probes[name].state, self.probes[name].evidence) for name in names]

    def summary(self) -> str:
        """One line: each capability and its state."""
        return ", ".join(f"{name} {state.replace('_', ' ')}" for name, state, _ in self.table_rows())

    def to_dict(self) -> dict[str, Any]:
        return {
            "probes": {name: probe.to_dict() for name, probe in self.probes.items()},
            "advertised_context": self.advertised_context,
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Discovery":
        return cls(
            probes={name: Probe.from_dict(name, probe) for name, probe in data["probes"].items()},
            advertised_context=data.get("advertised_context"),
            elapsed_s=float(data["elapsed_s"]),
        )


# --- classification ---------------------------------------------------------------------

# The plain reasoning question recognizes no refusal: a 4xx to the plainest chat request is a
# fault whatever the engine profile lists (judge_reasoning calls it broken).
_PLAIN = RefusalRules("(none)", plain_request=True)


def _cap(text: str, limit: int = EVIDENCE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _body_text(exchange: Exchange) -> str:
    """The engine's words in an answer: the error message, else the body or raw bytes."""
    message = error_message(exchange.body)
    if message is not None:
        return message
    if exchange.body is not None:
        return exchange.body if isinstance(exchange.body, str) else json.dumps(exchange.body, ensure_ascii=False,
                                                                               default=str)
    return exchange.raw.decode("utf-8", "replace") or "(empty body)"


def _refusal_or_fault(exchange: Exchange, capability: str, rules: RefusalRules,
                      where: str = "") -> tuple[str, str] | None:
    """not_served or broken when `exchange` is not a 2xx that arrived whole; None when it is.

    A 4xx is not_served only when `rules` (the engine profile's refusals) recognize it for
    `capability`; any other 4xx is broken, and its evidence says so after the engine's
    words and names the way to state the capability off on purpose. `where` leads the
    evidence (``POST /tokenize: ``).
    """
    if exchange.error_kind is not None:
        return "broken", _cap(f"{where}{exchange.error_kind}: {exchange.error}")
    status = exchange.status
    if status is None:
        return "broken", f"{where}no answer"
    if 200 <= status < 300:
        return None
    text = _body_text(exchange)
    said = f"{where}HTTP {status}: {text}"
    if 400 <= status < 500 and status not in NOT_A_REFUSAL:
        if rules.recognizes(capability, status, text):
            return "not_served", _cap(said)
        note = unrecognized_note(rules, capability)
        # The engine's words first (capped), then the note whole: it names the command.
        return "broken", f"{_cap(said, EVIDENCE_CHARS - 40)}: {note}" if note else _cap(said)
    return "broken", _cap(said)


def _readable_reply(exchange: Exchange, capability: str, rules: RefusalRules) -> Reply | tuple[str, str]:
    """The reply of a chat probe answered 2xx and read whole; else its (state, evidence)."""
    outcome = _refusal_or_fault(exchange, capability, rules)
    if outcome is not None:
        return outcome
    if exchange.reply is None:
        return "broken", _cap(f"HTTP {exchange.status} without a usable reply: {_body_text(exchange)}")
    return exchange.reply


def classify_exchange(exchange: Exchange, capability: str, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of one chat probe of `capability`: a usable reply, a refusal `rules` recognize,
    or anything else.

    A usable reply is a 2xx whose reply could be read whole and says something
    (content, reasoning or a tool call); an empty one is broken.
    """
    reply = _readable_reply(exchange, capability, rules)
    if isinstance(reply, tuple):
        return reply
    if not (reply.content.strip() or reply.reasoning.strip() or reply.tool_calls):
        return "broken", _cap(f"HTTP {exchange.status} with nothing in content, reasoning or tool calls "
                              f"(finish_reason {reply.finish_reason!r})")
    said = (f"called {', '.join(call.name or '?' for call in reply.tool_calls)}" if reply.tool_calls else
            f"content {reply.content.strip()!r}" if reply.content.strip() else "reasoning only")
    return "served", _cap(f"HTTP {exchange.status}: {said}")


def _prompt_tokens(exchange: Exchange) -> int | None:
    """usage.prompt_tokens of a readable reply, when it is a count."""
    usage = exchange.reply.usage if exchange.reply is not None else None
    count = usage.prompt_tokens if usage is not None else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def classify_media(with_media: Exchange, without: Exchange, *, content_type: str, noun: str,
                   rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of a media probe: the request with the media part, and the same without it.

    Every engine that reads an image or a video counts it in ``usage.prompt_tokens`` (vLLM:
    256 tokens per Gemma 3 image; SGLang likewise). A server without a vision model may
    answer 200 and drop the part in silence (llama.cpp's server with a text-only GGUF:
    prompt_tokens 7 with the image and without): a client gets an answer that pretends to
    have seen it, so that is broken, not served, and the checks run and say so. When
    either reply has no usage the count cannot be compared: the media reply is judged as
    any chat probe is, and the evidence says the check was not made.
    """
    state, evidence = classify_exchange(with_media, noun, rules)
    if state != "served":
        return state, evidence
    counted, baseline = _prompt_tokens(with_media), _prompt_tokens(without)
    if counted is None or baseline is None:
        which = ("either reply" if counted is None and baseline is None
                 else f"the reply with the {noun}" if counted is None else "the reply without it")
        return state, _cap(f"not checked that the {noun} was read (no usage in {which}); {evidence}")
    if counted <= baseline:
        return "broken", _cap(f"{content_type} part dropped: prompt_tokens {counted} with the {noun}, {baseline} "
                              f"without (the engine answered 200 but did not read the {noun})")
    return state, _cap(f"prompt_tokens {counted} with the {noun}, {baseline} without; {evidence}")


def classify_tokenize(exchange: Exchange, endpoint: str, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the tokenize probe: 200 with a token list or count is served."""
    outcome = _refusal_or_fault(exchange, "tokenize", rules, f"POST {endpoint}: ")
    if outcome is not None:
        return outcome
    body = exchange.body
    tokens = body.get("tokens") if isinstance(body, dict) else None
    count = body.get("count") if isinstance(body, dict) else None
    if isinstance(tokens, list) and tokens and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return "served", f"POST {endpoint}: {len(tokens)} token(s) for {_TOKENIZE_TEXT!r}"
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return "served", f"POST {endpoint}: count {count} for {_TOKENIZE_TEXT!r}"
    return "broken", _cap(f"POST {endpoint}: HTTP {exchange.status} without a token list or count: "
                          f"{_body_text(exchange)}")


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


# --- media ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Media:
    name: str
    mime: str
    data: bytes

    def data_uri(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def _smallest_media(media_dir: Path, kind: str, extensions: Sequence[str] | None = None) -> _Media | str:
    """The smallest committed file of `kind` (with one of `extensions`), or why there is none."""
    manifest_path = media_dir / "manifest.json"
    try:
        entries = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"no readable media manifest at {manifest_path} ({exc})"
    candidates = [e for e in entries if e.get("kind") == kind
                  and (extensions is None or Path(e["name"]).suffix.lstrip(".") in extensions)]
    if not candidates:
        return f"no {kind} in {manifest_path}" + (f" in {', '.join(extensions)}" if extensions else "")
    entry = min(candidates, key=lambda e: (e["bytes"], e["name"]))
    path = media_dir / entry["name"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"{path} cannot be read ({exc})"
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return f"{path} does not match its manifest sha256"
    return _Media(entry["name"], entry["mime"], data)


# --- probes -----------------------------------------------------------------------------

def _chat_body(messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "temperature": 0, "max_tokens": max_tokens, **extra}


async def _probe_tools(chat: SdkChatClient, max_tokens: int, rules: RefusalRules) -> Probe:
    body = _chat_body([{"role": "user", "content": _TOOL_PROMPT}], max_tokens,
                      tools=[load_tool("get_weather")], tool_choice="auto")
    state, evidence = classify_exchange(await chat.chat(body, stream=False), "tools", rules)
    return Probe("tools", state, evidence)


async def _probe_media(chat: SdkChatClient, capability: str, content_type: str, media: _Media | str,
                       prompt: str, max_tokens: int, rules: RefusalRules) -> Probe:
    """The media request and the same question without the media, sent together (see :func:`classify_media`)."""
    if isinstance(media, str):
        return Probe(capability, "not_probed", _cap(media))
    with_media = _chat_body(user_turn(prompt, [media_part(content_type, media.data_uri())]), max_tokens)
    without = _chat_body(user_turn(prompt, []), max_tokens)
    exchanges = await asyncio.gather(chat.chat(with_media, stream=False), chat.chat(without, stream=False))
    state, evidence = classify_media(*exchanges, content_type=content_type, noun=capability, rules=rules)
    settings = {"content_type": content_type} if state != "not_served" else {}
    # Not capped again: the evidence is, and a broken one ends with the command that states the intent.
    return Probe(capability, state, f"{media.name}: {evidence}", settings)


async def _probe_tokenize(raw: RawStreamingClient, model: str, endpoint: str, rules: RefusalRules) -> Probe:
    exchange = await raw.post(endpoint, {"model": model, "prompt": _TOKENIZE_TEXT}, stream=False)
    state, evidence = classify_tokenize(exchange, endpoint, rules)
    return Probe("tokenize", state, evidence, {"endpoint": endpoint} if state != "not_served" else {})


def classify_structured(exchange: Exchange, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the structured-outputs probe.

    Served: a 2xx whose content is the JSON the schema asks for, or JSON cut at the probe's
    few tokens (a small model may pad a constrained reply with whitespace). A 4xx the
    engine profile recognizes refuses ``response_format`` (not served); free text under a
    2xx means the constraint was ignored: broken, so the checks run and say so.
    """
    reply = _readable_reply(exchange, "structured_outputs", rules)
    if isinstance(reply, tuple):
        return reply
    content = reply.content.strip()
    if not content and reply.reasoning.strip():
        # A reasoning model spends the probe's tokens reasoning; the grammar applies after it.
        # Served or broken, the checks run either way: they judge the constraint.
        return "served", _cap(f"HTTP {exchange.status}: accepted; reasoning only within {PROBE_MAX_TOKENS} tokens, "
                              "the JSON is judged by the checks")
    try:
        parsed = json.loads(content)
    except ValueError:
        if reply.finish_reason == "length" and content.startswith("{"):
            return "served", _cap(f"HTTP {exchange.status}: JSON begun, cut at {PROBE_MAX_TOKENS} tokens: {content!r}")
        return "broken", _cap(f"HTTP {exchange.status}: response_format json_schema accepted, but the content is "
                              f"not JSON (the constraint was ignored?): {content!r}")
    if not isinstance(parsed, dict) or not isinstance(parsed.get("ok"), bool):
        return "broken", _cap(f"HTTP {exchange.status}: the content is JSON that does not fit the schema "
                              f"{json.dumps(STRUCTURED_PROBE_SCHEMA)}: {content!r}")
    return "served", _cap(f"HTTP {exchange.status}: content {content!r}")


async def _probe_structured(chat: SdkChatClient, max_tokens: int, rules: RefusalRules) -> Probe:
    body = _chat_body([{"role": "user", "content": _STRUCTURED_PROMPT}], max_tokens,
                      response_format={"type": "json_schema",
                                       "json_schema": {"name": "probe", "schema": STRUCTURED_PROBE_SCHEMA,
                                                       "strict": True}})
    state, evidence = classify_structured(await chat.chat(body, stream=False), rules)
    return Probe("structured_outputs", state, evidence)


def classify_responses(exchange: Exchange, rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of the Responses API probe.

    A server without the endpoint answers 404 (vLLM and SGLang are FastAPI apps: "Not Found")
    or 405: not served, in its words, when the engine profile lists that refusal. Served: a
    2xx whose body is a response object with an output list. Anything else (a proxy's 403,
    a 5xx, a 200 that is not a response) is broken: the checks run and say what is wrong.
    """
    outcome = _refusal_or_fault(exchange, "responses", rules, f"POST {RESPONSES_PATH}: ")
    if outcome is not None:
        return outcome
    body = exchange.body
    if not isinstance(body, dict) or body.get("object") != "response" or not isinstance(body.get("output"), list):
        return "broken", _cap(f"POST {RESPONSES_PATH}: HTTP {exchange.status} without a response object: "
                              f"{_body_text(exchange)}")
    kinds = ", ".join(str(item.get("type")) for item in body["output"] if isinstance(item, dict)) or "no items"
    return "served", _cap(f"POST {RESPONSES_PATH}: HTTP {exchange.status}: status {body.get('status')!r}, "
                          f"output {kinds}")


async def _probe_responses(raw: RawStreamingClient, model: str, max_tokens: int, rules: RefusalRules) -> Probe:
    body = {"model": model, "input": _RESPONSES_INPUT, "max_output_tokens": max_tokens, "temperature": 0}
    state, evidence = classify_responses(await raw.post(RESPONSES_PATH, body, stream=False), rules)
    return Probe("responses", state, evidence)


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


async def _probe_reasoning(chat: SdkChatClient, max_tokens: int) -> tuple[Probe, Probe]:
    """Reasoning by default; then, if the plain request was answered, every known switch off and on at once."""
    base = _chat_body([{"role": "user", "content": _REASONING_PROMPT}], max_tokens)
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
        why = _cap(f"a plain chat request failed: {evidence}")
        return Probe("reasoning", "broken", why), Probe("thinking_modes", "broken", why)
    default = _reasoning_seen(plain)
    turned_on = next((t for t in trials if t.on_outcome[0] == "served" and _reasoning_seen(t.on)), None)
    working = [t for t in trials if t.works]

    fields = plain.reply.reasoning_fields if plain.reply is not None else []
    if default == "field":
        reasoning = Probe("reasoning", "served", _cap(f"reasoning by default, in {', '.join(fields)}"),
                          {"default_on": True, "fields": list(fields)})
    elif default == "markers":
        reasoning = Probe("reasoning", "broken", _cap(
            f"no reasoning field, but content holds reasoning markers ({', '.join(REASONING_MARKERS)}): "
            f"reasoning is not separated (no reasoning parser?): {plain.reply.content.strip()!r}"),
            {"default_on": True, "fields": []})
    elif turned_on is not None:
        on_fields = turned_on.on.reply.reasoning_fields if turned_on.on.reply is not None else []
        seen = _reasoning_seen(turned_on.on)
        reasoning = Probe(
            "reasoning", "served" if seen == "field" else "broken",
            _cap(f"no reasoning by default; {_fields_text(turned_on.switch.enabled)} turns it on"
                 + (f", in {', '.join(on_fields)}" if seen == "field" else ", as markers in content (no parser?)")),
            {"default_on": False, "fields": list(on_fields)})
    else:
        reasoning = Probe("reasoning", "not_served", "no reasoning in the reply")

    if working:
        chosen = working[0]
        others = [t.switch.name for t in working[1:]]
        thinking = Probe(
            "thinking_modes", "served",
            _cap(f"{_fields_text(chosen.switch.disabled)} turns reasoning off, "
                 f"{_fields_text(chosen.switch.enabled)} on" + (f" (also: {', '.join(others)})" if others else "")),
            {"switch": chosen.switch.name,
             "modes": {"enabled": dict(chosen.switch.enabled), "disabled": dict(chosen.switch.disabled)}})
    elif reasoning.state == "not_served":
        thinking = Probe("thinking_modes", "not_served", "no reasoning in the reply, with or without a known switch")
    elif (fault := next((f for t in trials if (f := t.fault())), None)) is not None:
        thinking = Probe("thinking_modes", "broken", _cap(fault))
    else:
        direction = "off" if default else "both off and on"
        tried = ", ".join(t.switch.name for t in trials)
        thinking = Probe("thinking_modes", "not_served", _cap(f"no known switch turned reasoning {direction} "
                                                              f"(tried {tried})"))
    return reasoning, thinking


async def discover(target: EngineTarget, engine_profile: EngineProfile, *, advertised_context: int | None,
                   media_dir: Path, timeouts: ClientTimeouts | None = None,
                   max_tokens: int = PROBE_MAX_TOKENS) -> Discovery:
    """Probe every capability of the deployment at `target` at once, and say what each found.

    `advertised_context` is what ``/v1/models`` said (``max_model_len``), kept for the
    report; `media_dir` holds the committed media and their manifest; `timeouts`
    replaces the target's for the probes (a hanging probe waits the idle timeout).
    """
    started = time.monotonic()
    if timeouts is not None:
        target = dataclasses.replace(target, timeouts=timeouts)
    video_type = engine_profile.features.get("video_content_type")
    containers = engine_profile.features.get("video_containers") or DEFAULT_VIDEO_CONTAINERS
    tokenize_endpoint = engine_profile.tokenize_endpoint or DEFAULT_TOKENIZE_ENDPOINT
    rules = engine_profile.refusal_rules
    async with SdkChatClient(target) as chat, RawStreamingClient(target, pool_size=2) as raw:
        probes: list[Any] = [
            _probe_tools(chat, max_tokens, rules),
            _probe_media(chat, "image", "image_url", _smallest_media(media_dir, "image", ("png",)),
                         _IMAGE_PROMPT, max_tokens, rules),
            _probe_reasoning(chat, max_tokens),
            _probe_tokenize(raw, target.model, tokenize_endpoint, rules),
            _probe_structured(chat, max_tokens, rules),
            _probe_responses(raw, target.model, max_tokens, rules),
        ]
        if video_type:
            probes.append(_probe_media(chat, "video", video_type, _smallest_media(media_dir, "video", containers),
                                       _VIDEO_PROMPT, max_tokens, rules))
        found = await asyncio.gather(*probes)
    results: dict[str, Probe] = {}
    for item in found:
        for probe in item if isinstance(item, tuple) else (item,):
            results[probe.capability] = probe
    if not video_type:
        results["video"] = Probe("video", "not_probed", _cap(
            f"engine profile {engine_profile.name!r} does not say how a video is sent "
            "(features.video_content_type is not set)"))
    ordered = {name: results[name] for name in CAPABILITIES if name in results}
    return Discovery(probes=ordered, advertised_context=advertised_context, elapsed_s=time.monotonic() - started)
