"""Structured outputs (issue 15): ``response_format`` constrains the reply, or is refused with a 4xx.

An application that asks for ``json_schema`` or ``json_object`` parses the content without
looking: content that is free text, JSON that misses the schema, reasoning written in front
of the JSON, all break it. So the content must parse and validate against the schema
(jsonschema), streamed and not; with thinking on, the reasoning stays in its reasoning field
and the content alone is the JSON; and a schema the engine cannot compile is the client's
error, a 4xx with an error body, never a 500 (vLLM issue 57725) or a constraint dropped in
silence. Answer quality is not judged: under a grammar even a tiny pretrained model writes
JSON. Whether it closes the JSON within ``max_tokens`` is the one thing that depends on the
model (the schema bounds its strings and numbers for that), and a failure says when the
reply was cut. A ``json_object`` reply cut by the model profile's ``max_tokens_cap`` (a budget
smaller than the prompt's, for a slow test model) is judged on what it wrote: the start of one
JSON object.

The capability is ``structured_outputs``: declared in a model profile or discovered by a probe
(a tiny ``json_schema`` request); an engine that refuses ``response_format`` with a 4xx skips
these checks with its own words.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine_acceptance.assertions import assert_no_problems, markers_found, reasoning_used_up, reply_of, short
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.profiles.request_options import with_thinking_mode
from engine_acceptance.resources import load_prompts
from engine_acceptance.wire.contract import json_object_prefix_problem, json_problems, refusal_problem
from engine_acceptance.wire.reassembly import Reply

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.structured_outputs, pytest.mark.requires("structured_outputs")]

CASE: dict[str, Any] = load_prompts("contract")["structured"]


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}


def _request(model_profile: ModelProfile, prompt: str, response_format: dict[str, Any], *,
             thinking: str | None) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": prompt}], "response_format": response_format,
            "temperature": 0, "max_tokens": model_profile.output_budget(CASE["max_tokens"])}
    # Thinking off where the model has a switch: these checks are about the content alone.
    if thinking is not None and thinking in model_profile.thinking_modes:
        body = with_thinking_mode(body, model_profile, thinking)
    return body


def _assert_json(reply: Reply, schema: dict[str, Any] | None, max_tokens: int, model_profile: ModelProfile) -> None:
    asked = "the schema" if schema is not None else "a JSON object"
    leaked = markers_found(reply.content, model_profile.reasoning_markers)
    assert not leaked, f"reasoning markers {leaked} in content, which should be {asked} alone: {short(reply.content)!r}"
    problems = json_problems(reply.content.strip(), schema)
    if problems and schema is None and reply.finish_reason == "length" and max_tokens < CASE["max_tokens"]:
        # Cut by the model profile's max_tokens_cap, not by the prompt's budget: the cap is the
        # profile's choice (a slow CPU test model), so the engine is judged on what it wrote before
        # it. Kept to json_object, that is the start of one object. Pretrained Gemma 3 270M on
        # llama.cpp fills an object with keys for as long as it may (greedy, 512 tokens tried):
        # whether it closes within 128 tokens depends on the CPU's arithmetic (it did on one CI
        # machine, not on another, 2026-12-03).
        problem = json_object_prefix_problem(reply.content)
        if problem is None:
            print(f"json_object: the reply was cut at the model profile's max_tokens_cap={max_tokens} before the "
                  f"object closed; what it wrote is the start of one JSON object: {short(reply.content)!r}")
            return
        problems = [problem]
    # Why the JSON is incomplete, not a problem of its own: it goes with every problem. A reply that
    # never left its reasoning has no JSON at all, and says so.
    used_up = reasoning_used_up(reply)
    cut = f"; {used_up}" if used_up else (
        f"; the reply was cut at max_tokens={max_tokens} (finish_reason 'length') before the JSON was complete"
        if reply.finish_reason == "length" else "")
    assert_no_problems(problems, header=f"response_format asked for {asked}, the content does not fit", detail=cut)


async def test_json_schema_reply_is_json_that_fits_the_schema(chat, model_profile, stream) -> None:
    body = _request(model_profile, CASE["prompt"], _json_schema_format(CASE["schema"]), thinking="disabled")
    reply = reply_of(await chat(body, stream=stream))
    _assert_json(reply, CASE["schema"], body["max_tokens"], model_profile)


async def test_json_object_reply_is_a_json_object(chat, model_profile, stream) -> None:
    body = _request(model_profile, CASE["json_object_prompt"], {"type": "json_object"}, thinking="disabled")
    reply = reply_of(await chat(body, stream=stream))
    _assert_json(reply, None, body["max_tokens"], model_profile)


async def test_with_thinking_on_reasoning_stays_out_of_the_json(chat, model_profile, stream) -> None:
    if "enabled" not in model_profile.thinking_modes:
        pytest.skip(f"model profile {model_profile.name!r} has no thinking switch (no 'enabled' thinking mode, "
                    "declared or discovered)")
    body = _request(model_profile, CASE["prompt"], _json_schema_format(CASE["schema"]), thinking="enabled")
    reply = reply_of(await chat(body, stream=stream))
    assert reply.reasoning.strip(), (
        "thinking is on, yet the reasoning field (reasoning / reasoning_content) is empty; content: "
        f"{short(reply.content)!r}")
    _assert_json(reply, CASE["schema"], body["max_tokens"], model_profile)


async def test_schema_the_engine_cannot_compile_is_refused_with_4xx(chat, stream) -> None:
    schema = CASE["uncompilable_schema"]
    body = {"messages": [{"role": "user", "content": CASE["prompt"]}], "response_format": _json_schema_format(schema),
            "temperature": 0, "max_tokens": 16}
    exchange = await chat(body, stream=stream)
    problem = refusal_problem(exchange)
    assert problem is None, f"response_format with the invalid JSON Schema {json.dumps(schema)}: {problem}"
