"""Streaming (TEST-PLAN §1): the stream ends properly and matches the non-streamed reply."""

from __future__ import annotations

import pytest

from engine_acceptance.assertions import assert_no_problems, reply_of

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.streaming]


def _request(prompts, model_profile) -> dict:
    return {"messages": [{"role": "user", "content": prompts["text"]["arithmetic"]["prompt"]}],
            "temperature": 0, "max_tokens": model_profile.reply_tokens}


async def test_stream_ends_with_done_and_a_final_finish_reason(chat, prompts, model_profile) -> None:
    exchange = await chat(_request(prompts, model_profile), stream=True)
    reply = reply_of(exchange)
    problems = []
    if not reply.done_received:
        problems.append(f"the stream ended without data: [DONE] after {reply.chunk_count} chunk(s)")
    if reply.events_after_done:
        problems.append(f"{reply.events_after_done} event(s) arrived after data: [DONE]")
    if not reply.finish_reason_is_valid:
        problems.append(f"no valid finish_reason in the stream (got {reply.finish_reason!r})")
    assert_no_problems(problems)


async def test_every_stream_event_is_a_well_formed_chunk(chat, prompts, model_profile) -> None:
    exchange = await chat(_request(prompts, model_profile), stream=True)
    reply = reply_of(exchange)
    problems = [problem for problem in reply.problems if "[DONE]" not in problem]
    if reply.chunk_objects != {"chat.completion.chunk"}:
        problems.append(f"chunk objects: {sorted(reply.chunk_objects)}")
    if len(reply.chunk_ids) != 1:
        problems.append(f"chunks should share one id, saw {len(reply.chunk_ids)}")
    if reply.chunk_count < 2:
        problems.append(f"only {reply.chunk_count} chunk(s): the reply was not streamed")
    assert_no_problems(problems)


async def test_streamed_reply_has_the_same_shape_as_the_non_streamed_reply(chat, prompts, model_profile) -> None:
    # Reasoning is left out of the shape on purpose: its placement is the reasoning
    # separation check's verdict, and one defect should fail one check.
    whole = reply_of(await chat(_request(prompts, model_profile), stream=False, label="non-streamed"))
    streamed = reply_of(await chat(_request(prompts, model_profile), stream=True, label="streamed"))
    assert streamed.shape() == whole.shape(), f"streamed {streamed.shape()} != non-streamed {whole.shape()}"
