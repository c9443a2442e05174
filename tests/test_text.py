"""Text answers (TEST-PLAN §1): content, finish reason, usage, arithmetic, memory.

Each check runs its request non-streamed and streamed: an engine must give the
same answer both ways. The answers (arithmetic, the codename) are the model's, so they
are trials: K samples sent together, all of which must be right (temperature 0: an answer
that changes between identical requests is itself a finding). The protocol checks
(finish reason, usage, the max_tokens cut) are single requests: one violation fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.assertions import assert_no_problems, integers_in, no_answer, reasoning_used_up, reply_of, short

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.text]


async def test_models_endpoint_lists_the_served_model(acceptance, sdk_client) -> None:
    page = await sdk_client.sdk.models.list()
    served = [model.id for model in page.data]
    assert acceptance.engine.model in served, f"/v1/models lists {served}, not {acceptance.engine.model!r}"


async def test_reply_has_content_and_a_valid_finish_reason(chat, prompts, model_profile, stream) -> None:
    reply = reply_of(await chat({"messages": [{"role": "user", "content": prompts["text"]["basic"]["prompt"]}],
                                 "temperature": 0, "max_tokens": model_profile.reply_tokens}, stream=stream))
    problems = []
    if not reply.content.strip():
        problems.append(no_answer(reply, f"content is empty (reasoning={short(reply.reasoning)!r})"))
    if not reply.finish_reason_is_valid:
        problems.append(f"finish_reason {reply.finish_reason!r} is not a valid value")
    if reply.role != "assistant":
        problems.append(f"role is {reply.role!r}, not 'assistant'")
    assert_no_problems(problems)


async def test_usage_is_present_and_total_is_prompt_plus_completion(chat, prompts, model_profile, stream) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": prompts["text"]["basic"]["prompt"]}],
                            "temperature": 0, "max_tokens": model_profile.reply_tokens}
    if stream:
        body["stream_options"] = {"include_usage": True}
    reply = reply_of(await chat(body, stream=stream))
    assert reply.usage is not None, "no usage in the reply" + (" (stream_options.include_usage was set)" if stream else "")
    # Each problem on its own (a record of one leaves the others judged); a count that is no
    # non-negative integer is one of the inconsistencies already.
    problems = list(reply.usage.inconsistencies())
    if reply.usage.prompt_tokens == 0:
        problems.append("usage.prompt_tokens is 0 for a non-empty prompt")
    if reply.usage.completion_tokens == 0:
        problems.append("usage.completion_tokens is 0 for a non-empty reply")
    assert_no_problems(problems)


@pytest.mark.trials("answers")
async def test_arithmetic_answer_is_correct(chat, prompts, model_profile, stream, trials) -> None:
    case = prompts["text"]["arithmetic"]

    async def sample() -> None:
        reply = reply_of(await chat({"messages": [{"role": "user", "content": case["prompt"]}],
                                     "temperature": 0, "max_tokens": model_profile.reply_tokens}, stream=stream))
        assert int(case["answer"]) in integers_in(reply.content), \
            f"expected {case['answer']} in the answer, " + (reasoning_used_up(reply) or f"got {short(reply.content)!r}")

    await trials(sample)


@pytest.mark.trials("answers")
async def test_multi_turn_conversation_recalls_the_codename(chat, prompts, model_profile, stream, trials) -> None:
    case = prompts["text"]["codename"]

    async def sample() -> None:
        first = reply_of(await chat({"messages": [{"role": "user", "content": case["remember"]}], "temperature": 0,
                                     "max_tokens": model_profile.reply_tokens}, stream=stream, label="turn 1"))
        messages = [
            {"role": "user", "content": case["remember"]},
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": case["ask"]},
        ]
        second = reply_of(await chat({"messages": messages, "temperature": 0,
                                      "max_tokens": model_profile.reply_tokens}, stream=stream, label="turn 2"))
        assert case["answer"] in second.content, \
            f"turn 2 should repeat the codename {case['answer']!r} from turn 1, " + (
                reasoning_used_up(second) or f"got {short(second.content)!r}")

    await trials(sample)


async def test_max_tokens_cuts_the_reply_with_finish_reason_length(chat, prompts, model_profile, stream) -> None:
    limit = 2
    reply = reply_of(await chat({"messages": [{"role": "user", "content": prompts["text"]["basic"]["prompt"]}],
                                 "temperature": 0, "max_tokens": limit}, stream=stream))
    assert reply.finish_reason == "length", \
        f"a reply cut at max_tokens={limit} should end with finish_reason 'length', got {reply.finish_reason!r}"
    if reply.usage is not None and isinstance(reply.usage.completion_tokens, int):
        assert reply.usage.completion_tokens <= limit, \
            f"usage.completion_tokens={reply.usage.completion_tokens} exceeds max_tokens={limit}"

