"""Thinking modes and reasoning effort (TEST-PLAN §2; seed 001).

How a mode is selected comes from the model profile (``thinking.modes``), where an
effort goes from the engine profile (``reasoning_effort_in``); nothing here asks
which engine it talks to. Seed 001 asked the warehouse question three times per
mode at temperature 0 and got disabled 0/3 (264), adaptive 3/3, enabled 3/3 on
both engines: each mode is its own test id, so that known result can be recorded
as an expected failure of ``[disabled]`` alone, and the count is attached to the
report as a table.

The mode checks, the 240 question and the accepted effort are trials of kind
``thinking`` (K = 5 unless --trials or the profile says): an engine that ignores the
thinking switch one request in five fails them, where one request would pass four runs
in five. Every sample must pass. The effort comparison (high reasons more than low) is
one pair of requests.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import integers_in, markers_found, reply_of, short, unclosed_reasoning
from engine_acceptance.profiles.profile import ModelProfile
from engine_acceptance.profiles.request_options import with_reasoning_effort, with_thinking_mode
from engine_acceptance.reporting.csv_text import rows_csv
from engine_acceptance.run_bundle import rate_property
from engine_acceptance.trials import TrialResult, current_sample

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.thinking]

MODES = ("disabled", "adaptive", "enabled")
EFFORTS = ("low", "medium", "high")


def _question(prompts: dict[str, Any], profile: ModelProfile) -> dict[str, Any]:
    case = prompts["thinking"]["warehouse"]
    # The prompt's budget leaves room for a real model's reasoning; a model profile's cap (a model
    # that never stops by itself) keeps each sample to the cap's time.
    return {"messages": [{"role": "user", "content": case["prompt"]}], "temperature": 0,
            "max_tokens": profile.output_budget(case["max_tokens"])}


def _in_mode(body: dict[str, Any], profile: ModelProfile, mode: str) -> dict[str, Any]:
    if mode not in profile.thinking_modes:
        pytest.skip(f"model profile {profile.name!r} ({profile.source}) defines no {mode!r} thinking mode")
    return with_thinking_mode(body, profile, mode)


def _final_integer(text: str) -> int | None:
    found = integers_in(text)
    return found[-1] if found else None


@pytest.mark.requires("thinking_modes")
@pytest.mark.trials("thinking")
async def test_disabled_mode_answers_in_content_without_reasoning(chat, prompts, model_profile, stream,
                                                                  trials) -> None:
    body = _in_mode(_question(prompts, model_profile), model_profile, "disabled")

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        assert reply.content.strip(), f"thinking disabled: content is empty (finish_reason={reply.finish_reason!r})"
        assert not reply.reasoning.strip(), (
            f"thinking disabled, yet the reply carries reasoning in {', '.join(reply.reasoning_fields)}: "
            f"{short(reply.reasoning)!r}"
        )
        leaked = markers_found(reply.content, model_profile.reasoning_markers)
        assert not leaked, f"thinking disabled, yet content holds reasoning markers {leaked}: {short(reply.content)!r}"

    await trials(sample)


@pytest.mark.requires("thinking_modes")
@pytest.mark.trials("thinking")
async def test_enabled_mode_returns_reasoning_apart_from_content(chat, prompts, model_profile, stream,
                                                                 trials) -> None:
    body = _in_mode(_question(prompts, model_profile), model_profile, "enabled")

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        leaked = markers_found(reply.content, model_profile.reasoning_markers)
        assert reply.reasoning.strip(), (
            "thinking enabled, yet the reasoning field (reasoning / reasoning_content) is empty"
            + (f" and content holds reasoning markers {leaked}" if leaked else "")
        )
        assert not leaked, f"reasoning markers {leaked} in content: {short(reply.content)!r}"
        assert reply.content.strip(), (f"thinking enabled: content is empty next to the reasoning "
                                       f"(finish_reason={reply.finish_reason!r}){unclosed_reasoning(reply)}")

    await trials(sample)


@pytest.mark.requires("thinking_modes")
@pytest.mark.trials("thinking")
async def test_adaptive_mode_answers_with_clean_content(chat, prompts, model_profile, stream, trials) -> None:
    body = _in_mode(_question(prompts, model_profile), model_profile, "adaptive")

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream))
        assert reply.content.strip(), f"thinking adaptive: content is empty (finish_reason={reply.finish_reason!r})"
        leaked = markers_found(reply.content, model_profile.reasoning_markers)
        assert not leaked, f"reasoning markers {leaked} in content: {short(reply.content)!r}"

    await trials(sample)


@pytest.mark.requires("thinking_modes")
@pytest.mark.trials("thinking")
@pytest.mark.parametrize("mode", MODES)
async def test_thinking_mode_answers_the_240_question(chat, prompts, model_profile, mode, request, trials) -> None:
    case = prompts["thinking"]["warehouse"]
    body = _in_mode(_question(prompts, model_profile), model_profile, mode)
    rows: dict[int, dict[str, Any]] = {}

    async def sample() -> None:
        attempt, _ = current_sample()
        exchange = await chat(body, stream=False, label=mode)
        reply = reply_of(exchange)
        answer = _final_integer(reply.content)
        rows[attempt] = {"answer": answer, "e2e_s": exchange.elapsed_s, "completion_tokens":
                         reply.usage.completion_tokens if reply.usage else None, "content": short(reply.content, 80)}
        assert answer == case["answer"], f"thinking {mode}: answered {answer}, not {case['answer']}"

    def counted(result: TrialResult) -> str:
        unanswered = [sample for sample in result.samples if not sample.passed and sample.number not in rows]
        if unanswered:
            return unanswered[0].reason  # a request failed: that, not a count of answers, is the finding
        # Every answer in the message, as seed 001 reported them (the records match the list).
        ordered = [rows[number] for number in sorted(rows)]
        answers = ", ".join(str(row["answer"]) for row in ordered)
        return (f"thinking {mode}: {result.count} correct answers to the 240 question "
                f"(answers: {answers}; contents: {[row['content'] for row in ordered]})")

    try:
        # One request after the other, as seed 001 did: each E2E is one request alone, so the
        # median compares with the seed's and between engines (compare.py); K requests in
        # flight together would batch, and each E2E would include the others' work.
        await trials(sample, sequential=True, lead=counted)
    finally:
        _attach_240_table(request, mode, rows, case["answer"])


def _attach_240_table(request: pytest.FixtureRequest, mode: str, rows: dict[int, dict[str, Any]],
                      expected: int) -> None:
    """The seeds' table (correct, answers, median E2E, tokens) and the figures compare.py reads."""
    if not rows:
        return  # every request failed before an answer: the failure says why
    ordered = [rows[number] for number in sorted(rows)]
    passed = sum(1 for row in ordered if row["answer"] == expected)
    total = len(ordered)
    table = rows_csv(["mode", "correct", "answers", "median E2E s", "completion tokens"],
                     [[mode, f"{passed}/{total}", " ".join(str(r["answer"]) for r in ordered),
                       f"{statistics.median(r['e2e_s'] for r in ordered):.3f}",
                       " ".join(str(r["completion_tokens"]) for r in ordered)]])
    allure.attach(table, name=f"240 question, thinking {mode}: {passed}/{total}",
                  attachment_type=allure.attachment_type.CSV)
    allure.dynamic.parameter("correct", f"{passed}/{total}", excluded=True)
    # For junit and the engine comparison (compare.py): the count and every request's E2E.
    request.node.user_properties += [("thinking_correct", f"{passed}/{total}"),
                                     ("thinking_e2e_s", json.dumps([r["e2e_s"] for r in ordered]))]
    request.node.user_properties.append(rate_property("thinking_correct", passed, total))


def _effort_body(prompts: dict[str, Any], model_profile: ModelProfile, engine_profile, effort: str) -> dict[str, Any]:
    body = _question(prompts, model_profile)
    if "enabled" in model_profile.thinking_modes:
        # An effort means something only while the model thinks.
        body = with_thinking_mode(body, model_profile, "enabled")
    return with_reasoning_effort(body, engine_profile, effort)


def _efforts(model_profile: ModelProfile) -> tuple[str, ...]:
    return model_profile.reasoning_efforts or EFFORTS


@pytest.mark.requires("reasoning_effort")
@pytest.mark.trials("thinking")
@pytest.mark.parametrize("effort", EFFORTS)
async def test_reasoning_effort_is_accepted_and_the_model_still_reasons(chat, prompts, model_profile, engine_profile,
                                                                        effort, trials) -> None:
    if effort not in _efforts(model_profile):
        pytest.skip(f"model profile {model_profile.name!r} lists efforts {list(_efforts(model_profile))}, "
                    f"not {effort!r}")
    body = _effort_body(prompts, model_profile, engine_profile, effort)

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=False))
        assert reply.reasoning.strip(), \
            f"reasoning effort {effort!r} (sent in {engine_profile.reasoning_effort_in}): the reasoning field is empty"
        answer = _final_integer(reply.content)
        assert answer == prompts["thinking"]["warehouse"]["answer"], \
            f"reasoning effort {effort!r}: answered {answer} ({short(reply.content)!r})"

    await trials(sample)


@pytest.mark.requires("reasoning_effort")
async def test_high_effort_reasons_more_than_low_effort(chat, prompts, model_profile, engine_profile) -> None:
    efforts = _efforts(model_profile)
    if "low" not in efforts or "high" not in efforts:
        pytest.skip(f"model profile {model_profile.name!r} lists efforts {list(efforts)}, not both low and high")
    lengths = {}
    for effort in ("low", "high"):
        reply = reply_of(await chat(_effort_body(prompts, model_profile, engine_profile, effort), stream=False,
                                    label=f"effort {effort}"))
        lengths[effort] = len(reply.reasoning)
    allure.attach(f"effort,reasoning characters\nlow,{lengths['low']}\nhigh,{lengths['high']}\n",
                  name="reasoning length by effort", attachment_type=allure.attachment_type.CSV)
    # Equal lengths at temperature 0 mean the effort never reached the chat template.
    assert lengths["high"] > lengths["low"], (
        f"reasoning at effort high ({lengths['high']} characters) is not longer than at low ({lengths['low']}): "
        f"the effort, sent in {engine_profile.reasoning_effort_in} (engine profile {engine_profile.name!r}), "
        f"seems not to reach the model"
    )
