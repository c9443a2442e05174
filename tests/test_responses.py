"""The Responses API (issue 15): ``POST /v1/responses`` where the deployment serves it.

vLLM and SGLang both serve OpenAI's newer API next to chat completions, on the same chat
template and parsers, and agents (Codex, the Agents SDK) speak only it. What an application
reads must hold: a text answer is a ``message`` output item with ``output_text`` content, a
status ``completed`` (or ``incomplete`` with ``incomplete_details.reason``
``max_output_tokens`` when the budget cut it: a pretrained model never stops by itself, so
that is accepted and never judged) and usage whose input and output tokens add up to the
total; streamed, the events come in order (``response.created`` first, the terminal
``response.completed`` last, increasing ``sequence_number``, each item announced before its
deltas and closed after them) and the text deltas add up to the ``output_text.done`` text and
to the final response's text; a forced function call is a ``function_call`` item with a
``call_id``, a ``name`` and JSON ``arguments``, whose result fed back as a
``function_call_output`` with the same ``call_id`` (stateless: no ``previous_response_id``,
which vLLM serves only with ``VLLM_ENABLE_RESPONSES_API_STORE``) gets a text answer; and
reasoning is a ``reasoning`` item apart from the message, never in its ``output_text``.

Terminal event: vLLM ends every stream with ``response.completed``, even when the status in
it is ``incomplete``; OpenAI sends ``response.incomplete`` then. Either is accepted: the
status the final response carries is what is judged.

The capability is ``responses``: declared in a model profile or discovered by a probe (a tiny
request to ``/v1/responses``); an engine without the endpoint (404/405) skips these checks
with its own words. Answer quality is never judged.
"""

from __future__ import annotations

import json
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, markers_found, short
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.profiles.tool_schemas import argument_problems, load_tool
from engine_acceptance.report_attachments import attach_exchange
from engine_acceptance.resources import load_prompts
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.responses import (
    delta_problems,
    items_of,
    order_problems,
    output_text,
    read_stream,
    status_problems,
    usage_problems,
)

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.responses, pytest.mark.requires("responses")]

CASE: dict[str, Any] = load_prompts("contract")["responses"]
PATH = "/v1/responses"


@pytest.fixture
def respond(acceptance, raw_client):
    """``await respond(body, stream=...)``: one Responses request, attached to the report."""
    async def send(body: dict[str, Any], *, stream: bool, label: str = "") -> tuple[Exchange, dict[str, Any]]:
        mode = "streamed" if stream else "non-streamed"
        with allure.step(f"POST {PATH} ({mode}){': ' + label if label else ''}"):
            exchange = await raw_client.post(PATH, {**body, "model": acceptance.target.model, "stream": stream},
                                             stream=stream)
            attach_exchange(exchange, acceptance.redactor, label)
        return exchange, _final_response(exchange)

    return send


def _final_response(exchange: Exchange) -> dict[str, Any]:
    """The finished response: the body, or the terminal event's response; fails the check otherwise."""
    __tracebackhide__ = True
    mode = "streamed" if exchange.stream else "non-streamed"
    if exchange.error_kind is not None or exchange.status is None or not 200 <= exchange.status < 300:
        raise AssertionError(f"{mode} request to {exchange.url} failed: {exchange.describe_failure()}")
    if exchange.stream:
        stream = read_stream(exchange.events)
        assert not stream.unreadable, f"the stream has unreadable events: {'; '.join(stream.unreadable[:3])}"
        final = stream.final
        assert final is not None, f"the stream ends without response.completed; events: {stream.types[-5:]}"
        return final
    body = exchange.body
    assert isinstance(body, dict) and isinstance(body.get("output"), list), \
        f"HTTP {exchange.status} without a response object: {short(json.dumps(body, ensure_ascii=False, default=str))}"
    return body


def _text_request(model_profile: ModelProfile, prompt: str) -> dict[str, Any]:
    return {"input": prompt, "temperature": 0,
            "max_output_tokens": min(CASE["max_output_tokens"], model_profile.reply_tokens)}


def _describe(response: dict[str, Any]) -> str:
    return ", ".join(str(item.get("type")) for item in response.get("output") or []) or "no output items"


async def test_text_answer_is_a_message_with_output_text_and_usage_that_adds_up(respond, model_profile,
                                                                               stream) -> None:
    body = _text_request(model_profile, CASE["prompt"])
    _, response = await respond(body, stream=stream)
    budget = body["max_output_tokens"]
    problems = status_problems(response, budget) + usage_problems(response, budget)
    messages = items_of(response, "message")
    if not messages:
        problems.append(f"no message output item ({_describe(response)})")
    elif not output_text(response).strip():
        problems.append(f"the message has no output_text (status {response.get('status')!r}, content "
                        f"{short(json.dumps(messages[0].get('content'), ensure_ascii=False))})")
    assert_no_problems(problems)


async def test_streamed_events_come_in_order(respond, model_profile) -> None:
    exchange, _ = await respond(_text_request(model_profile, CASE["prompt"]), stream=True)
    stream = read_stream(exchange.events)
    problems = order_problems(stream.events)
    assert_no_problems(problems, detail=f" (events: {short(', '.join(stream.types), 400)})")


async def test_streamed_text_deltas_add_up_to_the_final_text(respond, model_profile) -> None:
    exchange, final = await respond(_text_request(model_profile, CASE["prompt"]), stream=True)
    problems = delta_problems(read_stream(exchange.events).events, final)
    assert_no_problems(problems)


def _function_tool(name: str) -> dict[str, Any]:
    """A chat tool schema in the Responses API's flat shape."""
    function = load_tool(name)["function"]
    return {"type": "function", **{key: function[key] for key in ("name", "description", "parameters")
                                   if key in function}}


@pytest.mark.requires("tools")
async def test_function_call_round_trip_answers_the_result_in_text(respond, model_profile, stream) -> None:
    name = CASE["tool"]
    tool = _function_tool(name)
    first = {"input": CASE["tool_prompt"], "tools": [tool], "tool_choice": {"type": "function", "name": name},
             "temperature": 0, "max_output_tokens": model_profile.output_budget(CASE["max_output_tokens"])}
    exchange, response = await respond(first, stream=stream, label="forced call")
    calls = items_of(response, "function_call")
    assert calls, (f"tool_choice names {name}, yet the response has no function_call item ({_describe(response)}; "
                   f"status {response.get('status')!r}; output_text {short(output_text(response))!r})")
    call = calls[0]
    problems = [f"function_call.{key} is {call.get(key)!r}, not a non-empty string" for key in ("call_id", "name")
                if not isinstance(call.get(key), str) or not call[key]]
    if call.get("name") != name:
        problems.append(f"function_call names {call.get('name')!r}, tool_choice forced {name!r}")
    problems += [f"function_call.arguments: {p}" for p in argument_problems(load_tool(name),
                                                                            str(call.get("arguments")))]
    if stream:
        # The stream's own item must name the same call: an agent pairs the result by this call_id.
        streamed = {event["item"].get("call_id") for event in read_stream(exchange.events).events
                    if event.get("type") == "response.output_item.done"
                    and isinstance(event.get("item"), dict) and event["item"].get("type") == "function_call"}
        if streamed != {c.get("call_id") for c in calls}:
            problems.append(f"the stream's function_call items have call_id {sorted(map(str, streamed))}, "
                            f"response.completed has {sorted(str(c.get('call_id')) for c in calls)}")
    assert_no_problems(problems)

    result = {"type": "function_call_output", "call_id": call["call_id"],
              "output": json.dumps(CASE["tool_result"], ensure_ascii=False)}
    echoed = {key: call[key] for key in ("type", "call_id", "name", "arguments")}
    # tool_choice "none": the answer to the result is text whatever the model would do next.
    second = {**first, "input": [{"role": "user", "content": CASE["tool_prompt"]}, echoed, result],
              "tool_choice": "none"}
    _, answer = await respond(second, stream=stream, label="function_call_output")
    budget = second["max_output_tokens"]
    problems = status_problems(answer, budget)
    if items_of(answer, "function_call"):
        problems.append(f"tool_choice 'none' after the result, yet the response calls again ({_describe(answer)})")
    if not output_text(answer).strip():
        problems.append(f"no output_text answers the function_call_output ({_describe(answer)})")
    assert_no_problems(problems)


@pytest.mark.requires("reasoning")
async def test_reasoning_is_an_item_apart_from_the_output_text(respond, model_profile, stream) -> None:
    if not model_profile.reasoning_default_on:
        pytest.skip(f"model profile {model_profile.name!r}: the model does not reason by default, and the "
                    "Responses API has no chat_template_kwargs to turn its thinking on")
    body = _text_request(model_profile, CASE["reasoning_prompt"])
    _, response = await respond(body, stream=stream)
    text = output_text(response)
    leaked = markers_found(text, model_profile.reasoning_markers)
    assert not leaked, f"reasoning markers {leaked} in output_text: {short(text)!r}"
    reasoning = items_of(response, "reasoning")
    thought = "".join(part.get("text") or "" for item in reasoning for part in item.get("content") or []
                      if isinstance(part, dict)) + "".join(part.get("text") or "" for item in reasoning
                                                           for part in item.get("summary") or []
                                                           if isinstance(part, dict))
    assert thought.strip(), (f"the model reasons by default, yet the response has no reasoning item with text "
                             f"({_describe(response)}); output_text: {short(text)!r}")
    assert thought.strip() not in text, f"the reasoning text is repeated in output_text: {short(text)!r}"
