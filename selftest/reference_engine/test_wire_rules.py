"""Self-tests of the reference engine's wire behaviour, without a server.

Its writes are cut inside a multi-byte character (so the suite's clients are proven to reassemble
one), a reply cut by ``max_tokens`` inside a character ends before it (as vLLM's detokenizer holds
it back), ``continuous_usage_stats`` is read, the continuation rule writes CJK and emoji, and the
``split-char-replacement`` defect turns emoji into U+FFFD.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.conventions import get_convention
from engine_acceptance.reference_engine.defects import decode_each_byte
from engine_acceptance.reference_engine.generation import generate_chat
from engine_acceptance.reference_engine.protocol import RequestError, parse_chat_request
from engine_acceptance.reference_engine.conversation import ThinkingMode
from engine_acceptance.reference_engine.responder import respond
from engine_acceptance.reference_engine.stream import EventStream, split_inside_character
from engine_acceptance.reference_engine.tokenizer import get_tokenizer
from engine_acceptance.wire.sse import parse_sse


def test_a_write_is_cut_inside_its_first_multibyte_character() -> None:
    data = 'data: {"content":"天🦋"}\n\n'.encode("utf-8")
    head, tail = split_inside_character(data)
    assert head + tail == data
    with pytest.raises(UnicodeDecodeError):
        head.decode("utf-8")
    assert split_inside_character(b"data: {}\n\n") == (b"data: {}\n\n",)


class _RecordingResponse:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(data)


def test_an_event_with_cjk_goes_out_in_two_writes_that_parse_back_whole() -> None:
    response = _RecordingResponse()
    stream = EventStream(response)  # type: ignore[arg-type]
    asyncio.run(stream.send({"content": "蝴蝶 🦋"}))
    assert len(response.writes) == 2
    events, leftover = parse_sse(b"".join(response.writes))
    assert leftover == b"" and events[0].data == '{"content":"蝴蝶 🦋"}'


def test_max_tokens_inside_a_character_ends_the_reply_before_it() -> None:
    tokenizer = get_tokenizer()
    # "蝴蝶" is six byte tokens: four cut the second character after its first byte.
    generation = generate_chat(None, "蝴蝶", max_tokens=4, tokenizer=tokenizer)
    assert generation.finish_reason == "length" and generation.completion_tokens == 4
    assert generation.content == "蝴"


def _parse(**fields: Any):
    body = {"model": "reference-model", "messages": [{"role": "user", "content": "hi"}], "stream": True, **fields}
    return parse_chat_request(body, config=ReferenceEngineConfig(), convention=get_convention("vllm"))


def test_continuous_usage_stats_is_read_from_stream_options() -> None:
    assert _parse(stream_options={"include_usage": True, "continuous_usage_stats": True}).continuous_usage
    assert not _parse(stream_options={"include_usage": True}).continuous_usage
    with pytest.raises(RequestError, match="continuous_usage_stats"):
        _parse(stream_options={"continuous_usage_stats": "yes"})


def test_each_convention_says_which_chunks_carry_continuous_usage() -> None:
    assert get_convention("vllm").continuous_usage == "every_chunk"
    assert get_convention("sglang").continuous_usage == "output_chunks"


def test_a_text_to_continue_is_continued_in_kind_with_emoji() -> None:
    answer = respond([{"role": "user", "content": "请接着写下去：小猫在草地上追蝴蝶，"}], ThinkingMode())
    assert answer.rule == "continuation" and "🦋" in answer.text and "蝴蝶" in answer.text
    english = respond([{"role": "user", "content": "Continue the story: a cat chased a butterfly,"}],
                      ThinkingMode(enabled=False))
    assert english.reasoning is None and "🦋" in english.text


def test_split_char_replacement_turns_each_emoji_into_four_replacement_characters() -> None:
    assert decode_each_byte("蝴蝶 🦋!") == "蝴蝶 " + "\ufffd" * 4 + "!"
    assert decode_each_byte("plain") == "plain"
