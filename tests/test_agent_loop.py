"""Multi-turn agent loops (issue 41; docs/agent-traffic.md): what a single turn never shows.

Seed 002's deployment is "for Coding, Agent workflows": its traffic is conversations in which the
assistant reasons, calls tools, reads their results and answers, and the user follows up. The loop
here is that conversation, four turns and more, streamed and not:

    system + user ask -> assistant: reasoning + get_weather calls (the model's own)
    -> the tool results (stubs whose values no model guesses) -> assistant: the answer
    -> user follow-up about a result -> assistant: the answer, from the history

and what must hold over it:

- the answers use the tool results, the follow-up's too (a value only a result holds);
- reasoning stays in its field and out of content in every turn. The system prompt explains the
  ``<think>`` markers and the history carries reasoning back: seed 000's parser decided the reasoning
  state from the whole prompt, took that ``</think>`` for the end of the reply's own reasoning and
  streamed the reasoning into content;
- ``usage.prompt_tokens`` grows as the history does, and equals the engine's own ``/tokenize`` count
  of the same history with the same tools, where the engine has one;
- every history shape the OpenAI API allows is accepted (tool_calls with content null, empty or
  omitted, several tool results, a result as text parts, the reasoning sent back under the field this
  engine reads);
- reasoning sent back reaches the prompt as the model profile says the model needs it
  (``reasoning.in_history``: keep, current_turn, drop), by the engine's own count with and without it.

Tools are required (``requires("tools")``); the checks about reasoning require it too.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest

from engine_acceptance.assertions import (
    assert_no_problems,
    integers_in,
    markers_found,
    no_answer,
    reasoning_used_up,
    short,
)
from engine_acceptance.profiles.profile import EngineProfile, ModelProfile
from engine_acceptance.profiles.request_options import with_thinking_mode
from engine_acceptance.profiles.tool_schemas import load_tool
from engine_acceptance.wire.reassembly import Reply
from engine_acceptance.wire.token_count import ServerTokenCounter, TokenCountError

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.agent, pytest.mark.requires("tools")]

# Enough to get usage back: what the model says is not judged where only the prompt is counted.
COUNT_ONLY_TOKENS = 1
# Tokens a chat template may add around reasoning it renders (its markers and the newlines between).
REASONING_TEMPLATE_SLACK = 16


@pytest.fixture(scope="module")
def weather_tool() -> dict[str, Any]:
    return load_tool("get_weather")


@dataclass(frozen=True)
class Turn:
    """One request of the loop: what it was called, the messages it sent, and the reply."""

    label: str
    messages: list[dict[str, Any]]
    reply: Reply


def _body(messages: list[dict[str, Any]], tool: dict[str, Any], max_tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": copy.deepcopy(messages), "tools": [tool], "tool_choice": "auto",
                            "temperature": 0, "max_tokens": max_tokens}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _max_tokens(prompts: dict[str, Any], model_profile: ModelProfile) -> int:
    return model_profile.output_budget(prompts["agent"]["max_tokens"])


def _city(arguments: str, cities: dict[str, list[str]]) -> str | None:
    return next((city for city, names in cities.items() if any(name in arguments for name in names)), None)


def _results(reply: Reply, case: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``role: tool`` message answering each call of the reply, from the stubs."""
    messages = []
    for call in reply.tool_calls:
        city = _city(call.arguments, case["cities"])
        result = case["results"][city] if city else {"error": f"no stub result for {short(call.arguments, 80)}"}
        messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                         "content": json.dumps(result, ensure_ascii=False)})
    return messages


def _assistant(reply: Reply, engine_profile: EngineProfile) -> dict[str, Any]:
    """The reply as the next request's history holds it: content null next to calls, reasoning sent back."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": call.id, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments}}
                                 for call in reply.tool_calls]
    field = engine_profile.history_reasoning_field
    if reply.reasoning and field:
        message[field] = reply.reasoning
    return message


async def _run_loop(chat, prompts: dict[str, Any], tool: dict[str, Any], engine_profile: EngineProfile,
                    model_profile: ModelProfile, stream: bool, thinking: str | None = None) -> list[Turn]:
    """The loop's three requests, each sent with the history the turns before it made (in `thinking` mode)."""
    case = prompts["agent"]
    max_tokens = _max_tokens(prompts, model_profile)
    turns: list[Turn] = []
    messages: list[dict[str, Any]] = [{"role": "system", "content": case["system"]},
                                      {"role": "user", "content": case["ask"]}]

    async def turn(label: str) -> Reply:
        body = _body(messages, tool, max_tokens, stream)
        if thinking is not None:
            body = with_thinking_mode(body, model_profile, thinking)
        exchange = await chat(body, stream=stream, label=label)
        if not exchange.ok or exchange.reply is None:
            raise AssertionError(f"{label}: the engine refused the history the loop built "
                                 f"({len(messages)} messages): {exchange.describe_failure()}")
        turns.append(Turn(label, copy.deepcopy(messages), exchange.reply))
        return exchange.reply

    asked = await turn("turn 1, the ask")
    assert asked.tool_calls, (f"turn 1: the model called no tool for {short(case['ask'])!r}, so the loop cannot go on: "
                              + (reasoning_used_up(asked) or f"content {short(asked.content)!r}"))
    messages += [_assistant(asked, engine_profile), *_results(asked, case)]
    answered = await turn("turn 2, after the tool results")
    messages += [_assistant(answered, engine_profile), {"role": "user", "content": case["follow_up"]}]
    await turn("turn 3, the follow-up")
    return turns


def _uses(reply: Reply, result: dict[str, Any]) -> bool:
    return result["temperature_c"] in integers_in(reply.content) or result["weather"] in reply.content


async def test_agent_loop_answers_from_the_tool_results_over_four_turns(chat, prompts, weather_tool, engine_profile,
                                                                        model_profile, stream) -> None:
    case = prompts["agent"]
    asked, answered, follow_up = await _run_loop(chat, prompts, weather_tool, engine_profile, model_profile, stream)
    called = {_city(call.arguments, case["cities"]) for call in asked.reply.tool_calls} - {None}
    results = {city: case["results"][city] for city in case["results"] if city in called}
    problems = []
    if answered.reply.tool_calls:
        problems.append(f"{answered.label}: the results are there, yet the model calls "
                        f"{', '.join(call.name for call in answered.reply.tool_calls)} again")
    elif not answered.reply.content.strip():
        problems.append(f"{answered.label}: " + no_answer(answered.reply, "no answer after the tool results"))
    else:
        ignored = [city for city, result in results.items() if not _uses(answered.reply, result)]
        if ignored:
            problems.append(f"{answered.label}: the answer does not use the tool results for {', '.join(ignored)} "
                            f"(stubs {json.dumps(results, ensure_ascii=False)}): {short(answered.reply.content)!r}")
    expected = case["results"][case["follow_up_city"]]["temperature_c"]
    if follow_up.reply.tool_calls:
        problems.append(f"{follow_up.label}: the follow-up is answered with another tool call instead of from the "
                        "history's tool result")
    elif expected not in integers_in(follow_up.reply.content):
        problems.append(f"{follow_up.label}: the follow-up's answer lacks {expected}, which only the tool result in "
                        "the history holds: " + (reasoning_used_up(follow_up.reply)
                                                 or repr(short(follow_up.reply.content))))
    assert_no_problems(problems)


@pytest.mark.requires("tools", "reasoning")
async def test_agent_loop_keeps_reasoning_apart_from_content_in_every_turn(chat, prompts, weather_tool, engine_profile,
                                                                           model_profile, stream) -> None:
    thinking = None
    if not model_profile.reasoning_default_on:
        # A deployment that reasons only when asked (thinking off by default): every turn asks, as its clients do.
        if "enabled" not in model_profile.thinking_modes:
            pytest.skip(f"model profile {model_profile.name!r} says the model does not reason by default, and no "
                        "'enabled' thinking mode turns it on")
        thinking = "enabled"
    turns = await _run_loop(chat, prompts, weather_tool, engine_profile, model_profile, stream, thinking)
    problems = []
    for turn in turns:
        leaked = markers_found(turn.reply.content, model_profile.reasoning_markers)
        if leaked:
            problems.append(f"{turn.label}: reasoning markers {leaked} in content, with </think> in the prompt (the "
                            f"system prompt, the history): {short(turn.reply.content)!r}")
        if not turn.reply.reasoning.strip():
            problems.append(f"{turn.label}: the reasoning field (reasoning / reasoning_content) is empty")
    assert_no_problems(problems)


def _counter(acceptance) -> ServerTokenCounter | None:
    api = acceptance.tokenize_api
    return ServerTokenCounter(acceptance.target, api) if api is not None else None


def _without_reasoning(messages: list[dict[str, Any]], field: str | None) -> list[dict[str, Any]]:
    return [{key: value for key, value in message.items() if key != field} for message in messages]


async def _count(counter: ServerTokenCounter, messages: list[dict[str, Any]], tool: dict[str, Any]) -> int:
    return await asyncio.to_thread(counter.count_conversation, messages, tools=[tool])


async def test_prompt_tokens_grow_with_the_history_and_count_it_all(chat, prompts, weather_tool, engine_profile,
                                                                    model_profile, acceptance, stream,
                                                                    request) -> None:
    turns = await _run_loop(chat, prompts, weather_tool, engine_profile, model_profile, stream)
    used = []
    for turn in turns:
        assert turn.reply.usage is not None and isinstance(turn.reply.usage.prompt_tokens, int), \
            f"{turn.label}: no usage.prompt_tokens" + (" (stream_options.include_usage was set)" if stream else "")
        used.append(turn.reply.usage.prompt_tokens)
    request.node.user_properties.append(("agent_loop_prompt_tokens", json.dumps(used)))
    problems = []
    if any(later <= earlier for earlier, later in zip(used, used[1:])):
        problems.append("usage.prompt_tokens does not grow with the history: "
                        + ", ".join(f"{turn.label} {count}" for turn, count in zip(turns, used)))
    counter = _counter(acceptance)
    if counter is not None:
        field = engine_profile.history_reasoning_field
        try:
            for turn, count in zip(turns, used):
                expected = await _count(counter, turn.messages, weather_tool)
                if count == expected:
                    continue
                problem = (f"{turn.label}: usage.prompt_tokens {count} but the engine's {counter.endpoint} counts "
                           f"{expected} for the same history and tools ({count - expected:+d})")
                if field and any(field in message for message in turn.messages):
                    bare = await _count(counter, _without_reasoning(turn.messages, field), weather_tool)
                    if count == bare:
                        problem += (f"; without the reasoning sent back in {field!r} it counts {count}: the chat "
                                    "request left the history's reasoning out of the prompt")
                problems.append(problem)
        except TokenCountError as exc:
            pytest.fail(f"the engine's tokenize endpoint could not count the history: {exc}")
    assert_no_problems(problems)


# The assistant turn of the fixed history, in each shape the OpenAI API allows for a turn that called tools.
HISTORY_SHAPES = ("content-null", "content-empty", "content-omitted", "content-beside-calls", "results-as-text-parts",
                  "reasoning-sent-back")


def _fixed_history(case: dict[str, Any], shape: str, field: str | None) -> list[dict[str, Any]]:
    calls = [{"id": f"call_{index}", "type": "function",
              "function": {"name": "get_weather", "arguments": json.dumps({"city": city}, ensure_ascii=False)}}
             for index, city in enumerate(case["results"])]
    assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
    if shape == "content-empty":
        assistant["content"] = ""
    elif shape == "content-omitted":
        del assistant["content"]
    elif shape == "content-beside-calls":
        assistant["content"] = "我先查一下两个城市的天气。"
    elif shape == "reasoning-sent-back":
        assistant[str(field)] = case["history_reasoning"]
    results = []
    for call, (city, result) in zip(calls, case["results"].items()):
        text = json.dumps(result, ensure_ascii=False)
        content: Any = [{"type": "text", "text": text}] if shape == "results-as-text-parts" else text
        results.append({"role": "tool", "tool_call_id": call["id"], "name": "get_weather", "content": content})
    return [{"role": "system", "content": case["system"]}, {"role": "user", "content": case["ask"]}, assistant,
            *results]


_SHAPE_WORDS = {
    "content-null": "an assistant message with tool_calls and content null",
    "content-empty": "an assistant message with tool_calls and content ''",
    "content-omitted": "an assistant message with tool_calls and no content field",
    "content-beside-calls": "an assistant message with text and tool_calls",
    "results-as-text-parts": "tool results whose content is a list of text parts",
    "reasoning-sent-back": "an assistant message with tool_calls, content null and its reasoning sent back",
}


@pytest.mark.parametrize("shape", HISTORY_SHAPES)
async def test_every_history_shape_the_api_allows_is_accepted(chat, prompts, weather_tool, engine_profile,
                                                              model_profile, shape, stream) -> None:
    case = prompts["agent"]
    field = engine_profile.history_reasoning_field
    if shape == "reasoning-sent-back" and field is None:
        pytest.skip(f"engine profile {engine_profile.name!r} names no field to send reasoning back in "
                    "(features.history_reasoning_field)")
    body = _body(_fixed_history(case, shape, field), weather_tool, _max_tokens(prompts, model_profile), stream)
    exchange = await chat(body, stream=stream, label=shape)
    assert exchange.ok and exchange.reply is not None, (
        f"history shape {shape!r} ({_SHAPE_WORDS[shape]}, as the OpenAI API allows) was refused: "
        f"{exchange.describe_failure()}")
    reply = exchange.reply
    assert not reply.tool_calls, f"history shape {shape!r}: the results are there, yet the model calls again"
    assert reply.content.strip(), f"history shape {shape!r}: " + no_answer(reply, "no answer after the tool results")
    ignored = [city for city, result in case["results"].items() if not _uses(reply, result)]
    assert not ignored, (f"history shape {shape!r} ({_SHAPE_WORDS[shape]}): the answer does not use the tool results "
                         f"for {', '.join(ignored)}: {short(reply.content)!r}")


def _interleaved_histories(case: dict[str, Any], field: str) -> dict[str, list[dict[str, Any]]]:
    """The two places reasoning is sent back from: the tool loop in progress, and a finished earlier turn."""
    in_loop = _fixed_history(case, "reasoning-sent-back", field)
    finished = [{"role": "system", "content": case["system"]}, {"role": "user", "content": case["ask"]},
                {"role": "assistant", "content": case["earlier_answer"], field: case["history_reasoning"]},
                {"role": "user", "content": case["follow_up"]}]
    return {"the tool loop in progress": in_loop, "a finished earlier turn": finished}


# Where the model needs its reasoning, per model profile's reasoning.in_history.
KEPT_WHERE = {"keep": {"the tool loop in progress", "a finished earlier turn"},
              "current_turn": {"the tool loop in progress"}, "drop": set()}


async def _prompt_tokens(chat, messages: list[dict[str, Any]], tool: dict[str, Any], stream: bool, label: str) -> int:
    exchange = await chat(_body(messages, tool, COUNT_ONLY_TOKENS, stream), stream=stream, label=label)
    assert exchange.ok and exchange.reply is not None, \
        f"{label}: the engine refused the history ({len(messages)} messages): {exchange.describe_failure()}"
    reply = exchange.reply
    assert reply.usage is not None and isinstance(reply.usage.prompt_tokens, int), f"{label}: no usage.prompt_tokens"
    return reply.usage.prompt_tokens


@pytest.mark.requires("tools", "reasoning")
async def test_reasoning_sent_back_reaches_the_prompt_as_the_model_profile_says(chat, prompts, weather_tool,
                                                                                engine_profile, model_profile,
                                                                                acceptance, stream) -> None:
    case = prompts["agent"]
    field = engine_profile.history_reasoning_field
    if field is None:
        pytest.skip(f"engine profile {engine_profile.name!r} names no field to send reasoning back in "
                    "(features.history_reasoning_field)")
    seen = {}
    for where, history in _interleaved_histories(case, field).items():
        with_it = await _prompt_tokens(chat, history, weather_tool, stream, f"{where}, with reasoning")
        without = await _prompt_tokens(chat, _without_reasoning(history, field), weather_tool, stream,
                                        f"{where}, without reasoning")
        seen[where] = with_it - without
    said = "; ".join(f"{where}: {difference:+d} tokens with it" for where, difference in seen.items())
    wanted = model_profile.reasoning_in_history
    if wanted is None:
        pytest.skip(f"model profile {model_profile.name!r} does not say whether the model needs its reasoning carried "
                    f"back (reasoning.in_history: keep, current_turn or drop); the engine's prompt, reasoning sent "
                    f"back in {field!r}: {said}")
    counter = _counter(acceptance)
    reasoning_tokens = (await asyncio.to_thread(counter.count, case["history_reasoning"]) if counter is not None
                        else None)
    problems = []
    for where, difference in seen.items():
        if where in KEPT_WHERE[wanted]:
            least = reasoning_tokens if reasoning_tokens is not None else 1
            if difference < least:
                problems.append(f"{where}: the reasoning sent back in {field!r} is not in the prompt ({difference:+d} "
                                f"tokens with it, at least {least} expected), though the model profile says "
                                f"reasoning.in_history: {wanted}")
            elif reasoning_tokens is not None and difference > reasoning_tokens + REASONING_TEMPLATE_SLACK:
                problems.append(f"{where}: {difference:+d} tokens with the reasoning sent back, more than its "
                                f"{reasoning_tokens} and {REASONING_TEMPLATE_SLACK} for the template's markers")
        elif difference != 0:
            problems.append(f"{where}: the reasoning sent back in {field!r} is in the prompt ({difference:+d} tokens "
                            f"with it), though the model profile says reasoning.in_history: {wanted}")
    assert_no_problems(problems)
