"""Self-tests of the reference model's thinking, word-problem, code and tool rules, and of
the request helpers the thinking checks use, without HTTP."""

from __future__ import annotations

import json

import pytest

from engine_acceptance.sandbox.code_extraction import check_function_source, extract_code
from engine_acceptance.profiles.profile import load_engine_profile, load_model_profile
from engine_acceptance.reference_engine.code_answers import code_rule, hostile_function
from engine_acceptance.reference_engine.conventions import get_convention
from engine_acceptance.reference_engine.defects import DefectHooks
from engine_acceptance.reference_engine.generation import ToolCallOut
from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.protocol import ChatRequest, RequestError, parse_chat_request
from engine_acceptance.reference_engine.conversation import Conversation, ThinkingMode
from engine_acceptance.reference_engine.responder import decide_thinking, respond
from engine_acceptance.reference_engine.tools import (
    parse_tool_request,
    plan_tool_answer,
    tool_call_delta,
    tool_call_pieces,
)
from engine_acceptance.reference_engine.word_problems import solve_stock_problem
from engine_acceptance.profiles.request_options import with_reasoning_effort, with_thinking_mode
from engine_acceptance.sandbox.runner import run_function
from engine_acceptance.profiles.tool_schemas import argument_problems, load_tool

WAREHOUSE = "一个仓库有240件货物，先发走15%，又入库36件，现在有多少件？只输出最终整数，不要解释。"
CODE = "编写Python函数unique_sorted(values)，输入整数列表，返回升序去重后的新列表，不修改原列表。只给一个函数的代码，不要导入模块，不要解释。"
WEATHER = "请在本轮同时调用 get_weather 查询广州和北京的天气，不要猜测结果。"


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# --- thinking ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "enabled", "adaptive"),
    [({}, True, False), ({"thinking_mode": "enabled"}, True, False), ({"thinking_mode": "adaptive"}, True, True),
     ({"thinking_mode": "disabled"}, False, False), ({"enable_thinking": False}, False, False)],
    ids=["default", "enabled", "adaptive", "disabled", "qwen-off"],
)
def test_decide_thinking_reads_each_mode(kwargs: dict, enabled: bool, adaptive: bool) -> None:
    mode = decide_thinking(kwargs, None, get_convention("vllm"))
    assert (mode.enabled, mode.adaptive) == (enabled, adaptive)


def test_effort_is_read_only_where_the_imitated_engine_reads_it() -> None:
    assert decide_thinking({"reasoning_effort": "low"}, "high", get_convention("vllm")).effort == "low"
    assert decide_thinking({"reasoning_effort": "low"}, "high", get_convention("sglang")).effort == "high"


def test_adaptive_reasons_on_the_word_problem_but_not_on_small_talk() -> None:
    adaptive = ThinkingMode(adaptive=True)
    assert respond(user(WAREHOUSE), adaptive).reasoning
    assert respond(user("用一句话介绍你自己。"), adaptive).reasoning is None


def test_effort_changes_the_length_of_the_reasoning() -> None:
    low = respond(user(WAREHOUSE), ThinkingMode(effort="low")).reasoning
    high = respond(user(WAREHOUSE), ThinkingMode(effort="high")).reasoning
    assert len(low) < len(respond(user(WAREHOUSE), ThinkingMode()).reasoning) < len(high)


def test_ignore_thinking_off_keeps_thinking_on() -> None:
    off = ThinkingMode(enabled=False)
    assert DefectHooks(frozenset({"ignore-thinking-off"})).thinking(off).enabled
    assert not DefectHooks().thinking(off).enabled


def _chat(**chat_template_kwargs: object) -> ChatRequest:
    config = ReferenceEngineConfig()
    body = {"model": config.model, "messages": user("hi"), "chat_template_kwargs": chat_template_kwargs}
    return parse_chat_request(body, config=config, convention=get_convention("vllm"))


@pytest.mark.parametrize("kwargs", [{"enable_thinking": True}, {"enable_thinking": False}, {"thinking": False},
                                    {"thinking_mode": "disabled"}, {"thinking_mode": "adaptive"}],
                         ids=["qwen-on", "qwen-off", "deepseek-off", "minimax-off", "minimax-adaptive"])
def test_a_template_that_crashes_on_the_switch_answers_every_switch_400_in_vllms_words(kwargs: dict) -> None:
    hooks = DefectHooks(frozenset({"thinking-switch-template-400"}))
    with pytest.raises(RequestError) as refused:
        hooks.chat_request(_chat(**kwargs))
    assert (refused.value.status, refused.value.err_type, refused.value.message) == (
        400, "BadRequestError", "'thinking_budget' is undefined")
    # No switch, or another chat_template_kwargs key: answered.
    assert hooks.chat_request(_chat()).chat_template_kwargs == {}
    assert hooks.chat_request(_chat(reasoning_effort="low")).chat_template_kwargs == {"reasoning_effort": "low"}


@pytest.mark.parametrize(("kwargs", "fails"), [
    ({"enable_thinking": True}, True), ({"thinking": True}, True), ({"thinking_mode": "enabled"}, True),
    ({"thinking_mode": "adaptive"}, True), ({"enable_thinking": False}, False), ({"thinking_mode": "disabled"}, False),
    ({}, False)], ids=["qwen-on", "deepseek-on", "minimax-on", "minimax-adaptive", "qwen-off", "minimax-off", "none"])
def test_thinking_on_is_answered_500_and_the_model_does_not_reason_by_default(kwargs: dict, fails: bool) -> None:
    hooks = DefectHooks(frozenset({"thinking-on-500"}))
    if fails:
        with pytest.raises(RequestError) as failed:
            hooks.chat_request(_chat(**kwargs))
        assert (failed.value.status, failed.value.err_type, failed.value.message) == (
            500, "InternalServerError", "Internal server error")
        return
    hooks.chat_request(_chat(**kwargs))
    assert not hooks.thinking(decide_thinking(kwargs, None, get_convention("vllm"))).enabled


# --- the warehouse question ----------------------------------------------------------------

@pytest.mark.parametrize("mode", [ThinkingMode(), ThinkingMode(enabled=False), ThinkingMode(adaptive=True)],
                         ids=["enabled", "disabled", "adaptive"])
def test_warehouse_question_is_answered_240_in_every_mode(mode: ThinkingMode) -> None:
    answer = respond(user(WAREHOUSE), mode)
    assert (answer.text, answer.rule) == ("240", "word_problem")


@pytest.mark.parametrize(
    ("question", "expected"),
    [("A shop has 80 apples. It sold 12.5%. How many are left now?", 70),
     ("仓库有100件，卖出20%，又运来5件，还剩多少件？", 85),
     ("计算 19×37，只输出结果。", None),
     ("仓库有100件，现在有多少件？", None)],
    ids=["english-decimal-percent", "sell-then-add", "not-a-stock-problem", "no-operation"],
)
def test_stock_problems_are_read_from_their_words(question: str, expected: int | None) -> None:
    solved = solve_stock_problem(question)
    assert (solved[0] if solved else None) == expected


# --- code ---------------------------------------------------------------------------------

def test_the_code_answer_passes_the_allow_list_and_the_hidden_cases() -> None:
    reasoning, text = code_rule(Conversation.from_messages(user(CODE)), True)
    code = extract_code(text, function="unique_sorted")
    assert code and check_function_source(code.source, function="unique_sorted") == []
    result = run_function(code.source, function="unique_sorted", inputs=[[3, 1, 3], []])
    assert result.ok and [c.returned for c in result.cases] == [[1, 3], []]
    assert [c.input_after for c in result.cases] == [[3, 1, 3], []]


def test_the_hostile_code_does_everything_and_is_refused_by_the_allow_list() -> None:
    source = extract_code(hostile_function("unique_sorted", "values"), function="unique_sorted").source
    problems = " ".join(check_function_source(source, function="unique_sorted"))
    for expected in ("import of os, socket", "With is not allowed", "'open' is neither defined"):
        assert expected in problems
    for attempt in ("os.environ", "open(", "socket.create_connection", "os.fork()", "while True"):
        assert attempt in source


# --- tools ---------------------------------------------------------------------------------

TOOL = load_tool("get_weather")


@pytest.mark.parametrize(
    ("body", "message"),
    [({"tool_choice": "required"}, "`tools` must be set"),
     ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "has not been passed"),
     ({"tools": [{"type": "function"}]}, "tools[0] must be"),
     ({"tools": [TOOL], "tool_choice": "sometimes"}, "'tool_choice' must be")],
    ids=["choice-without-tools", "unknown-named-tool", "malformed-tool", "unknown-choice"],
)
def test_bad_tool_requests_are_refused(body: dict, message: str) -> None:
    with pytest.raises(RequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_tool_request(body)


def _plan(question: str, **body) -> list[ToolCallOut]:
    answer = plan_tool_answer(user(question), ThinkingMode(), parse_tool_request({"tools": [TOOL], **body}),
                              call_id_prefix="call_")
    return list(answer.calls) if answer else []


def test_parallel_calls_one_per_city_with_valid_arguments() -> None:
    calls = _plan(WEATHER)
    assert [json.loads(c.arguments) for c in calls] == [{"city": "广州"}, {"city": "北京"}]
    assert all(argument_problems(TOOL, c.arguments) == [] for c in calls)
    assert len({c.id for c in calls}) == 2


def test_tool_choice_and_parallel_switches_are_honoured() -> None:
    assert _plan(WEATHER, tool_choice="none") == []
    assert len(_plan(WEATHER, parallel_tool_calls=False)) == 1
    assert _plan("用一句话介绍北京。") == []
    forced = _plan("用一句话介绍北京。", tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert [json.loads(c.arguments) for c in forced] == [{"city": "北京"}]


def test_results_in_the_conversation_are_answered_not_called_again() -> None:
    messages = [*user(WEATHER), {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "tool_call_id": "a", "content": json.dumps({"city": "广州", "weather": "雷阵雨",
                                                                             "temperature_c": 31})}]
    assert plan_tool_answer(messages, ThinkingMode(), parse_tool_request({"tools": [TOOL]}),
                            call_id_prefix="call_") is None
    answer = respond(messages, ThinkingMode())
    assert answer.rule == "tool_results" and "31" in answer.text and "雷阵雨" in answer.text


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_streamed_fragments_carry_index_and_rebuild_the_arguments(convention: str) -> None:
    calls = _plan(WEATHER)
    pieces = tool_call_pieces(calls, tokens_per_piece=3)
    deltas = [tool_call_delta(get_convention(convention), piece) for piece in pieces]
    rebuilt: dict[int, dict] = {}
    for delta in deltas:
        (fragment,) = delta["tool_calls"]
        call = rebuilt.setdefault(fragment["index"], {"id": fragment.get("id"), "name": fragment["function"].get("name"),
                                                      "arguments": ""})
        call["arguments"] += fragment["function"]["arguments"]
    assert [(c["id"], c["name"], c["arguments"]) for c in rebuilt.values()] == \
        [(c.id, c.name, c.arguments) for c in calls]
    assert sum(1 for d in deltas if d["tool_calls"][0].get("id")) == len(calls)


# --- request helpers -------------------------------------------------------------------------

def test_thinking_mode_and_effort_go_where_the_profiles_say() -> None:
    model = load_model_profile("minimax-m3")
    body = with_thinking_mode({"messages": [], "chat_template_kwargs": {"x": 1}}, model, "disabled")
    assert body["chat_template_kwargs"] == {"x": 1, "thinking_mode": "disabled"}
    vllm = with_reasoning_effort(body, load_engine_profile("vllm"), "high")
    assert vllm["chat_template_kwargs"]["reasoning_effort"] == "high" and "reasoning_effort" not in vllm
    sglang = with_reasoning_effort(body, load_engine_profile("sglang"), "high")
    assert sglang["reasoning_effort"] == "high" and "reasoning_effort" not in sglang["chat_template_kwargs"]
    with pytest.raises(KeyError, match="no thinking mode"):
        with_thinking_mode({}, load_model_profile("generic"), "enabled")


# --- intermittent thinking fault (issue 17) --------------------------------------------------

def test_every_fifth_identical_request_with_thinking_off_keeps_thinking_on() -> None:
    hooks = DefectHooks(frozenset({"ignore-thinking-off-1-in-5"}))
    off = ThinkingMode(enabled=False)
    body = {"messages": [{"role": "user", "content": WAREHOUSE}], "chat_template_kwargs": {"enable_thinking": False}}
    faulty = [number for number in range(1, 11) if hooks.thinking(off, body).enabled]
    assert faulty == [5, 10]
    # Another body (streamed, say) is its own series: its first four are clean.
    streamed = {**body, "stream": True}
    assert not any(hooks.thinking(off, streamed).enabled for _ in range(4))
    # Thinking on is never touched, and the clean engine never counts.
    assert hooks.thinking(ThinkingMode(), body).enabled
    assert not any(DefectHooks().thinking(off, body).enabled for _ in range(10))
