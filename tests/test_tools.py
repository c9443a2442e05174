"""Parallel tool calls (TEST-PLAN §3; seed 001's get_weather prompt).

One assistant turn must call ``get_weather`` for both cities, with arguments that are
JSON valid against the tool's schema and ``finish_reason == "tool_calls"``; content
next to the calls holds neither tool markup nor guessed weather; a streamed turn
reassembles to the same calls; results fed back as ``role: tool`` messages reach the
final answer; ``tool_choice`` "none" and a forced named tool are honoured. Engines
without a tool parser lack the ``tools`` capability in their profile and skip.

The tool-choice checks (both cities called, "none", the forced tool) are trials of kind
``tools``: K identical requests sent together, every one of which must hold, since a tool
parser that fails now and then is the defect that one request misses. The checks of what
a call looks like (JSON arguments, markup, streamed fragments, the round trip) stay one
request each.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from engine_acceptance.assertions import assert_no_problems, integers_in, markers_found, no_answer, reply_of, short
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.profiles.tool_schemas import argument_problems, load_tool
from engine_acceptance.wire.reassembly import Reply, ToolCall

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.tools, pytest.mark.requires("tools")]


@pytest.fixture(scope="module")
def weather_tool() -> dict[str, Any]:
    return load_tool("get_weather")


def _budget(prompts: dict[str, Any], model_profile: ModelProfile) -> int:
    # The profile caps it for slow CPU test models: a model that writes no call runs to max_tokens.
    return model_profile.output_budget(prompts["tools"]["parallel_weather"]["max_tokens"])


def _parallel_request(prompts: dict[str, Any], tool: dict[str, Any], model_profile: ModelProfile,
                      **extra: Any) -> dict[str, Any]:
    case = prompts["tools"]["parallel_weather"]
    return {"messages": [{"role": "user", "content": case["prompt"]}], "tools": [tool], "tool_choice": "auto",
            "temperature": 0, "max_tokens": _budget(prompts, model_profile), **extra}


def _describe(calls: list[ToolCall]) -> str:
    return "; ".join(f"{call.name}({short(call.arguments, 120)})" for call in calls) or "no tool calls"


def _city_of(call: ToolCall, cities: dict[str, list[str]]) -> str | None:
    # Read from the raw text: whether it is valid JSON is another check's question.
    return next((city for city, names in cities.items() if any(name in call.arguments for name in names)), None)


@pytest.mark.trials("tools")
async def test_model_calls_get_weather_for_both_cities_in_one_turn(chat, prompts, model_profile, weather_tool,
                                                                   stream, trials) -> None:
    cities = prompts["tools"]["parallel_weather"]["cities"]
    body = _parallel_request(prompts, weather_tool, model_profile)

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        calls = reply.tool_calls
        assert len(calls) >= 2, f"expected parallel calls for {', '.join(cities)} in one turn, got " \
                                f"{_describe(calls)} (content: {short(reply.content)!r})"
        names = {call.name for call in calls}
        assert names == {"get_weather"}, f"calls name tools {sorted(names)}, only get_weather was offered"
        covered = {_city_of(call, cities) for call in calls}
        missing = [city for city in cities if city not in covered]
        assert not missing, f"no get_weather call for {', '.join(missing)}: {_describe(calls)}"
        ids = [call.id for call in calls]
        assert all(ids) and len(set(ids)) == len(ids), f"tool-call ids must be present and distinct, got {ids}"
        assert reply.finish_reason == "tool_calls", \
            f"finish_reason is {reply.finish_reason!r}, not 'tool_calls', for a turn that calls tools"

    await trials(sample)


async def test_tool_call_arguments_are_json_that_fits_the_schema(chat, prompts, model_profile, weather_tool,
                                                                 stream) -> None:
    reply = reply_of(await chat(_parallel_request(prompts, weather_tool, model_profile), stream=stream))
    assert reply.tool_calls, f"no tool calls to check (content: {short(reply.content)!r})"
    problems = [f"{call.name} call #{call.index}: {problem}"
                for call in reply.tool_calls for problem in argument_problems(weather_tool, call.arguments)]
    assert_no_problems(problems)


async def test_content_has_no_tool_markup_or_guessed_weather(chat, prompts, weather_tool, model_profile,
                                                            stream) -> None:
    reply = reply_of(await chat(_parallel_request(prompts, weather_tool, model_profile), stream=stream))
    # Four findings about one content, each its own problem.
    problems = []
    markup = markers_found(reply.content, prompts["tools"]["tool_markup"])
    if markup:
        problems.append(f"tool-call markup {markup} left in content: {short(reply.content)!r}")
    if re.search(r'"name"\s*:\s*"get_weather"', reply.content):
        problems.append(f"a raw get_weather call is written in content: {short(reply.content)!r}")
    guessed = re.search(prompts["tools"]["guessed_weather"], reply.content, re.IGNORECASE)
    if guessed is not None:
        problems.append(f"content guesses the weather ({guessed.group()!r}) instead of waiting for the tool: "
                        f"{short(reply.content)!r}")
    leaked = markers_found(reply.content, model_profile.reasoning_markers)
    if leaked:
        problems.append(f"reasoning markers {leaked} in content: {short(reply.content)!r}")
    assert_no_problems(problems)


def _canonical(calls: list[ToolCall]) -> list[tuple[str, str]]:
    def arguments(call: ToolCall) -> str:
        try:
            return json.dumps(json.loads(call.arguments), ensure_ascii=False, sort_keys=True)
        except ValueError:
            return call.arguments  # not JSON: compared as sent; another check fails it
    return sorted((call.name, arguments(call)) for call in calls)


def _fragment_problems(events: list[Any]) -> list[str]:
    """Tool-call fragments on the wire without an index, or a first fragment without id and name."""
    problems: list[str] = []
    seen: set[int] = set()
    for event in events:
        if not event.has_data or event.is_done:
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            continue
        for choice in chunk.get("choices") or []:
            for fragment in (choice.get("delta") or {}).get("tool_calls") or []:
                index = fragment.get("index")
                if not isinstance(index, int):
                    problems.append(f"a tool-call fragment has no integer index: {short(json.dumps(fragment), 150)}")
                    continue
                if index not in seen:
                    seen.add(index)
                    function = fragment.get("function") or {}
                    if not fragment.get("id") or not function.get("name"):
                        problems.append(f"the first fragment of call {index} lacks its id or name: "
                                        f"{short(json.dumps(fragment, ensure_ascii=False), 150)}")
    return problems


async def test_streamed_tool_calls_reassemble_to_the_non_streamed_calls(chat, prompts, model_profile,
                                                                       weather_tool) -> None:
    body = _parallel_request(prompts, weather_tool, model_profile)
    plain = reply_of(await chat(body, stream=False, label="non-streamed"))
    exchange = await chat(body, stream=True, label="streamed")
    streamed = reply_of(exchange)
    assert not streamed.problems, f"the stream is broken: {'; '.join(streamed.problems)}"
    problems = _fragment_problems(exchange.events)
    assert_no_problems(problems)
    if not streamed.tool_calls and not plain.tool_calls:
        # [] == []: nothing was reassembled, so nothing is shown; whether a call was due is the other checks' verdict.
        pytest.skip(f"neither reply called a tool, so there are no calls to compare (non-streamed finish_reason "
                    f"{plain.finish_reason!r}, content {short(plain.content)!r}; streamed content "
                    f"{short(streamed.content)!r})")
    assert _canonical(streamed.tool_calls) == _canonical(plain.tool_calls), (
        f"streamed calls reassemble to {_describe(streamed.tool_calls)}, "
        f"the non-streamed reply has {_describe(plain.tool_calls)}"
    )
    assert streamed.finish_reason == plain.finish_reason, \
        f"finish_reason streamed {streamed.finish_reason!r} vs non-streamed {plain.finish_reason!r}"


def _round_trip_messages(prompts: dict[str, Any]) -> list[dict[str, Any]]:
    case = prompts["tools"]["round_trip"]
    calls = [{"id": call["id"], "type": "function",
              "function": {"name": "get_weather", "arguments": json.dumps({"city": call["city"]}, ensure_ascii=False)}}
             for call in case["calls"]]
    results = [{"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                "content": json.dumps(case["results"][call["city"]], ensure_ascii=False)} for call in case["calls"]]
    # The assistant turn is written here, not taken from the model, so this check
    # stands on its own: it asks only whether results fed back reach the answer.
    return [{"role": "user", "content": prompts["tools"]["parallel_weather"]["prompt"]},
            {"role": "assistant", "content": None, "tool_calls": calls}, *results]


def _uses_result(reply: Reply, result: dict[str, Any]) -> bool:
    return result["temperature_c"] in integers_in(reply.content) or result["weather"] in reply.content


async def test_tool_results_reach_the_final_answer(chat, prompts, model_profile, weather_tool, stream) -> None:
    results = prompts["tools"]["round_trip"]["results"]
    body = {"messages": _round_trip_messages(prompts), "tools": [weather_tool], "temperature": 0,
            "max_tokens": _budget(prompts, model_profile)}
    reply = reply_of(await chat(body, stream=stream))
    assert not reply.tool_calls, f"the results are there, yet the model calls again: {_describe(reply.tool_calls)}"
    assert reply.content.strip(), no_answer(reply, "no final answer after the tool results")
    ignored = [city for city, result in results.items() if not _uses_result(reply, result)]
    assert not ignored, (
        f"the final answer does not use the tool results for {', '.join(ignored)} "
        f"(stub results: {json.dumps(results, ensure_ascii=False)}): "
        f"{short(reply.content)!r}"
    )


@pytest.mark.trials("tools")
async def test_tool_choice_none_answers_in_text_without_calls(chat, prompts, model_profile, weather_tool,
                                                              stream, trials) -> None:
    body = _parallel_request(prompts, weather_tool, model_profile, tool_choice="none")

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        problems = []
        if reply.tool_calls:
            problems.append(f"tool_choice 'none', yet the reply calls {_describe(reply.tool_calls)}")
        elif reply.finish_reason == "tool_calls":  # with calls, the same finding as the calls
            problems.append("tool_choice 'none', yet finish_reason is 'tool_calls'")
        if not reply.content.strip():
            problems.append("tool_choice 'none': the reply has no text either")
        assert_no_problems(problems)

    await trials(sample)


@pytest.mark.trials("tools")
async def test_forced_named_tool_is_called(chat, prompts, model_profile, weather_tool, stream, trials) -> None:
    case = prompts["tools"]["forced"]
    body = {"messages": [{"role": "user", "content": case["prompt"]}], "tools": [weather_tool],
            "tool_choice": {"type": "function", "function": {"name": case["tool"]}}, "temperature": 0,
            "max_tokens": _budget(prompts, model_profile)}

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        assert reply.tool_calls, f"tool_choice forces {case['tool']}, yet no call was made (content: " \
                                 f"{short(reply.content)!r})"
        names = {call.name for call in reply.tool_calls}
        assert names == {case["tool"]}, f"tool_choice forces {case['tool']}, the reply calls {sorted(names)}"

    await trials(sample)
