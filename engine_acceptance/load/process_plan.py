"""How many client processes measure a cell: ``--load-processes N|auto`` (issue 18).

``auto`` (the default) keeps a cell in one process unless the SSE events it is expected
to bring per second exceed what one process times accurately, then takes enough
processes to stay under that, at most one per CPU. The estimate comes from the cell's
shape alone (the engine's speed is what is being measured, so it cannot be known
before), kept simple on purpose:

- closed loop at concurrency C: ``C x ASSUMED_STREAM_EVENTS_PER_S`` (every stream busy);
- open loop at R requests a second of N output tokens: ``R x N`` (one event per token,
  in steady state whatever the engine's speed), and at an infinite rate, everything in
  flight at once, like a closed loop at concurrency = requests. An open-loop cell also
  spreads when its R sends a second pass :data:`PROCESS_SEND_LIMIT_PER_S`: each send is
  the client's costliest step, and a send due during another one's is late.

A number N asks for N processes whatever the estimate. Either way a cell never gets more
processes than it has streams (a process with nothing to send measures nothing), and the
plan's ``reason`` says how the count came about; it is reported with the cell.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import Any

from engine_acceptance.option_spec import OptionSpec

__all__ = ["ASSUMED_STREAM_EVENTS_PER_S", "OPTIONS", "PROCESS_EVENT_LIMIT_PER_S", "PROCESS_SEND_LIMIT_PER_S",
           "ProcessPlan", "load_processes", "parse_load_processes", "plan_processes"]

# Events a second one client process takes before its median timing error passes 1 ms:
# benchmarks/README.md, "Events per second one client process takes" (about 27,000 on this
# project's 2-vCPU machine, measured 2026-11-29; the engine shared the two cores).
PROCESS_EVENT_LIMIT_PER_S = 27_000
# Open-loop sends a second one client process keeps within 1 ms of their schedule at P99:
# benchmarks/README.md, "Open-loop sends against their schedule" (200 req/s of 128/32, Poisson
# or even, with the engine on its own CPU, measured 2026-12-02; at 400 the client used 82-92%
# of a CPU and its P99 was 2.5-3.7 ms).
PROCESS_SEND_LIMIT_PER_S = 200
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
                   cpus: int | None = None, sends_per_s: float = 0.0) -> ProcessPlan:
    """``asked`` None is auto; ``streams`` caps the count; ``how`` says where the estimate came from.

    ``sends_per_s``: an open-loop cell's request rate (0 for a closed loop).
    """
    cpus = cpus or os.cpu_count() or 1
    streams = max(1, streams)
    expected = f"about {expected_events_per_s:,.0f} events/s expected ({how})"
    if asked is not None:
        count = min(asked, streams)
        capped = f"; asked {asked}, the cell has {streams} stream(s)" if count < asked else ""
        return ProcessPlan(count, f"--load-processes {asked}{capped}; {expected}", expected_events_per_s)
    by_events = math.ceil(expected_events_per_s / PROCESS_EVENT_LIMIT_PER_S)
    by_sends = math.ceil(sends_per_s / PROCESS_SEND_LIMIT_PER_S)
    if max(by_events, by_sends) <= 1:
        sends = f" and {PROCESS_SEND_LIMIT_PER_S:,} sends/s" if sends_per_s else ""
        return ProcessPlan(1, f"auto: {expected}, within one process's {PROCESS_EVENT_LIMIT_PER_S:,} events/s{sends}",
                           expected_events_per_s)
    wanted = max(by_events, by_sends)
    count = max(1, min(wanted, cpus, streams))
    above = [f"above one process's {PROCESS_EVENT_LIMIT_PER_S:,} events/s"] if by_events > 1 else []
    if by_sends > 1:
        above.append(f"{sends_per_s:,.0f} sends/s, above one process's {PROCESS_SEND_LIMIT_PER_S:,}")
    limits = []
    if count < wanted:
        limits.append(f"{wanted} wanted, at most {min(cpus, streams)} ({cpus} CPUs, {streams} streams)")
    return ProcessPlan(count, "; ".join([f"auto: {expected}, " + " and ".join(above), *limits]),
                       expected_events_per_s)


def load_processes(raw: str) -> int | None:
    """``auto`` (None) or a whole number of client processes, at least 1 (the option's type)."""
    try:
        return parse_load_processes(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


OPTIONS = (
    OptionSpec("--load-processes", type=load_processes, default=None, metavar="N|auto",
               help="Client processes that send each throughput and SLO cell, sharing one schedule and one clock; "
                    "auto spreads a cell only when its expected SSE events per second pass what one process times "
                    "accurately (benchmarks/README.md), at most one per CPU (default: auto)"),
)
