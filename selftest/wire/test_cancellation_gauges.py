"""The Prometheus reader's gauges and the wait for idle (wire/prometheus.py, wire/cancellation.py),
with a scripted reader and clock; and the reference engine's load accounting and gauges."""

from __future__ import annotations

import pytest

from engine_acceptance.reference_engine.generation import Generation, run_past_eos
from engine_acceptance.reference_engine.prometheus import METRIC_NAMES, render_metrics
from engine_acceptance.reference_engine.stream import BatchLoad
from engine_acceptance.wire.cancellation import GaugeReading, not_idle, watch_until_idle
from engine_acceptance.wire.prometheus import Gauge, parse_prometheus, read_gauge

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.5
"""


def test_the_first_name_the_engine_serves_is_read_and_its_series_combined() -> None:
    series = parse_prometheus(VLLM_TEXT)
    assert read_gauge(series, ["vllm:num_requests_running"]) == Gauge("vllm:num_requests_running", 4.0, 2)
    # An older vLLM serves only the deprecated KV name: it is found, and said; usages take the fullest engine.
    assert read_gauge(series, ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"], combine="max") == \
        Gauge("vllm:gpu_cache_usage_perc", 0.5, 2)
    assert read_gauge(series, ["sglang:num_running_reqs"]) is None
    with pytest.raises(ValueError, match="combine"):
        read_gauge(series, ["x"], combine="mean")


def _reading(at_s: float, running: float = 0, waiting: float = 0, kv: float | None = 0.0) -> GaugeReading:
    gauges: dict[str, Gauge | None] = {"running": Gauge("r", running, 1), "waiting": Gauge("w", waiting, 1)}
    if kv is not None:
        gauges["kv_cache_usage"] = Gauge("kv", kv, 1)
    return GaugeReading(at_s, gauges)


def test_idle_means_nothing_running_or_waiting_and_kv_back_at_its_idle_value() -> None:
    assert not_idle(_reading(0.0, kv=0.1), kv_idle=0.1) == []
    assert not_idle(_reading(0.0, running=2, waiting=1, kv=0.3), kv_idle=0.1) == ["r 2", "w 1", "kv 0.3 (idle: 0.1)"]
    # No KV gauge named, or no idle value yet: only running and waiting count.
    assert not_idle(_reading(0.0, kv=None), kv_idle=0.1) == []
    assert not_idle(_reading(0.0, kv=0.9), kv_idle=None) == []
    assert not_idle(GaugeReading(0.0, problem="GET /metrics: HTTP 500"), kv_idle=None) == ["GET /metrics: HTTP 500"]


async def _no_sleep(_seconds: float) -> None:
    return None


def _script(readings: list[GaugeReading]):
    queue = list(readings)

    async def read() -> GaugeReading:
        return queue.pop(0)

    return read


async def test_the_watch_ends_at_the_first_idle_reading_and_says_when() -> None:
    watch = await watch_until_idle(_script([_reading(0.1, running=4, kv=0.2), _reading(0.4, running=1, kv=0.05),
                                            _reading(0.7)]), timeout_s=5, kv_idle=0.0, sleep=_no_sleep)
    assert watch.seconds_to_idle == pytest.approx(0.7) and len(watch.readings) == 3


async def test_a_reading_that_arrives_after_the_timeout_does_not_count_even_when_idle() -> None:
    # A slow read that straddles the deadline must not pass a leftover request off as gone.
    watch = await watch_until_idle(_script([_reading(0.5, running=4), _reading(1.2)]), timeout_s=1.0,
                                   kv_idle=0.0, sleep=_no_sleep)
    assert watch.idle is None and watch.seconds_to_idle is None
    assert watch.not_idle(watch.readings[0]) == ["r 4"]


def test_reference_engine_counts_kv_per_request_and_serves_it_in_each_conventions_names() -> None:
    load = BatchLoad(kv_capacity_tokens=1000)
    first, second = load.hold(), load.hold()
    first.tokens, second.tokens = 100, 150
    load.active, load.waiting = 2, 1
    assert load.kv_usage() == pytest.approx(0.25)
    for convention, names in METRIC_NAMES.items():
        series = parse_prometheus(render_metrics(convention, "m", load))
        assert read_gauge(series, [names.running]) == Gauge(names.running, 2.0, 1)
        assert read_gauge(series, [names.waiting]) == Gauge(names.waiting, 1.0, 1)
        assert read_gauge(series, [names.kv_cache_usage]) == Gauge(names.kv_cache_usage, 0.25, 1)
    load.release(first)
    load.release(second)
    assert load.kv_tokens == 0 and load.kv_usage() == 0.0


def test_chat_ignore_eos_runs_past_the_natural_end_to_max_tokens() -> None:
    natural = Generation(None, "hello", "stop", 2)  # one text token and EOS
    long = run_past_eos(natural, 50)
    assert (long.finish_reason, long.completion_tokens) == ("length", 50)
    assert long.content.startswith("hello") and len(long.content) == len("hello") + 49
    cut = Generation(None, "hel", "length", 1)
    assert run_past_eos(cut, 50) is cut
