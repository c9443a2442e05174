"""Reasoning against answer, cached prompt tokens and draft acceptance in the load's figures (issue 41).

Scripted streams, no engine and no wall clock, for the per-request figures (the first
reasoning and content token, the tokens of each and where they came from, cached tokens),
the rounds' figures and the tables' columns; the reference engine in this process for the
speculative-decoding counters read around a round.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bare_server import serving

from engine_acceptance.load.metrics import (
    PROMPT_CACHED_SHARE,
    REASONING_FROM_EVENTS,
    SPEC_DECODE_ACCEPTANCE,
    record_request,
    request_samples,
    summarize_cell,
    summarize_round,
    with_spec_decode,
)
from engine_acceptance.load.output_split import (
    NOT_REPORTED,
    acceptance_rate_properties,
    cell_of_round,
    cell_of_summary,
    split_columns,
)
from engine_acceptance.load.spec_decode import RoundCounters, SpecDecodeCounters, SpecDecodeReading
from engine_acceptance.reference_engine.config import ReferenceEngineConfig
from engine_acceptance.reference_engine.server import build_app
from engine_acceptance.wire.reassembly import reassemble_stream
from engine_acceptance.wire.sse import SSEEvent
from engine_acceptance.wire.types import EngineTarget

VLLM_COUNTERS = {"spec_decode_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
                 "spec_decode_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",)}


def _chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                        "finish_reason": finish}]}


def _usage(prompt: int, completion: int, **details: Any) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion, **details}}


def _stream(*timed: tuple[float, dict[str, Any] | str]):
    """A reply from (seconds after sending, chunk) pairs; the request was sent at 0."""
    events = [SSEEvent(data=item if isinstance(item, str) else json.dumps(item), received_at=at) for at, item in timed]
    return reassemble_stream(events, sent_at=0.0)


def _reasoning_then_answer(usage: dict[str, Any]):
    """A reasoning model's reply: an empty role chunk, two reasoning deltas, a tool-less answer in two deltas."""
    return _stream((0.01, _chat({"role": "assistant", "content": ""})), (0.10, _chat({"reasoning": "Two plus"})),
                   (0.12, _chat({"reasoning": " two."})), (0.30, _chat({"content": "It is"})),
                   (0.32, _chat({"content": " four."})), (0.33, _chat({}, "stop")), (0.34, usage), (0.35, "[DONE]"))


def test_first_reasoning_and_first_content_token_are_timed_apart_and_ttft_stays_the_first_output() -> None:
    reply = _reasoning_then_answer(_usage(10, 12, completion_tokens_details={"reasoning_tokens": 5}))
    assert (reply.first_output_time, reply.first_reasoning_time, reply.first_content_time) == (0.10, 0.10, 0.30)
    assert (reply.output_events, reply.reasoning_events, reply.content_events) == (4, 2, 2)
    record = record_request(reply, start_s=0.0, status=200, chat=True)
    assert (record.ttft_s, record.first_reasoning_s, record.first_content_s) == (0.10, 0.10, 0.30)
    # Usage's reasoning tokens, and where they were read; the content is the rest of the output.
    assert (record.reasoning_tokens, record.reasoning_tokens_source, record.content_tokens) == (
        5, "usage.completion_tokens_details.reasoning_tokens", 7)
    assert record.cached_tokens is None  # not reported: None, never 0


def test_reasoning_tokens_are_read_where_sglang_puts_them_and_counted_from_events_only_when_no_usage_has_them() -> None:
    sglang = record_request(_reasoning_then_answer(_usage(10, 12, reasoning_tokens=6)), start_s=0.0, status=200,
                            chat=True)
    assert (sglang.reasoning_tokens, sglang.reasoning_tokens_source) == (6, "usage.reasoning_tokens")
    counted = record_request(_reasoning_then_answer(_usage(10, 12)), start_s=0.0, status=200, chat=True)
    assert (counted.reasoning_tokens, counted.reasoning_tokens_source, counted.content_tokens) == (
        2, REASONING_FROM_EVENTS, 10)
    assert (counted.output_events, counted.reasoning_events) == (4, 2)


def test_cached_prompt_tokens_come_from_usage_and_a_completion_has_no_reasoning_to_split() -> None:
    reply = _stream((0.05, {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": "a"}]}),
                    (0.06, {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": "b",
                                                                                  "finish_reason": "length"}]}),
                    (0.07, {"id": "x", "object": "text_completion", "choices": [],
                            "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10,
                                      "prompt_tokens_details": {"cached_tokens": 6}, "reasoning_tokens": 0}}),
                    (0.08, "[DONE]"))
    record = record_request(reply, start_s=0.0, status=200)
    assert (record.first_content_s, record.cached_tokens) == (0.05, 6)
    # /v1/completions: SGLang's reasoning_tokens 0 says nothing there; every output token is content.
    assert (record.reasoning_tokens, record.reasoning_tokens_source, record.content_tokens) == (None, None, 2)
    samples = request_samples([record], chat=False)
    assert samples["cached_tokens"] == [6.0] and samples["cached_of_prompt_tokens"] == [8.0]
    assert not {"first_content_ms", "content_tokens", "first_reasoning_ms"} & set(samples)


def _records(reasoning_tokens: int | None = 5, cached: bool = False) -> list:
    details: dict[str, Any] = {}
    if reasoning_tokens is not None:
        details["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    if cached:
        details["prompt_tokens_details"] = {"cached_tokens": 4}
    return [record_request(_reasoning_then_answer(_usage(10, 12, **details)), start_s=0.0, status=200, chat=True)
            for _ in range(3)]


def test_a_round_reports_the_split_and_the_acceptance_of_its_counters() -> None:
    summary = summarize_round(_records(cached=True), wall_s=1.0)
    assert summary.metrics["p50_first_reasoning_ms"] == pytest.approx(100.0)
    assert summary.metrics["p50_first_content_ms"] == pytest.approx(300.0)
    assert (summary.metrics["mean_reasoning_tokens"], summary.metrics["mean_content_tokens"]) == (5.0, 7.0)
    assert (summary.metrics["mean_cached_tokens"], summary.metrics[PROMPT_CACHED_SHARE]) == (4.0, 0.4)
    assert summary.metrics[SPEC_DECODE_ACCEPTANCE] is None  # no counters read
    counted = with_spec_decode(summary, accepted=60, drafted=80)
    assert counted.metrics[SPEC_DECODE_ACCEPTANCE] == 0.75 and counted.as_dict()["spec_decode"] == {
        "accepted_tokens": 60, "draft_tokens": 80}
    cell = summarize_cell("c", [counted, with_spec_decode(summary, accepted=20, drafted=40)])
    assert cell.spec_decode == (80, 120) and cell.median(SPEC_DECODE_ACCEPTANCE) == 0.625


def test_columns_show_where_a_cell_has_values_and_say_not_reported_rather_than_zero() -> None:
    records = _records()
    chat = cell_of_summary("image@1", summarize_cell("image@1", [summarize_round(records, 1.0)]), records, chat=True,
                           spec_decode_note="engine profile 'x' names no metrics_endpoint")
    header, rows, notes = split_columns([chat])
    assert header == ["P50 first reasoning ms", "P50 first content ms", "reasoning tok/req", "content tok/req"]
    assert rows == [["100", "300", "5", "7"]]
    # No cached tokens and no acceptance anywhere: no column of zeros, a note with the reason.
    assert any(note.startswith(f"Cached prompt tokens: {NOT_REPORTED}") for note in notes)
    assert f"Speculative-decoding acceptance: {NOT_REPORTED}: engine profile 'x' names no metrics_endpoint." in notes
    assert any("usage.completion_tokens_details.reasoning_tokens, as the engine reported them" in n for n in notes)

    # A completions cell beside a chat cell that has cached tokens: no reasoning split for it, and its
    # cached tokens, which its engine did not report, say so.
    cached = _records(cached=True)
    with_cache = cell_of_summary("image@4", summarize_cell("image@4", [summarize_round(cached, 1.0)]), cached,
                                 chat=True, spec_decode_note=None)
    text = [record_request(_reasoning_then_answer(_usage(10, 12)), start_s=0.0, status=200)]
    completions = cell_of_round("128/32@1rps", summarize_round(text, 1.0), text, chat=False, spec_decode_note=None)
    header, rows, notes = split_columns([with_cache, completions])
    assert header[-2:] == ["cached prompt tok/req", "cached share"]
    assert rows[0][-2:] == ["4", "40.0%"] and rows[1] == ["n/a"] * 4 + [NOT_REPORTED] * 2
    assert any(note.startswith("/v1/completions has no reasoning field") for note in notes)


def test_reasoning_counted_from_events_says_how_many_tokens_an_event_carried() -> None:
    records = _records(reasoning_tokens=None)
    cell = cell_of_summary("video@1", summarize_cell("video@1", [summarize_round(records, 1.0)]), records, chat=True,
                           spec_decode_note=None)
    _, _, notes = split_columns([cell])
    [how] = [note for note in notes if note.startswith("Reasoning tokens")]
    assert "counted: one token per streamed event carrying reasoning" in how
    assert "3.00 output tokens per event" in how  # 12 tokens over 4 events with output


def test_acceptance_is_a_rate_of_draft_tokens_per_cell() -> None:
    records = _records()
    rounds = [with_spec_decode(summarize_round(records, 1.0), 30, 40), with_spec_decode(summarize_round(records, 1.0),
                                                                                          10, 20)]
    cell = cell_of_summary("c@1", summarize_cell("c@1", rounds), records, chat=True, spec_decode_note=None)
    header, rows, _ = split_columns([cell])
    assert header[-1] == "spec decode acceptance" and rows[0][-1] == "62.5% [50.0-75.0%]"
    [(name, value)] = acceptance_rate_properties([cell])
    assert json.loads(value) == {"name": "spec_decode_acceptance[c@1]", "k": 40, "n": 60}


class _Scripted:
    """Counters that read as scripted: each read pops the next reading."""

    def __init__(self, *readings: SpecDecodeReading | None) -> None:
        self.readings = list(readings)
        self.unavailable: str | None = None

    async def read(self) -> SpecDecodeReading | None:
        return self.readings.pop(0)


async def test_each_round_takes_the_counters_increase_and_one_read_serves_two_rounds() -> None:
    around = RoundCounters(_Scripted(SpecDecodeReading(100, 70), SpecDecodeReading(140, 100),  # type: ignore[arg-type]
                                     SpecDecodeReading(180, 110)))
    summary = summarize_round(_records(), 1.0)
    await around.start()
    first = await around.finish(summary)
    await around.start()  # the end of the first round is the start of the second: no read
    second = await around.finish(summary)
    assert (first.spec_accepted, first.spec_drafted, second.spec_accepted, second.spec_drafted) == (30, 40, 10, 40)
    # A counter that went back (an engine restarted) gives no increase, and says why.
    restarted = RoundCounters(_Scripted(SpecDecodeReading(100, 70), SpecDecodeReading(5, 2)))  # type: ignore[arg-type]
    await restarted.start()
    assert (await restarted.finish(summary)).spec_drafted is None
    assert restarted.unavailable and "went back" in restarted.unavailable
    assert (await RoundCounters(None).finish(summary)) is summary


async def test_the_counters_are_read_from_the_engines_metrics_and_missing_ones_are_said() -> None:
    async with serving(build_app(ReferenceEngineConfig(spec_decode_acceptance=0.5))) as url:
        counters = SpecDecodeCounters(EngineTarget(url, "reference-model"), "/metrics", VLLM_COUNTERS)
        assert await counters.read() == SpecDecodeReading(0.0, 0.0) and counters.unavailable is None
        absent = SpecDecodeCounters(EngineTarget(url, "reference-model"), "/metrics",
                                    {**VLLM_COUNTERS, "spec_decode_draft_tokens": ("vllm:no_such_counter",)})
        assert await absent.read() is None
        assert absent.unavailable == "GET /metrics serves no vllm:no_such_counter (no speculative decoding configured)"
        wrong_path = SpecDecodeCounters(EngineTarget(url, "reference-model"), "/no-metrics", VLLM_COUNTERS)
        assert await wrong_path.read() is None and wrong_path.unavailable == "GET /no-metrics answered HTTP 404"
    no_endpoint = SpecDecodeCounters(EngineTarget("http://127.0.0.1:9", "m"), None, VLLM_COUNTERS, profile="p")
    assert await no_endpoint.read() is None and no_endpoint.unavailable == "p names no metrics_endpoint"
    unnamed = SpecDecodeCounters(EngineTarget("http://127.0.0.1:9", "m"), "/metrics", {}, profile="p")
    assert unnamed.unavailable and unnamed.unavailable.startswith("p names no speculative-decoding counters")


def test_a_chat_cell_whose_output_was_all_reasoning_says_no_content_streamed() -> None:
    # vLLM's qwen3 reasoning parser on a model whose template has no markers: every token is reasoning.
    reply = _stream((0.1, _chat({"reasoning": "a"})), (0.2, _chat({"reasoning": "b"}, "length")),
                    (0.3, _usage(10, 2, completion_tokens_details={"reasoning_tokens": 2})), (0.4, "[DONE]"))
    records = [record_request(reply, start_s=0.0, status=200, chat=True)]
    assert (records[0].first_content_s, records[0].content_tokens) == (None, 0)
    cell = cell_of_round("128/32@1rps", summarize_round(records, 1.0), records, chat=True, spec_decode_note=None)
    header, _, notes = split_columns([cell])
    assert "P50 first content ms" not in header and "P50 first reasoning ms" in header
    assert any(note.startswith("First content token: no content streamed in any chat cell") for note in notes)
