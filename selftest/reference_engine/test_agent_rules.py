"""Self-tests of what the built-in engine does for agent traffic (issue 41), in-process: its prefix cache,
history rendered with its reasoning, a thinking token budget, the follow-up answered from an earlier tool
result, and the defects that break each (docs/reference-engine.md)."""

from __future__ import annotations

import json

import pytest

from engine_acceptance.reference_engine.chat_template import render_messages, strip_rendered_prefix
from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.conventions import NO_REASONING_CONFIG, get_convention
from engine_acceptance.reference_engine.conversation import Conversation
from engine_acceptance.reference_engine.defects import DefectHooks
from engine_acceptance.reference_engine.generation import generate_chat
from engine_acceptance.reference_engine.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine_acceptance.reference_engine.protocol import RequestError, parse_chat_request
from engine_acceptance.reference_engine.tokenizer import get_tokenizer
from engine_acceptance.reference_engine.tools import tool_history_rule

TOKENIZER = get_tokenizer()
CALL = {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "广州"}'}}
RESULT = json.dumps({"city": "广州", "weather": "冰雹", "temperature_c": 37}, ensure_ascii=False)


def test_prefix_cache_finds_the_leading_full_blocks_and_never_the_last_token() -> None:
    cache = PrefixCache()
    ids = list(range(100, 100 + 5 * BLOCK_TOKENS))
    assert cache.admit(ids) == 0
    # The same prompt: every full block but the one holding the last token.
    assert cache.admit(ids) == 4 * BLOCK_TOKENS
    # A prompt that shares the first two blocks and then differs.
    assert cache.admit(ids[:2 * BLOCK_TOKENS] + [1] * 3 * BLOCK_TOKENS) == 2 * BLOCK_TOKENS
    # A block equal to a cached one but after another start is no hit: keys are chained.
    assert cache.admit([7] * BLOCK_TOKENS + ids[BLOCK_TOKENS:]) == 0


def test_prefix_cache_evicts_the_least_recently_used_blocks() -> None:
    cache = PrefixCache(capacity_blocks=4)
    first, second = [1] * (3 * BLOCK_TOKENS + 1), [2] * (3 * BLOCK_TOKENS + 1)
    cache.admit(first)
    cache.admit(second)
    assert cache.admit(first) == 0


def test_reasoning_sent_back_in_the_history_is_rendered_under_either_name() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for key in ("reasoning", "reasoning_content"):
        rendered = render_messages([plain[0], {**plain[1], key: "I greet back."}])
        assert "<|assistant|>\n<think>\nI greet back.\n</think>\n\nhello\n" in rendered
    assert "<think>" not in render_messages(plain)


def test_a_lost_prefix_leaves_the_text_after_it() -> None:
    messages = [{"role": "system", "content": "S" * 40}, {"role": "user", "content": "0123456789"}]
    cut = len(render_messages(messages[:1], add_generation_prompt=False)) + len("<|user|>\n") + 4
    assert strip_rendered_prefix(messages, cut) == [{"role": "user", "content": "456789"}]


def test_a_thinking_budget_cuts_the_reasoning_and_the_answer_still_comes() -> None:
    free = generate_chat(("step " * 40).strip(), "42", max_tokens=400, tokenizer=TOKENIZER)
    capped = generate_chat(("step " * 40).strip(), "42", max_tokens=400, tokenizer=TOKENIZER, reasoning_budget=16)
    assert free.reasoning_tokens == TOKENIZER.count(("step " * 40).strip())
    assert capped.reasoning_tokens <= 16 and capped.content == "42" and capped.finish_reason == "stop"


def _parse(body: dict, **config) -> object:
    settings = ReferenceEngineConfig(**config)
    return parse_chat_request({"messages": [{"role": "user", "content": "hi"}], **body}, config=settings,
                              convention=get_convention(settings.convention))


def test_the_budget_is_read_where_vllm_reads_it_and_refused_without_reasoning() -> None:
    assert _parse({"thinking_token_budget": 8}).thinking_budget == 8
    assert _parse({"thinking_token_budget": -1}).thinking_budget is None
    assert _parse({"thinking_token_budget": 8}, convention="sglang").thinking_budget is None
    with pytest.raises(RequestError, match="must be a non-negative integer or -1"):
        _parse({"thinking_token_budget": -2})
    with pytest.raises(RequestError) as refused:
        _parse({"thinking_token_budget": 8}, reasoning=False)
    assert refused.value.message == NO_REASONING_CONFIG


def test_a_follow_up_about_an_earlier_tool_result_is_answered_from_it() -> None:
    messages = [{"role": "user", "content": "查广州天气"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "a", "content": RESULT}, {"role": "assistant", "content": "好的"},
                {"role": "user", "content": "广州现在是多少度？"}]
    said = tool_history_rule(Conversation.from_messages(messages), True)
    assert said is not None and "37°C" in said[1]
    assert tool_history_rule(Conversation.from_messages([*messages[:-1], {"role": "user", "content": "北京呢？"}]),
                             True) is None


def test_the_agent_defects_act_where_they_should() -> None:
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [CALL],
                                                   "reasoning": "r"}, {"role": "tool", "tool_call_id": "a", "content": "x"}]
    request = _parse({"messages": history})
    with pytest.raises(RequestError, match="messages.1.content: Input should be a valid string"):
        DefectHooks(frozenset({"history-null-content-400"})).chat_request(request)
    dropped = DefectHooks(frozenset({"history-reasoning-dropped"})).chat_request(request)
    assert "reasoning" not in dropped.messages[1] and "reasoning" in request.messages[1]
    billed = DefectHooks(frozenset({"usage-ignores-history"})).billed_prompt_tokens(99, history, TOKENIZER)
    assert billed == TOKENIZER.count(render_messages(history[-1:]))
    assert DefectHooks(frozenset({"prefix-cache-never-hits"})).cached_tokens(64) == 0
    assert DefectHooks(frozenset({"thinking-budget-ignored"})).thinking_budget(8) is None
    assert DefectHooks().thinking_budget(8) == 8
