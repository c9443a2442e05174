"""The reference engine's latency model: TTFT, per-token time, batch slowdown, pacing.

Pacing is checked on a scripted clock (the stream module's ``time.monotonic`` and
``asyncio.sleep`` replaced), so the deadlines are exact and nothing waits.
"""

from __future__ import annotations

import asyncio

import pytest

from engine_acceptance.reference_engine import stream
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.stream import BatchLoad, Pacer


def test_ttft_grows_with_the_prompt_and_tpot_with_the_batch() -> None:
    model = LatencyModel(ttft_ms=50, tpot_ms=10, prefill_ms_per_1k_tokens=20, batch_slowdown=0.05)
    assert model.ttft_seconds(0) == pytest.approx(0.050)
    assert model.ttft_seconds(4096) == pytest.approx(0.050 + 0.020 * 4.096)
    assert model.tpot_seconds(1) == pytest.approx(0.010)
    assert model.tpot_seconds(32) == pytest.approx(0.010 * (1 + 31 * 0.05))
    assert LatencyModel(tpot_ms=10).tpot_seconds(32) == pytest.approx(0.010), "no slowdown unless asked"


@pytest.mark.parametrize("field", ["ttft_ms", "tpot_ms", "prefill_ms_per_1k_tokens", "batch_slowdown"])
def test_negative_latency_settings_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LatencyModel(**{field: -1.0})


class ScriptedTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedTime:
    clock = ScriptedTime()
    monkeypatch.setattr(stream.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(stream.asyncio, "sleep", clock.sleep)
    return clock


def test_tokens_leave_at_fixed_deadlines_counted_from_arrival(scripted: ScriptedTime) -> None:
    arrival = scripted.now
    scripted.now += 0.004  # parsing the request took 4 ms: not added to the TTFT
    pacer = Pacer(LatencyModel(ttft_ms=50, tpot_ms=10), prompt_tokens=128, start=arrival)

    async def emit() -> list[float]:
        times = []
        for tokens in range(1, 5):
            await pacer.reach(tokens)
            times.append(scripted.now - arrival)
            scripted.now += 0.003  # writing the event: absorbed by the next deadline
        return times

    assert asyncio.run(emit()) == pytest.approx([0.050, 0.060, 0.070, 0.080])


def test_batch_slowdown_prices_each_step_at_the_batch_size_seen_when_it_runs(scripted: ScriptedTime) -> None:
    load = BatchLoad()
    load.active = 1
    pacer = Pacer(LatencyModel(ttft_ms=0, tpot_ms=10, batch_slowdown=0.5), prompt_tokens=1, load=load,
                  start=scripted.now)
    start = scripted.now

    async def emit() -> list[float]:
        times = []
        for tokens, active in ((1, 1), (2, 1), (3, 3), (4, 3), (5, 1)):
            load.active = active
            await pacer.reach(tokens)
            times.append(round((scripted.now - start) * 1000, 6))
        return times

    # Steps of 10 ms alone, 20 ms beside two others (1 + 2 * 0.5), 10 ms alone again.
    assert asyncio.run(emit()) == [0.0, 10.0, 30.0, 50.0, 60.0]


def test_past_the_knee_each_request_in_flight_adds_its_time_to_every_token() -> None:
    model = LatencyModel(tpot_ms=10, knee_inflight=4, tpot_ms_per_inflight_over_knee=5)
    assert [model.tpot_seconds(n) for n in (1, 4)] == pytest.approx([0.010, 0.010]), "nothing below the knee"
    assert model.tpot_seconds(5) == pytest.approx(0.015)
    assert model.tpot_seconds(9) == pytest.approx(0.035)
    with pytest.raises(ValueError, match="knee_inflight"):
        LatencyModel(knee_inflight=-1)
