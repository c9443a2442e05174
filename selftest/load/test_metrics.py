"""Throughput metrics and the load generator's hot loop, on a scripted clock.

No engine and no wall clock: a fake session replays scripted SSE reads and advances
a scripted clock, so every figure is known exactly. The invariants are vLLM's
(``latency - ttft == sum(itl)``, TPOT from ``usage.completion_tokens``) plus
TEST-PLAN §7's (TTFT to the first non-empty output, median of rounds, no pooling).
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import numpy as np
import pytest

from engine_acceptance.load.generator import Cell, PromptIds, analyse_round, build_bodies, run_round
from engine_acceptance.load.metrics import percentile, record_request, summarize_cell, summarize_round
from engine_acceptance.wire.reassembly import reassemble_stream
from engine_acceptance.wire.sse import SSEEvent


class ScriptedClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def completion_chunk(text: str, finish: str | None = None) -> bytes:
    body = {"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": text,
                                                                       "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def usage_chunk(prompt: int, completion: int) -> bytes:
    body = {"id": "cmpl-1", "object": "text_completion", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    return f"data: {json.dumps(body)}\n\n".encode()


DONE = b"data: [DONE]\n\n"


class FakeResponse:
    """Yields scripted (delay, bytes) reads, moving the clock forward before each."""

    def __init__(self, clock: ScriptedClock, script: list[tuple[float, bytes]], status: int = 200) -> None:
        self.clock = clock
        self.script = script
        self.status = status
        self.content_type = "text/event-stream" if status == 200 else "application/json"
        self.content = self

    async def iter_any(self):  # noqa: ANN201 - mirrors aiohttp's StreamReader
        for delay, data in self.script:
            await asyncio.sleep(0)
            self.clock.now += delay
            yield data

    async def __aenter__(self) -> "FakeResponse":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    """Hands out one scripted response per request, in order; remembers what was sent."""

    def __init__(self, clock: ScriptedClock, scripts: list[list[tuple[float, bytes]]],
                 statuses: list[int] | None = None) -> None:
        self.clock = clock
        self.scripts = list(scripts)
        self.statuses = list(statuses or [200] * len(scripts))
        self.sent: list[bytes] = []

    def post(self, url: str, *, data: bytes, headers: dict[str, str]) -> FakeResponse:
        self.sent.append(data)
        return FakeResponse(self.clock, self.scripts.pop(0), self.statuses.pop(0))


def stream_script(*, ttft: float, gaps: list[float], usage: tuple[int, int] | None = (128, 4),
                  empty_first: bool = False) -> list[tuple[float, bytes]]:
    script: list[tuple[float, bytes]] = []
    if empty_first:
        script.append((ttft / 2, completion_chunk("")))
        ttft = ttft / 2
    script.append((ttft, completion_chunk("a")))
    for index, gap in enumerate(gaps):
        last = index == len(gaps) - 1
        script.append((gap, completion_chunk("b", "length" if last else None)))
    tail = (usage_chunk(*usage) if usage else b"") + DONE
    script.append((0.001, tail))
    return script


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def one_round(scripts: list[list[tuple[float, bytes]]], *, concurrency: int = 1,
              statuses: list[int] | None = None):
    clock = ScriptedClock()
    session = FakeSession(clock, scripts, statuses)
    bodies = [b"{}"] * len(scripts)
    raw = run(run_round(session, "http://engine/v1/completions", bodies, {}, concurrency=concurrency, clock=clock))
    return raw, *analyse_round(raw)


def test_ttft_tpot_itl_and_e2e_follow_the_scripted_clock_exactly() -> None:
    _, records, _ = one_round([stream_script(ttft=0.050, gaps=[0.010, 0.020, 0.030])])
    record = records[0]
    assert record.ok
    assert record.ttft_s == pytest.approx(0.050)
    assert record.itl_s == pytest.approx((0.010, 0.020, 0.030))
    assert record.e2e_s == pytest.approx(0.110)
    # TPOT = (E2E - TTFT) / (n - 1) with n = usage.completion_tokens = 4.
    assert record.tpot_s == pytest.approx(0.060 / 3)
    assert record.output_tokens == 4 and record.output_tokens_source == "usage"
    assert record.prompt_tokens == 128


def test_latency_minus_ttft_equals_the_sum_of_inter_token_latencies() -> None:
    gaps = [0.003, 0.0125, 0.007, 0.031, 0.0001]
    _, records, _ = one_round([stream_script(ttft=0.2, gaps=gaps, usage=(1, 6))])
    record = records[0]
    assert math.isclose(record.e2e_s - record.ttft_s, sum(record.itl_s), abs_tol=1e-12)
    assert len(record.itl_s) == len(gaps)


def test_ttft_counts_to_the_first_non_empty_output_not_to_an_empty_first_chunk() -> None:
    _, records, _ = one_round([stream_script(ttft=0.040, gaps=[0.010], empty_first=True, usage=(8, 2))])
    assert records[0].ttft_s == pytest.approx(0.040)
    assert records[0].itl_s == pytest.approx((0.010,))


def test_without_usage_the_event_count_is_used_and_reported_as_a_fallback() -> None:
    _, records, summary = one_round([stream_script(ttft=0.05, gaps=[0.01, 0.01], usage=None)])
    assert records[0].output_tokens == 3 and records[0].output_tokens_source == "events"
    assert records[0].prompt_tokens is None
    assert summary.fallback_counts == 1


def test_errors_are_counted_by_kind_and_leave_the_latency_figures_alone() -> None:
    good = stream_script(ttft=0.05, gaps=[0.01], usage=(8, 2))
    no_done = [(0.05, completion_chunk("a", "length"))]
    refused = [(0.001, b'{"error": "overloaded"}')]
    _, records, summary = one_round([good, no_done, refused], statuses=[200, 200, 503])
    assert [r.error_kind for r in records] == [None, "stream", "http_503"]
    assert "[DONE]" in records[1].error
    assert summary.errors_by_kind == {"stream": 1, "http_503": 1}
    assert summary.completed == 1 and summary.failed == 2
    assert summary.metrics["p50_ttft_ms"] == pytest.approx(50.0)


def test_output_tokens_per_second_is_successful_tokens_over_round_wall_time() -> None:
    raw, _, summary = one_round([stream_script(ttft=0.1, gaps=[0.1] * 3, usage=(8, 4)),
                                 stream_script(ttft=0.1, gaps=[0.1] * 3, usage=(8, 4))], concurrency=1)
    # Concurrency 1: the second request starts after the first; 2 x 4 tokens over the whole round.
    assert raw.wall_s == pytest.approx(2 * 0.401)
    assert summary.output_tokens == 8
    assert summary.metrics["output_tok_s"] == pytest.approx(8 / raw.wall_s)


def test_the_semaphore_holds_at_most_concurrency_requests_in_flight() -> None:
    clock = ScriptedClock()
    in_flight, peak = 0, 0

    class CountingSession(FakeSession):
        def post(self, url: str, *, data: bytes, headers: dict[str, str]) -> FakeResponse:
            response = super().post(url, data=data, headers=headers)
            outer = self

            class Counted(FakeResponse):
                async def __aenter__(self) -> "Counted":
                    nonlocal in_flight, peak
                    in_flight += 1
                    peak = max(peak, in_flight)
                    return self

                async def __aexit__(self, *exc: object) -> None:
                    nonlocal in_flight
                    in_flight -= 1

            del outer
            return Counted(response.clock, response.script, response.status)

    scripts = [stream_script(ttft=0.01, gaps=[0.01]) for _ in range(10)]
    run(run_round(CountingSession(clock, scripts), "u", [b"{}"] * 10, {}, concurrency=3, clock=clock))
    assert peak == 3


def test_percentiles_are_numpy_linear_interpolation() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    for q in (50, 95, 99):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q, method="linear")))
    assert percentile(values, 95) == pytest.approx(8.8)
    assert percentile([], 50) is None


def test_a_cell_is_the_median_of_round_values_with_min_max_never_a_pooled_percentile() -> None:
    def round_with_ttfts(ttfts: list[float]):
        records = [record_request(reassemble_stream([
            SSEEvent(completion_chunk("x").decode()[6:-2], received_at=t),
            SSEEvent(completion_chunk("y", "length").decode()[6:-2], received_at=t + 0.01),
            SSEEvent("[DONE]", received_at=t + 0.01)], sent_at=0.0), start_s=0.0, status=200) for t in ttfts]
        return summarize_round(records, wall_s=1.0)

    rounds = [round_with_ttfts([0.010] * 19 + [0.100]), round_with_ttfts([0.020] * 20),
              round_with_ttfts([0.030] * 20)]
    cell = summarize_cell("128/128@1", rounds)
    p95 = cell.metrics["p95_ttft_ms"]
    # Round 1: rank 0.95 * 19 = 18.05, between 10 ms and 100 ms -> 14.5 ms.
    assert p95.rounds == pytest.approx((14.5, 20.0, 30.0))
    assert (p95.median, p95.min, p95.max) == pytest.approx((20.0, 14.5, 30.0))
    pooled = percentile([0.010] * 19 + [0.100] + [0.020] * 20 + [0.030] * 20, 95) * 1000
    assert pooled == pytest.approx(30.0) and p95.median != pytest.approx(pooled)


def test_request_bodies_are_prebuilt_bytes_with_exact_length_token_ids_and_distinct_prompts() -> None:
    prompts = PromptIds(corpus=tuple(range(1000)), source="test", seed=5)
    cell = Cell(input_tokens=128, output_tokens=64, concurrency=4, requests=8, warmup_requests=4)
    bodies = build_bodies(cell, prompts, model="m", ignore_eos=True, count=8, first_index=0)
    decoded = [json.loads(body) for body in bodies]
    assert all(isinstance(body, bytes) for body in bodies)
    assert all(len(d["prompt"]) == 128 and d["max_tokens"] == 64 for d in decoded)
    assert all(d["ignore_eos"] is True and d["temperature"] == 0 and d["stream"] is True for d in decoded)
    assert all(d["stream_options"] == {"include_usage": True} for d in decoded)
    assert len({tuple(d["prompt"][:16]) for d in decoded}) == 8, "no two prompts share a first block"
    without = json.loads(build_bodies(cell, prompts, model="m", ignore_eos=False, count=1, first_index=0)[0])
    assert "ignore_eos" not in without


def test_prompts_wrap_around_a_short_corpus_and_keep_their_length() -> None:
    prompts = PromptIds(corpus=(1, 2, 3), source="test", seed=0)
    assert prompts.prompt(7, 2) == [3, 1, 2, 3, 1, 2, 3]
