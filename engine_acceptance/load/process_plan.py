"""How many client processes measure a cell: ``--load-processes N|auto`` (issue 18).

``auto`` (the default) keeps a cell in one process unless the SSE events it is expected
to bring per second exceed what one process times accurately, then takes enough
processes to stay under that, at most one per CPU. The estimate comes from the cell's
shape alone (the engine's speed is what is being measured, so it cannot be known
before), kept simple on purpose:

- closed loop at concurrency C: ``C x ASSUMED_STREAM_EVENTS_PER_S`` (every stream busy);
- open loop at R requests a second of N output tokens: ``R x N`` (one event per token,
  in steady state whatever the engine's speed), and at an infinite rate, everything in
  flight at once, like a closed loop at concurrency = requests.

A number N asks for N processes whatever the estimate. Either way a cell never gets more
processes than it has streams (a process with nothing to send measures nothing), and the
plan's ``reason`` says how the count came about; it is reported with the cell.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["ASSUMED_STREAM_EVENTS_PER_S", "PROCESS_EVENT_LIMIT_PER_S", "ProcessPlan", "parse_load_processes",
           "plan_processes"]

# Events a second one client process takes before its median timing error passes 1 ms:
# benchmarks/README.md, "Events per second one client process takes" (about 27,000 on this
# project's 2-vCPU machine, measured 2026-11-29; the engine shared the two cores).
PROCESS_EVENT_LIMIT_PER_S = 27_000
# One event every 10 ms per busy stream: the benchmark's latency model, and a small model's
# decode speed on a fast GPU. A faster engine brings more; --load-processes N overrides.
ASSUMED_STREAM_EVENTS_PER_S = 100.0


@dataclass(frozen=True)
class ProcessPlan:
    """The client processes that measure one cell, and why that many."""

    processes: int
    reason: str
    expected_events_per_s: float

    def describe(self) -> str:
        plural = "es" if self.processes != 1 else ""
        return f"{self.processes} client process{plural} ({self.reason})"

    def as_dict(self) -> dict[str, Any]:
        return {"client_processes": self.processes, "client_processes_reason": self.reason,
                "expected_events_per_s": self.expected_events_per_s}


def parse_load_processes(text: str) -> int | None:
    """``auto`` -> None, or a whole number of processes, at least 1; ValueError says what is wrong."""
    if text.strip().lower() == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not auto or a whole number of processes") from None
    if count < 1:
        raise ValueError(f"{text!r}: at least 1 process")
    return count


def plan_processes(asked: int | None, expected_events_per_s: float, *, streams: int, how: str,
                   cpus: int | None = None) -> ProcessPlan:
    """``asked`` None is auto; ``streams`` caps the count; ``how`` says where the estimate came from."""
    cpus = cpus or os.cpu_count() or 1
    streams = max(1, streams)
    expected = f"about {expected_events_per_s:,.0f} events/s expected ({how})"
    if asked is not None:
        count = min(asked, streams)
        capped = f"; asked {asked}, the cell has {streams} stream(s)" if count < asked else ""
        return ProcessPlan(count, f"--load-processes {asked}{capped}; {expected}", expected_events_per_s)
    if expected_events_per_s <= PROCESS_EVENT_LIMIT_PER_S:
        return ProcessPlan(1, f"auto: {expected}, within one process's {PROCESS_EVENT_LIMIT_PER_S:,} events/s",
                           expected_events_per_s)
    wanted = math.ceil(expected_events_per_s / PROCESS_EVENT_LIMIT_PER_S)
    count = max(1, min(wanted, cpus, streams))
    limits = []
    if count < wanted:
        limits.append(f"{wanted} wanted, at most {min(cpus, streams)} ({cpus} CPUs, {streams} streams)")
    return ProcessPlan(count, "; ".join([f"auto: {expected}, above one process's {PROCESS_EVENT_LIMIT_PER_S:,} "
                                         f"events/s", *limits]), expected_events_per_s)
