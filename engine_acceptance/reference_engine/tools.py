"""Tool calling in the reference engine: `tools`/`tool_choice`, calls, streamed fragments.

A request's `tools` and `tool_choice` are validated like vLLM does (400 for a named
tool that is not offered, or a `tool_choice` without `tools`). The model's side is
a small honest rule: a tool is wanted when the question names it (`get_weather`, or
`get weather`) or asks about its description's topic. Its arguments fit its schema
whatever the shape (`schema_values.fill_arguments`), taken from the question where
it says them; when the tool has a place parameter and the question names several
places (a small gazetteer), it is called once per place, in one turn (parallel),
unless `parallel_tool_calls` is false; a place parameter that is required and not
named means there is nothing to ask, and the model answers in text.
`tool_choice: "none"` answers in text; `"required"` calls the wanted tools, or the
first one offered; a named tool is always called once.
When the conversation ends with `role: tool` results, the answer is written from
them. Streamed calls are cut into fragments the way vLLM and SGLang send them:
first the index, id, type and name with empty arguments, then argument pieces,
each carrying its index.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .conventions import Convention
from .generation import Generation, Piece, ToolCallOut, ToolFragment, generate_chat, split_pieces
from .protocol import RequestError
from .schema_values import fill_arguments, mentions
from .tokenizer import ReferenceTokenizer
from . import wire

from .conversation import Conversation, ThinkingMode, has_cjk, shape_reasoning

__all__ = [
    "ToolAnswer",
    "ToolRequest",
    "generate_tool_calls",
    "parse_tool_request",
    "refuse_without_tool_parser",
    "plan_tool_answer",
    "tool_call_delta",
    "tool_call_pieces",
    "tool_markup",
    "tool_results_rule",
]

# Cities the reference model knows, Chinese and English names.
CITIES = (
    "北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安", "南京", "天津", "重庆", "苏州", "香港", "台北",
    "Beijing", "Shanghai", "Guangzhou", "Shenzhen", "Hangzhou", "London", "Paris", "Tokyo", "Berlin",
    "New York", "San Francisco", "Singapore", "東京", "大阪", "Kyoto", "Osaka", "Seoul", "Sydney", "Rome",
    "Madrid",
)
# Parameter names the model knows how to fill with a place.
_PLACE_PARAMS = ("city", "location", "city_name")
# Topic words: a tool whose name or description has one is wanted when the question has it too.
_TOPICS = {"weather": re.compile(r"天气|气温|weather|temperature|forecast", re.IGNORECASE)}


@dataclass(frozen=True)
class ToolRequest:
    """The request's tools (name -> JSON schema of the parameters) and choice."""

    tools: dict[str, dict[str, Any]]
    descriptions: dict[str, str]
    # "auto" | "none" | "required" | "named"
    choice: str
    named: str | None
    parallel: bool


def parse_tool_request(body: Mapping[str, Any]) -> ToolRequest | None:
    """The validated tool part of a chat request; None when it has none."""
    raw_tools, raw_choice = body.get("tools"), body.get("tool_choice")
    if raw_tools is None and raw_choice is None:
        return None
    tools: dict[str, dict[str, Any]] = {}
    descriptions: dict[str, str] = {}
    if raw_tools is not None:
        if not isinstance(raw_tools, list):
            raise RequestError("'tools' must be a list", param="tools")
        for index, tool in enumerate(raw_tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict) \
                    or not isinstance(function.get("name"), str) or not function["name"]:
                raise RequestError(f"tools[{index}] must be {{'type': 'function', 'function': {{'name': ...}}}}",
                                   param="tools")
            parameters = function.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(parameters, dict):
                raise RequestError(f"tools[{index}].function.parameters must be an object", param="tools")
            tools[function["name"]] = parameters
            descriptions[function["name"]] = str(function.get("description") or "")
    choice, named = _parse_choice(raw_choice, tools)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise RequestError("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
    return ToolRequest(tools, descriptions, choice, named, parallel is not False)


# vLLM 0.32 (renderers/online_renderer.py) answers these with 400 BadRequestError when the
# server runs without a tool parser: "auto" needs --enable-auto-tool-choice as well.
AUTO_NEEDS_PARSER = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
CHOICE_NEEDS_PARSER = "tool_choice={choice} requires --tool-call-parser to be set"


def refuse_without_tool_parser(request: ToolRequest | None) -> None:
    """Raise vLLM's 400 for a request that needs a tool parser the server was started without.

    Called after the request's tools were validated, as vLLM checks the request model first.
    `tool_choice: "none"` (or no tools at all) needs no parser and passes.
    """
    if request is None or request.choice == "none":
        return
    if request.choice == "auto":
        raise RequestError(AUTO_NEEDS_PARSER)
    described = f'function "{request.named}"' if request.choice == "named" else f'"{request.choice}"'
    raise RequestError(CHOICE_NEEDS_PARSER.format(choice=described))


def _parse_choice(raw: Any, tools: Mapping[str, Any]) -> tuple[str, str | None]:
    if raw is None:
        return ("auto" if tools else "none"), None
    if raw in ("none", "auto", "required"):
        if raw != "none" and not tools:
            raise RequestError(f"When using `tool_choice` {raw!r}, `tools` must be set.", param="tool_choice")
        return raw, None
    function = raw.get("function") if isinstance(raw, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        if function["name"] not in tools:
            raise RequestError(f"Tool '{function['name']}' has not been passed in `tools`.", param="tool_choice")
        return "named", function["name"]
    raise RequestError("'tool_choice' must be 'none', 'auto', 'required' or "
                       "{'type': 'function', 'function': {'name': ...}}", param="tool_choice")


@dataclass(frozen=True)
class ToolAnswer:
    """The model decided to call tools: its reasoning (None when thinking is off) and the calls."""

    reasoning: str | None
    calls: tuple[ToolCallOut, ...]


def _places_in(text: str) -> list[str]:
    found = [(text.find(city), city) for city in CITIES if city in text]
    return [city for _, city in sorted(found)]


def _place_param(schema: Mapping[str, Any]) -> str | None:
    properties = schema.get("properties") or {}
    return next((name for name in _PLACE_PARAMS if name in properties), None)


def _wanted(name: str, description: str, question: str) -> bool:
    # Named as written (get_weather) or as words (get weather); whole words only, so
    # get_weather does not call get_weather_alerts.
    if mentions(question, name) or mentions(question, name.replace("_", " ")):
        return True
    return any(topic.search(name + " " + description) and topic.search(question) for topic in _TOPICS.values())


def _candidates(request: ToolRequest, question: str, results_arrived: bool) -> list[str]:
    """The tools the model means to call, in the order offered."""
    if request.choice == "named":
        assert request.named is not None
        return [request.named]
    if results_arrived and request.choice == "auto":
        return []  # the results are here: answer from them
    wanted = [name for name in request.tools if _wanted(name, request.descriptions[name], question)]
    if not wanted and request.choice == "required":
        # Obliged to call and nothing asked for: the first tool offered.
        wanted = list(request.tools)[:1]
    return wanted


def _calls_for(name: str, parameters: Mapping[str, Any], question: str, places: Sequence[str], *,
               obliged: bool) -> list[dict[str, Any]]:
    """The arguments of each call to one tool: one per place the question names for a place parameter."""
    place = _place_param(parameters)
    if place is not None and places:
        return [fill_arguments(parameters, question, {place: value}) for value in places]
    if place is not None and place in (parameters.get("required") or ()) and not obliged:
        return []  # nothing to ask the tool about: answer in text
    return [fill_arguments(parameters, question)]


def plan_tool_answer(
    messages: Sequence[Mapping[str, Any]], thinking: ThinkingMode, request: ToolRequest | None, *, call_id_prefix: str
) -> ToolAnswer | None:
    """The tool calls the model makes for this conversation, or None to answer in text."""
    if request is None or request.choice == "none":
        return None
    conv = Conversation.from_messages(messages)
    results_arrived = bool(messages) and messages[-1].get("role") == "tool"
    question = conv.question
    places = _places_in(question)
    calls: list[ToolCallOut] = []
    said: list[str] = []
    for name in _candidates(request, question, results_arrived):
        arguments = _calls_for(name, request.tools[name], question, places, obliged=request.choice != "auto")
        if request.choice == "named":
            arguments = arguments[:1]
        for values in arguments:
            calls.append(ToolCallOut(f"{call_id_prefix}{secrets.token_hex(12)}", name,
                                     json.dumps(values, ensure_ascii=False)))
            said.append(next((str(values[p]) for p in _PLACE_PARAMS if values.get(p)), name))
    if not calls:
        return None
    if not request.parallel:
        calls, said = calls[:1], said[:1]
    zh = has_cjk(question)
    listed = ("、" if zh else ", ").join(said)
    if zh:
        reasoning = f"需要调用工具查询{listed}，不能猜测结果。本轮发出 {len(calls)} 个调用。"
    else:
        reasoning = f"I must not guess: call the tool for {listed}. {len(calls)} call(s) in this turn."
    shaped = shape_reasoning(reasoning, thinking, zh=zh, thoughtful=True)
    return ToolAnswer(shaped, tuple(calls))


def tool_markup(calls: Sequence[ToolCallOut]) -> str:
    """The calls as the model writes them before a tool parser takes them out (Hermes style)."""
    blocks = []
    for call in calls:
        try:
            arguments: Any = json.loads(call.arguments)
        except ValueError:
            arguments = call.arguments
        blocks.append("<tool_call>\n" + json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
                      + "\n</tool_call>")
    return "\n".join(blocks)


def generate_tool_calls(
    reasoning: str | None, calls: Sequence[ToolCallOut], *, max_tokens: int, tokenizer: ReferenceTokenizer
) -> Generation:
    """Generate the calls within `max_tokens`; a cut call cannot be parsed and stays text."""
    text_form = generate_chat(reasoning, tool_markup(calls), max_tokens=max_tokens, tokenizer=tokenizer)
    if text_form.finish_reason == "length":
        return text_form
    return Generation(text_form.reasoning, "", "tool_calls", text_form.completion_tokens, tuple(calls),
                      reasoning_tokens=text_form.reasoning_tokens)


def tool_call_pieces(calls: Sequence[ToolCallOut], *, tokens_per_piece: int) -> list[Piece]:
    """Stream fragments: per call a header (id, name, empty arguments), then argument pieces."""
    pieces: list[Piece] = []
    for index, call in enumerate(calls):
        pieces.append(Piece("tool_call", "", len(call.name.encode("utf-8")), ToolFragment(index, call.id, call.name)))
        for piece in split_pieces(call.arguments, kind="tool_call", tokens_per_piece=tokens_per_piece):
            pieces.append(dataclasses.replace(piece, tool=ToolFragment(index)))
    return pieces


def tool_call_delta(convention: Convention, piece: Piece) -> dict[str, Any]:
    """The stream delta of one tool-call piece, with the convention's nulls."""
    assert piece.tool is not None
    fragment = piece.tool
    entry: dict[str, Any] = {"index": fragment.index}
    if fragment.id is not None:
        entry.update(id=fragment.id, type="function", function={"name": fragment.name, "arguments": piece.text})
    elif convention.delta_explicit_nulls:
        entry.update(id=None, type=None, function={"name": None, "arguments": piece.text})
    else:
        entry["function"] = {"arguments": piece.text}
    delta = wire.chat_delta(convention)
    delta["tool_calls"] = [entry]
    return delta


# --- answering from tool results ------------------------------------------------------

_WEATHER_KEYS = ("weather", "condition", "description", "summary")
_TEMPERATURE_KEYS = ("temperature_c", "temperature", "temp_c", "temp")


def _describe_result(text: str, zh: bool) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    if not isinstance(data, dict):
        return text.strip()
    place = next((str(data[k]) for k in ("city", "location") if data.get(k)), "")
    weather = next((str(data[k]) for k in _WEATHER_KEYS if data.get(k) is not None), "")
    temperature = next((data[k] for k in _TEMPERATURE_KEYS if data.get(k) is not None), None)
    parts = [weather] if weather else []
    if temperature is not None:
        parts.append(f"{temperature}°C")
    said = ("，" if zh else ", ").join(parts) or json.dumps(data, ensure_ascii=False)
    return f"{place}{'：' if zh else ': '}{said}" if place else said


def tool_results_rule(conv: Conversation, zh: bool) -> tuple[str, str] | None:
    """Answer from the `role: tool` messages that end the conversation."""
    roles = conv.roles
    if not roles or roles[-1] != "tool":
        return None
    start = len(roles)
    while start > 0 and roles[start - 1] == "tool":
        start -= 1
    described = [_describe_result(text, zh) for text in conv.texts[start:]]
    if zh:
        return f"工具返回了 {len(described)} 个结果，直接据此回答，不补充猜测。", "；".join(described) + "。"
    return f"The tools returned {len(described)} result(s); I answer from them only.", "; ".join(described) + "."
