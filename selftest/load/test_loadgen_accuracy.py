"""The load generator's figures agree with the truth within 2% (issue 6, a measured figure).

A reference engine with a 50 ms TTFT and 10 ms per token (one token per event),
started with ``stamp_events``, puts its own send time in every event. On one host
that is the client's clock too, so each request's true TTFT and TPOT (what the
engine really did, from the same client send time) stand beside what the load
generator reports. At concurrency 32, for the 128/128 and the 4096/128 shapes, the
median over five rounds of the reported P50 TTFT and P50 TPOT must be within 2% of the
true ones. No other self-test runs while this module does (``cpu_alone`` in
``selftest/conftest.py``): what is measured is the client's error, not its neighbours'.

Why against the engine's stamps and not against the nominal 50 ms: a Python engine
on a shared 2-core machine does not itself deliver its latency model exactly when
32 requests arrive at once (it parses them one after another), and that is the
engine's doing, not the client's. The nominal deviation is printed for the record
(``-s``) and reported by ``benchmarks/client_accuracy.py``.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterator

import pytest

from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.load.generator import Cell, LoadGenerator, PromptIds, analyse_round, build_bodies
from engine_acceptance.load.metrics import percentile
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import (RunningReferenceEngine, start_reference_engine,
                                                         started_as_the_command)
from engine_acceptance.load.timing_truth import true_timing

TTFT_MS, TPOT_MS = 50.0, 10.0
CONCURRENCY, REQUESTS, ROUNDS = 32, 64, 5
TOLERANCE = 0.02

pytestmark = [pytest.mark.cpu_alone, pytest.mark.usefixtures("cpu_alone")]


@pytest.fixture(scope="module")
def engine() -> Iterator[RunningReferenceEngine]:
    # Started as a run starts it: the client's timing error, not a forked engine's (launcher.started_as_the_command).
    with started_as_the_command():
        running = start_reference_engine(latency=LatencyModel(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS),
                                         stream_chunk_tokens=1, stamp_events=True)
    with running:
        yield running


async def measure(url: str, input_tokens: int) -> dict[str, list[float]]:
    target = EngineTarget(url, "reference-model")
    prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=input_tokens)
    cell = Cell(input_tokens, 128, CONCURRENCY, REQUESTS, CONCURRENCY)
    figures: dict[str, list[float]] = {"ttft": [], "true_ttft": [], "tpot": [], "true_tpot": []}
    index = 0

    def bodies(count: int) -> list[bytes]:
        nonlocal index
        built = build_bodies(cell, prompts, model=target.model, ignore_eos=True, count=count, first_index=index)
        index += count
        return built

    async with LoadGenerator(target, CONCURRENCY) as generator:
        await generator.round(bodies(cell.warmup_requests))
        for _ in range(ROUNDS):
            raw = await generator.round(bodies(cell.requests))
            records, summary = analyse_round(raw)
            assert summary.completed == REQUESTS, summary.errors_by_kind
            truths = [true_timing(request, record.output_tokens) for request, record in zip(raw.requests, records)]
            assert all(truth is not None for truth in truths), "the engine did not stamp its events"
            figures["ttft"].append(summary.metrics["p50_ttft_ms"])
            figures["tpot"].append(summary.metrics["p50_tpot_ms"])
            figures["true_ttft"].append(percentile([t.ttft_s for t in truths], 50) * 1000)
            figures["true_tpot"].append(percentile([t.tpot_s for t in truths], 50) * 1000)
    return figures


@pytest.mark.parametrize("input_tokens", [128, 4096], ids=["128/128", "4096/128"])
def test_reported_p50_ttft_and_tpot_at_concurrency_32_are_within_2_percent_of_the_truth(
        engine: RunningReferenceEngine, input_tokens: int) -> None:
    figures = asyncio.run(measure(engine.url, input_tokens))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"\n{input_tokens}/128 @ {CONCURRENCY}: P50 TTFT reported {medians['ttft']:.3f} ms, engine-true "
          f"{medians['true_ttft']:.3f} ms, nominal {TTFT_MS} ms; P50 TPOT reported {medians['tpot']:.4f} ms, "
          f"engine-true {medians['true_tpot']:.4f} ms, nominal {TPOT_MS} ms")
    for metric in ("ttft", "tpot"):
        reported, truth = medians[metric], medians[f"true_{metric}"]
        error = abs(reported - truth) / truth
        assert error <= TOLERANCE, (f"P50 {metric.upper()} reported {reported:.3f} ms vs {truth:.3f} ms sent by "
                                    f"the engine: {error:.1%} off (limit {TOLERANCE:.0%}); rounds {figures}")
