"""Open-loop arrivals and cells: the schedule, and how its keeping is recorded (issue 18).

The schedule is checked against ``vllm bench serve``'s definition (gamma gaps of
shape burstiness and mean 1/rate, scaled so the last request is due at count/rate)
with fixed seeds, no clock. The hot loop runs against a fake session on a scripted
clock with a scripted ``wait``: due and actual send times, lateness, late counts and
the requests in flight at each send are asserted as structure, never as wall-clock
figures.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from engine_acceptance.load.arrivals import LATE_S, arrival_offsets, format_rate, parse_rates, sleep_until
from engine_acceptance.load.generator import analyse_round
from engine_acceptance.load.open_loop.cells import RateCell, connections_to_open, run_open_loop
from test_metrics import DONE, FakeSession, ScriptedClock, completion_chunk, usage_chunk


def instant_reply(tokens: int = 2) -> list[tuple[float, bytes]]:
    """A streamed completion whose reads take no scripted time (the shared clock moves only by the waits)."""
    chunks = [(0.0, completion_chunk("a"))] + [(0.0, completion_chunk("b", "length" if i == tokens - 2 else None))
                                               for i in range(tokens - 1)]
    return chunks + [(0.0, usage_chunk(128, tokens) + DONE)]


def test_the_schedule_is_fixed_by_its_seed_and_ends_at_count_over_rate() -> None:
    first = arrival_offsets(200, 8.0, seed=7)
    assert first == arrival_offsets(200, 8.0, seed=7)
    assert first != arrival_offsets(200, 8.0, seed=8)
    assert list(first) == sorted(first) and first[0] > 0
    assert first[-1] == pytest.approx(200 / 8.0)


def test_gaps_are_gamma_with_shape_burstiness_and_mean_one_over_rate() -> None:
    for burstiness in (0.5, 1.0, 4.0):
        gaps = np.diff((0.0, *arrival_offsets(20000, 10.0, burstiness=burstiness, seed=1)))
        assert gaps.mean() == pytest.approx(0.1, rel=1e-9)  # the normalisation makes it exact
        # A gamma of shape k has a coefficient of variation of 1/sqrt(k): Poisson's is 1.
        assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)


def test_vllm_draws_the_same_gaps_from_the_same_generator() -> None:
    # vllm bench serve: theta = 1 / (rate * burstiness); gamma(shape=burstiness, scale=theta); cumsum; rescale.
    rate, burstiness, count = 3.0, 0.7, 50
    gaps = np.random.default_rng(11).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    due = np.cumsum(gaps) * (count / rate) / np.cumsum(gaps)[-1]
    assert arrival_offsets(count, rate, burstiness=burstiness, seed=11) == pytest.approx(tuple(due))


def test_infinite_rate_sends_all_at_once_and_infinite_burstiness_evenly() -> None:
    assert arrival_offsets(5, math.inf) == (0.0,) * 5
    assert arrival_offsets(4, 2.0, burstiness=math.inf) == pytest.approx((0.5, 1.0, 1.5, 2.0))


@pytest.mark.parametrize("bad", [(3, math.nan, 1.0), (3, 0.0, 1.0), (3, -1.0, 1.0), (3, 1.0, 0.0)],
                         ids=["nan-rate", "zero-rate", "negative-rate", "zero-burstiness"])
def test_a_rate_or_burstiness_not_above_zero_is_refused(bad: tuple[int, float, float]) -> None:
    count, rate, burstiness = bad
    with pytest.raises(ValueError):
        arrival_offsets(count, rate, burstiness=burstiness)


def test_a_sweep_is_parsed_in_order_without_repeats_and_bad_entries_are_named() -> None:
    assert parse_rates("2, 4,8,4") == (2.0, 4.0, 8.0)
    assert parse_rates("inf") == (math.inf,)
    assert [format_rate(r) for r in parse_rates("0.5,inf")] == ["0.5", "inf"]
    for bad in ("", "2,,4", "fast", "0", "-1", "nan"):
        with pytest.raises(ValueError):
            parse_rates(bad)


def test_a_cell_key_names_shape_and_rate() -> None:
    assert RateCell(128, 32, 4.0, 10).key == "128/32@4rps"
    assert RateCell(128, 32, math.inf, 10).key == "128/32@infrps"


def test_sleep_until_a_passed_deadline_returns_without_waiting() -> None:
    clock = ScriptedClock()

    async def go() -> None:
        # A scripted clock never moves: a wait would never end, so it fails here as a timeout, not a hang.
        await asyncio.wait_for(sleep_until(clock.now - 1.0, clock), timeout=2.0)

    asyncio.run(go())


def scripted_wait(clock: ScriptedClock, late_by: dict[int, float], *, yields: int = 0):
    """A wait that reaches each deadline exactly, or late by the given seconds for the n-th send."""
    calls = 0

    async def wait(deadline: float) -> None:
        nonlocal calls
        for _ in range(yields):
            await asyncio.sleep(0)
        clock.now = max(clock.now, deadline + late_by.get(calls, 0.0))
        calls += 1

    return wait


def test_due_and_actual_send_times_and_late_sends_are_recorded_never_shifted() -> None:
    clock = ScriptedClock()
    offsets = (0.1, 0.2, 0.3, 0.4)
    session = FakeSession(clock, [instant_reply() for _ in offsets])
    # The second send is 5 ms late, the fourth 0.5 ms: only the second counts as late (> 1 ms).
    sent = asyncio.run(run_open_loop(session, "http://engine/v1/completions", [b"{}"] * 4, {}, offsets,
                                     clock=clock, wait=scripted_wait(clock, {1: 0.005, 3: 0.0005})))
    timing = sent.timing()
    assert timing.due_s == offsets
    assert timing.sent_s == pytest.approx((0.1, 0.205, 0.3, 0.4005))
    # The third is due at 0.3 as scheduled: a late send does not shift the ones after it.
    assert timing.lateness_s == pytest.approx((0.0, 0.005, 0.0, 0.0005))
    assert timing.late == 1 and LATE_S == 0.001
    assert timing.as_dict()["late_sends"] == 1
    records, summary = analyse_round(sent.raw)
    assert summary.completed == 4 and [r.start_s for r in records] == pytest.approx(timing.sent_s)


def test_requests_in_flight_at_each_send_show_a_queue_building_up() -> None:
    clock = ScriptedClock()
    offsets = (0.0, 0.1, 0.2, 0.3)
    slow = [instant_reply(8) for _ in offsets]
    # A wait that never lets the loop run: no request can finish before the next is sent.
    piling = asyncio.run(run_open_loop(FakeSession(clock, slow), "u", [b"{}"] * 4, {}, offsets, clock=clock,
                                       wait=scripted_wait(clock, {})))
    assert piling.in_flight == (0, 1, 2, 3) and piling.timing().max_in_flight == 3
    clock = ScriptedClock()
    quick = [instant_reply() for _ in offsets]
    # A wait that lets the loop run long enough for each request to end before the next.
    keeping_up = asyncio.run(run_open_loop(FakeSession(clock, quick), "u", [b"{}"] * 4, {}, offsets, clock=clock,
                                           wait=scripted_wait(clock, {}, yields=20)))
    assert keeping_up.in_flight == (0, 0, 0, 0)


def test_as_many_due_times_as_bodies_are_required() -> None:
    clock = ScriptedClock()
    with pytest.raises(ValueError, match="3 bodies for 2 due times"):
        asyncio.run(run_open_loop(FakeSession(clock, []), "u", [b"{}"] * 3, {}, (0.0, 1.0), clock=clock,
                                  wait=scripted_wait(clock, {})))


def test_connections_opened_before_a_cell_follow_littles_law_with_room() -> None:
    # 10 req/s x 0.5 s x 1.5 = 7.5 expected in flight; + 4 sqrt(7.5) = 18.45 -> 19, + 1.
    assert connections_to_open(10.0, 100, 0.5) == 20
    # Never more than the cell's requests; all of them when all are due at once or the
    # warm-up said nothing of the latency.
    assert connections_to_open(100.0, 16, 2.0) == 16
    assert connections_to_open(math.inf, 40, 0.5) == 40
    assert connections_to_open(10.0, 40, None) == 40
