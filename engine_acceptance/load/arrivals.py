"""Open-loop arrivals: when each request is due, and waiting for that moment precisely.

Production traffic does not wait for earlier requests to finish. An open-loop cell
sends request ``i`` at ``start + offsets[i]`` whatever the engine does. The offsets
follow ``vllm bench serve``'s ``get_request``: gaps drawn from a gamma distribution
of shape ``burstiness`` and scale ``1 / (rate * burstiness)`` (mean ``1 / rate``;
burstiness 1 is a Poisson process, below 1 burstier, infinite a constant gap), summed,
then scaled so the last request is due at ``count / rate`` (vLLM's normalisation: a
raw sum misses the cell's length by 1-2%, which would move its throughput). A rate
of ``inf`` sends everything at once. The draws come from ``numpy``'s
``default_rng(seed)``, so a seed gives the same schedule on every machine and run.

Waiting: the client's event loop is pytest-asyncio's stock selector loop, whose
``epoll_wait`` timeout is whole milliseconds rounded up, so ``asyncio.sleep`` alone
wakes up to 1 ms late (the reason the reference engine runs on a microsecond
selector, ``reference_engine/precise_loop.py``). The suite cannot choose the loop
the checks run in, so :func:`sleep_until` sleeps coarsely until :data:`SPIN_S`
before the deadline, then yields to the loop (``asyncio.sleep(0)``) until it is
reached: other requests' reads are served meanwhile, and the send leaves within
microseconds of its time when the loop is not busy.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import numpy as np

__all__ = ["DEFAULT_LOAD_SEED", "LATE_S", "SPIN_S", "arrival_offsets", "format_rate", "parse_rate", "parse_rates",
           "sleep_until"]

Clock = Callable[[], float]

# The schedule's seed unless --load-seed says otherwise: fixed, so two runs send alike.
DEFAULT_LOAD_SEED = 0
# A send more than this behind its due time is "late": counted and reported, never shifted.
LATE_S = 0.001
# How long before a deadline the coarse sleep hands over to yielding: above the 1 ms a
# millisecond epoll timeout can add, with room for a loop pass.
SPIN_S = 0.002


def arrival_offsets(count: int, rate: float, *, burstiness: float = 1.0, seed: int = DEFAULT_LOAD_SEED
                    ) -> tuple[float, ...]:
    """Seconds from the cell's start at which each of ``count`` requests is due, non-decreasing."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not rate > 0:
        raise ValueError(f"rate must be above 0 requests per second, got {rate}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be above 0, got {burstiness}")
    if count == 0:
        return ()
    if math.isinf(rate):
        return (0.0,) * count
    if math.isinf(burstiness):
        gaps = np.full(count, 1.0 / rate)
    else:
        gaps = np.random.default_rng(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    due = np.cumsum(gaps)
    if due[-1] > 0:
        due *= (count / rate) / due[-1]
    return tuple(float(t) for t in due)


def parse_rate(text: str) -> float:
    """One rate in requests per second: a positive number or ``inf``."""
    try:
        rate = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of requests per second (or inf)") from None
    if math.isnan(rate) or rate <= 0:
        raise ValueError(f"{text!r} must be above 0 requests per second (or inf)")
    return rate


def parse_rates(text: str) -> tuple[float, ...]:
    """A sweep, ``2,4,8`` or ``inf``: the rates in the order given, without repeats."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or not all(parts):
        raise ValueError(f"{text!r} has an empty entry; give rates like 2,4,8 or inf")
    rates: list[float] = []
    for part in parts:
        rate = parse_rate(part)
        if rate not in rates:
            rates.append(rate)
    return tuple(rates)


def format_rate(rate: float) -> str:
    """``4``, ``2.5`` or ``inf``: how a rate is named in keys and tables."""
    return "inf" if math.isinf(rate) else f"{rate:g}"


async def sleep_until(deadline: float, clock: Clock = time.monotonic) -> None:
    """Return at ``deadline`` (a ``clock`` time), letting the loop run meanwhile; at once if it has passed."""
    remaining = deadline - clock()
    if remaining > SPIN_S:
        await asyncio.sleep(remaining - SPIN_S)
    # Yielding, not blocking: the requests in flight keep being read while we wait.
    while clock() < deadline:
        await asyncio.sleep(0)
