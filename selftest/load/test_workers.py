"""Load spread over client processes: one schedule, one clock, figures merged exactly (issue 18).

The split and the merge are checked as structure on scripted clocks: the schedule's
split is a partition with each request's own due time, merged requests come back in
index order, and the merged percentiles are those of all the samples together (never
an average of the workers' percentiles). The process pool is checked with real spawned
processes: results come back per worker, a worker that raises or dies is an error
naming it. End to end, two processes against the reference engine send the same
requests as one and get the same token counts, with TPOT near the latency model.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from engine_acceptance.load.arrivals import arrival_offsets
from engine_acceptance.load.generator import (
    Cell,
    PromptIds,
    RawRequest,
    RawRound,
    analyse_round,
    measure_cell,
    merge_rounds,
    run_round,
)
from engine_acceptance.load.metrics import percentile
from engine_acceptance.load.open_loop.cells import (
    OpenLoopRound,
    RateCell,
    in_flight_at_sends,
    measure_rate_cell,
    merge_open_loop,
)
from engine_acceptance.load.process_plan import (PROCESS_EVENT_LIMIT_PER_S, PROCESS_SEND_LIMIT_PER_S,
                                                  parse_load_processes, plan_processes)
from engine_acceptance.load.workers import WorkerError, WorkerPool, split_concurrency, split_indices
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine
from engine_acceptance.wire.types import EngineTarget
from test_metrics import FakeSession, ScriptedClock, stream_script
from worker_pool_jobs import echo, misbehave, open_nothing

# --- the split -------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "workers"), [(0, 2), (1, 3), (7, 3), (1024, 2), (10, 10)],
                         ids=lambda v: str(v))
def test_the_schedule_split_is_a_partition_with_worker_k_taking_k_plus_multiples_of_w(count: int,
                                                                                     workers: int) -> None:
    shares = split_indices(count, workers)
    assert len(shares) == workers
    assert sorted(i for share in shares for i in share) == list(range(count))
    for k, share in enumerate(shares):
        assert share == tuple(range(k, count, workers))


@pytest.mark.parametrize(("concurrency", "workers", "expected"), [(1024, 2, [512, 512]), (10, 3, [4, 3, 3]),
                                                                  (5, 4, [2, 1, 1, 1])], ids=["even", "rem1", "rem2"])
def test_concurrency_is_split_evenly_with_the_remainder_spread(concurrency: int, workers: int,
                                                               expected: list[int]) -> None:
    assert split_concurrency(concurrency, workers) == expected


def test_each_workers_due_times_are_its_requests_own_and_the_merge_restores_the_schedule() -> None:
    offsets = arrival_offsets(9, 20.0, seed=3)
    indices = split_indices(len(offsets), 2)
    origin = 50.0
    shares = []
    for where in indices:
        # Each request sent 0.1 ms late, ending 5 ms after its due time.
        requests = [RawRequest(start=origin + offsets[i] + 0.0001, end=origin + offsets[i] + 0.005) for i in where]
        shares.append(OpenLoopRound(RawRound(origin, max(r.end for r in requests), requests),
                                    tuple(offsets[i] for i in where), (0,) * len(where)))
    merged = merge_open_loop(shares, indices, offsets, origin)
    timing = merged.timing()
    assert timing.due_s == offsets
    assert timing.lateness_s == pytest.approx((0.0001,) * len(offsets))
    assert [r.start for r in merged.raw.requests] == sorted(r.start for r in merged.raw.requests)
    wrong = [OpenLoopRound(shares[0].raw, tuple(reversed(shares[0].offsets)), shares[0].in_flight), shares[1]]
    with pytest.raises(ValueError, match="worker 0 sent on due times"):
        merge_open_loop(wrong, indices, offsets, origin)


def test_in_flight_at_each_send_is_counted_from_every_processes_stamps() -> None:
    # (start, end): 0 runs 0-10, 1 runs 1-2, 2 starts at 3 (0 still running), 3 at 10 (0 ended at 10).
    spans = [(0.0, 10.0), (1.0, 2.0), (3.0, 4.0), (10.0, 11.0), (3.5, 20.0)]
    requests = [RawRequest(start=s, end=e) for s, e in spans]
    assert in_flight_at_sends(requests) == (0, 1, 1, 1, 2)


# --- the merge -------------------------------------------------------------------------


def _share_round(ttfts_ms: list[float]) -> RawRound:
    """One worker's round on a scripted clock starting at 100.0, like every other worker's."""
    clock = ScriptedClock()
    scripts = [stream_script(ttft=ttft / 1000, gaps=[0.001 * (1 + ttft % 7), 0.002]) for ttft in ttfts_ms]
    return asyncio.run(run_round(FakeSession(clock, scripts), "http://engine/v1/completions", [b"{}"] * len(scripts),
                                 {}, concurrency=1, clock=clock))


def test_merged_records_are_in_request_order_and_percentiles_are_of_all_samples() -> None:
    ttft_ms = [10.0 + 3 * i + (i % 3) * 40 for i in range(11)]
    indices = split_indices(len(ttft_ms), 3)
    shares = [_share_round([ttft_ms[i] for i in where]) for where in indices]
    merged = merge_rounds(shares, indices, 100.0)
    records, summary = analyse_round(merged)
    assert [r.ttft_s * 1000 for r in records] == pytest.approx(ttft_ms)
    samples = [gap for share in shares for r in analyse_round(share)[0] for gap in r.itl_s]
    for p in (50, 95, 99):
        assert summary.metrics[f"p{p}_ttft_ms"] == pytest.approx(percentile(ttft_ms, p))
        assert summary.metrics[f"p{p}_itl_ms"] == pytest.approx(percentile(samples, p) * 1000)
    averaged = sum(analyse_round(share)[1].metrics["p50_ttft_ms"] for share in shares) / len(shares)
    assert summary.metrics["p50_ttft_ms"] != pytest.approx(averaged), "the test data must tell the two apart"
    assert summary.requests == len(ttft_ms) and summary.completed == len(ttft_ms)
    assert summary.client["processes"] == 3 and len(summary.client["cpu_fraction_per_process"]) == 3
    assert summary.client["cpu_fraction"] == max(summary.client["cpu_fraction_per_process"])


def test_a_merge_that_is_not_a_partition_is_refused() -> None:
    shares = [_share_round([10.0, 20.0]), _share_round([30.0])]
    with pytest.raises(ValueError, match="given twice"):
        merge_rounds(shares, [(0, 1), (1,)], 100.0)
    with pytest.raises(ValueError, match="returned 2 requests for 1 indices"):
        merge_rounds(shares, [(0,), (1,)], 100.0)


# --- when: the plan --------------------------------------------------------------------


def test_auto_keeps_one_process_until_the_expected_events_pass_the_measured_limit() -> None:
    assert Cell(128, 128, 256, 512, 256).plan_processes(None).processes == 1
    big = Cell(128, 128, 1024, 2048, 1024).plan_processes(None)
    assert big.processes == min(4, os.cpu_count() or 1) and "above one process's" in big.reason
    assert plan_processes(None, 4 * PROCESS_EVENT_LIMIT_PER_S, streams=1000, how="x", cpus=8).processes == 4
    assert plan_processes(None, 4 * PROCESS_EVENT_LIMIT_PER_S, streams=1000, how="x", cpus=2).processes == 2
    # Open loop: rate x output tokens.
    assert RateCell(128, 32, 100.0, 500).plan_processes(None).processes == 1
    assert RateCell(128, 1000, 100.0, 500).plan_processes(None).expected_events_per_s == 100_000
    # ...and its sends: past what one process keeps on time, though its events are few.
    sends = plan_processes(None, 4 * PROCESS_SEND_LIMIT_PER_S, streams=4000, how="x", cpus=8,
                           sends_per_s=4 * PROCESS_SEND_LIMIT_PER_S)
    assert sends.processes == 4 and f"above one process's {PROCESS_SEND_LIMIT_PER_S:,}" in sends.reason


def test_a_number_of_processes_is_taken_as_given_but_never_more_than_the_streams() -> None:
    assert Cell(128, 128, 4, 8, 4).plan_processes(2).processes == 2
    plan = Cell(128, 128, 2, 8, 2).plan_processes(5)
    assert plan.processes == 2 and "asked 5, the cell has 2 stream(s)" in plan.reason
    assert parse_load_processes("auto") is None and parse_load_processes("3") == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError):
            parse_load_processes(bad)


# --- the pool: real processes ----------------------------------------------------------


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(open_nothing, [None, None])
    workers.start()
    try:
        yield workers
    finally:
        workers.stop()


def test_every_worker_runs_its_own_job_in_its_own_process_from_one_start(pool: WorkerPool) -> None:
    results, start_at = pool.run_round(echo, ["first", "second"])
    assert [job for job, _, _ in results] == ["first", "second"]
    assert all(started >= start_at for _, started, _ in results)
    assert len({pid for _, _, pid in results} | {os.getpid()}) == 3
    # The workers stay up for the next round (one session across a cell's rounds).
    again, _ = pool.run_round(echo, ["third", "fourth"])
    assert [job for job, _, _ in again] == ["third", "fourth"]


@pytest.mark.parametrize(("job", "reason"), [("raise", r"raised RuntimeError: boom in the worker"),
                                             ("die", r"died \(exit code 3\)")], ids=["raises", "dies"])
def test_a_worker_that_raises_or_dies_is_an_error_naming_it(pool: WorkerPool, job: str, reason: str) -> None:
    with pytest.raises(WorkerError, match=r"load worker 1 of 2 \(pid \d+\) " + reason):
        pool.run_round(misbehave, ["fine", job])


def test_a_worker_that_cannot_open_its_session_is_an_error_naming_it() -> None:
    workers = WorkerPool(open_nothing, [None, "refuse"])
    workers.start()
    try:
        with pytest.raises(WorkerError, match=r"load worker 1 of 2 \(pid \d+\) raised RuntimeError: this worker "
                                              r"cannot open its session"):
            workers.run_round(echo, ["a", "b"])
    finally:
        workers.stop()


# --- end to end against the reference engine -------------------------------------------

TTFT_MS, TPOT_MS = 20.0, 5.0


@pytest.fixture(scope="module")
def engine() -> Iterator[RunningReferenceEngine]:
    with start_reference_engine(latency=LatencyModel(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS),
                                stream_chunk_tokens=1) as running:
        yield running


async def _closed(url: str, processes: int):  # noqa: ANN202 - CellResult
    target = EngineTarget(url, "reference-model")
    prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=64, seed=5)
    return await measure_cell(target, Cell(32, 16, 4, 10, 2), prompts, rounds=1, ignore_eos=True,
                              processes=processes)


def test_two_processes_send_the_same_requests_as_one_with_tpot_near_the_model(engine: RunningReferenceEngine
                                                                              ) -> None:
    one, two = (asyncio.run(_closed(engine.url, processes)) for processes in (1, 2))
    assert (one.processes, two.processes) == (1, 2)
    assert two.summary.rounds[0].client["processes"] == 2
    for result in (one, two):
        assert result.summary.rounds[0].completed == 10, result.summary.errors_by_kind
    tokens = [[(r.prompt_tokens, r.output_tokens) for r in result.records[0]] for result in (one, two)]
    assert tokens[0] == tokens[1] and all(n == 16 for _, n in tokens[1])
    for result in (one, two):
        tpot = result.summary.median("p50_tpot_ms")
        # Generous: a shared two-core machine; the structure is what is asserted.
        assert TPOT_MS / 2 <= tpot <= TPOT_MS * 2, f"{result.processes} process(es): P50 TPOT {tpot} ms"
    assert two.as_dict()["client_processes"] == 2


def test_an_open_loop_cell_in_two_processes_keeps_the_whole_schedule(engine: RunningReferenceEngine) -> None:
    async def run():  # noqa: ANN202 - RateCellResult
        target = EngineTarget(engine.url, "reference-model")
        prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=64, seed=5)
        return await measure_rate_cell(target, RateCell(32, 16, 40.0, 12, warmup_requests=2), prompts,
                                       ignore_eos=True, processes=2)

    result = asyncio.run(run())
    assert result.processes == 2 and result.summary.completed == 12, result.summary.errors_by_kind
    assert result.sends.due_s == result.cell.offsets()
    assert len(result.sends.sent_s) == 12 and len(result.sends.in_flight) == 12
    # Sends are never before their due time; how late they are is reported, not asserted.
    assert min(result.sends.lateness_s) >= 0
    assert all(record.output_tokens == 16 for record in result.records)
    # Each worker opened its share of the cell's connections before the schedule began.
    opened, wanted = result.connections
    assert opened == wanted > 0 and wanted % 2 == 0
    assert result.as_dict()["connections_opened_before"] == opened


def test_an_open_loop_cell_opens_the_connections_it_will_hold_before_its_schedule(
        engine: RunningReferenceEngine) -> None:
    lines: list[str] = []

    async def run():  # noqa: ANN202 - RateCellResult
        target = EngineTarget(engine.url, "reference-model")
        prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=64, seed=6)
        return await measure_rate_cell(target, RateCell(32, 16, 40.0, 12, warmup_requests=2), prompts,
                                       ignore_eos=True, processes=1, progress=lines.append)

    result = asyncio.run(run())
    assert result.summary.completed == 12, result.summary.errors_by_kind
    opened, wanted = result.connections
    assert opened == wanted and 1 <= wanted <= 12
    assert f"{opened} of {wanted} connections opened before the schedule" in "\n".join(lines)
