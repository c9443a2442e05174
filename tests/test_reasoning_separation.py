"""Reasoning stays out of the answer (TEST-PLAN §1; seed 000 §3.2).

Seed 000 found a vLLM reasoning parser that judged the reasoning state from the
whole prompt, so streamed reasoning, markers and all, landed in ``content``
while the reasoning field stayed empty. A deployment whose thinking is off by default is
asked with the model profile's (or the discovered) "enabled" thinking mode. Both reasoning field names are
accepted (``reasoning`` on newer vLLM, ``reasoning_content`` on SGLang and older
vLLM) and the one used is reported.
"""

from __future__ import annotations

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, markers_found, no_answer, reply_of, short
from engine_acceptance.profiles.request_options import with_thinking_mode

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.text, pytest.mark.streaming]


def _request(prompts, model_profile) -> dict:
    return {"messages": [{"role": "user", "content": prompts["text"]["arithmetic"]["prompt"]}],
            "temperature": 0, "max_tokens": model_profile.reply_tokens}


@pytest.mark.requires("reasoning")
async def test_reasoning_arrives_in_the_reasoning_field_not_in_content(chat, prompts, model_profile, stream) -> None:
    body = _request(prompts, model_profile)
    if not model_profile.reasoning_default_on:
        # A deployment that reasons only when asked (thinking off by default): ask, as its clients do.
        if "enabled" not in model_profile.thinking_modes:
            pytest.skip(f"model profile {model_profile.name!r} says the model does not reason by default, and "
                        "no 'enabled' thinking mode turns it on")
        body = with_thinking_mode(body, model_profile, "enabled")
    reply = reply_of(await chat(body, stream=stream))
    allure.attach(", ".join(reply.reasoning_fields) or "none", name="reasoning field used",
                  attachment_type=allure.attachment_type.TEXT)
    leaked = markers_found(reply.content, model_profile.reasoning_markers)
    problems = []
    if not reply.reasoning.strip():
        problems.append("the reasoning field (reasoning / reasoning_content) is empty"
                        + (f" and content holds reasoning markers {leaked}: {short(reply.content)!r}" if leaked else ""))
    if not reply.content.strip():
        problems.append(no_answer(reply, "content is empty: the answer is missing next to the reasoning"))
    assert_no_problems(problems)


async def test_content_holds_no_reasoning_markers(chat, prompts, model_profile, stream) -> None:
    reply = reply_of(await chat(_request(prompts, model_profile), stream=stream))
    leaked = markers_found(reply.content, model_profile.reasoning_markers)
    assert not leaked, f"reasoning markers {leaked} in content: {short(reply.content)!r}"
