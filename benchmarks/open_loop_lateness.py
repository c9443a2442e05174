"""Client benchmark: how close to their schedule open-loop sends leave (issue 18).

Not a test (nothing here passes or fails); it prints a Markdown table. Against the
built-in reference engine on this host (TTFT 50 ms, 10 ms per token, 32 tokens, one
token per event, so requests in flight grow with the rate), one open-loop cell per
rate and arrival process, ``--seconds`` of arrivals each: how many sends left more
than 1 ms after their due time, the lateness P50/P99/max, the most requests in
flight, the client's CPU share, and the kernel's steal time during the cell
(``/proc/stat``, all CPUs: time the hypervisor gave this VM's vCPUs to something
else; the late sends follow it). Poisson arrivals (burstiness 1) put some requests
due within microseconds of each other, so their lateness includes the previous
send's own work in the client; even gaps (burstiness inf) show the timer alone.

    python benchmarks/open_loop_lateness.py [--rates 10,50,100,200] [--seconds 5] [--json OUT]
        [--processes auto|N] [--pin]

``--processes`` sends each cell from that many client processes on one schedule and one
clock, as ``--load-processes`` (default 1, the process this runs in).

``--pin`` puts the engine on CPU 0 and this client on CPU 1 (``taskset``), as a deployment
has the engine on its own host: on this 2-vCPU machine the reference engine otherwise
shares the client's cores, and the scheduler preempts the client for it (hundreds of
involuntary switches in a 10 s cell), which is the machine's part of the lateness, not
the client's. One client process only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import time
from typing import Any

from engine_acceptance.load.arrivals import LATE_S, format_rate, parse_rates
from engine_acceptance.load.generator import PromptIds
from engine_acceptance.load.open_loop.cells import RateCell, measure_rate_cell
from engine_acceptance.load.process_plan import parse_load_processes
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import start_reference_engine
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget

INPUT, OUTPUT = 128, 32


def steal_ms() -> int:
    """The kernel's steal time so far, all CPUs, in ms: time the hypervisor ran something else."""
    with open("/proc/stat", encoding="ascii") as stat:
        return 10 * int(stat.readline().split()[8])


async def measure(url: str, rates: tuple[float, ...], seconds: float, processes: int | None
                  ) -> list[dict[str, Any]]:
    target = EngineTarget(url, "reference-model", timeouts=ClientTimeouts(total=600, idle=120))
    prompts = await PromptIds.from_engine(target, "/tokenize", min_tokens=INPUT, seed=1)
    rows, index = [], 0
    for burstiness in (1.0, math.inf):
        for rate in rates:
            cell = RateCell(INPUT, OUTPUT, rate, max(50, round(rate * seconds)), burstiness=burstiness, seed=0,
                            warmup_requests=8)
            stolen = steal_ms()
            result = await measure_rate_cell(target, cell, prompts, ignore_eos=True, first_index=index,
                                             processes=processes)
            stolen = steal_ms() - stolen
            index += cell.warmup_requests + cell.requests
            sends = result.sends
            rows.append({"rate": format_rate(rate), "burstiness": format_rate(burstiness), "requests": cell.requests,
                         "late": sends.late, "lateness_p50_ms": sends.lateness_ms(50),
                         "lateness_p99_ms": sends.lateness_ms(99), "lateness_max_ms": sends.lateness_ms(100),
                         "max_in_flight": sends.max_in_flight, "errors": result.summary.failed,
                         "client_cpu": result.summary.client.get("cpu_fraction", 0.0),
                         "processes": result.processes, "steal_ms": stolen})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,50,100,200", help="Requests per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="Seconds of arrivals per cell (at least 50 requests)")
    parser.add_argument("--json", default=None, help="Also write the rows to this JSON file")
    parser.add_argument("--processes", type=parse_load_processes, default=1, metavar="auto|N",
                        help="Client processes per cell, as --load-processes (default: 1)")
    parser.add_argument("--pin", action="store_true", help="The engine on CPU 0, the client on CPU 1 (one process)")
    args = parser.parse_args()
    if args.pin and (args.processes != 1 or (os.cpu_count() or 1) < 2):
        parser.error("--pin needs --processes 1 and at least 2 CPUs")
    load = os.getloadavg()[0]
    with start_reference_engine(latency=LatencyModel(ttft_ms=50, tpot_ms=10), stream_chunk_tokens=1) as engine:
        if args.pin:
            # -a: every thread of the engine, not only its main one.
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(engine.pid)], check=True, capture_output=True)
            os.sched_setaffinity(0, {1})
        started = time.monotonic()
        rows = asyncio.run(measure(engine.url, parse_rates(args.rates), args.seconds, args.processes))
    print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} CPUs; "
          f"{time.monotonic() - started:.0f} s" + ("; engine pinned to CPU 0, client to CPU 1" if args.pin else "") + "\n")
    print(f"| rate req/s | burstiness | requests | late (> {LATE_S * 1000:g} ms) | lateness P50 / P99 / max ms "
          f"| max in flight | errors | client CPU | client processes | steal ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['rate']} | {row['burstiness']} | {row['requests']} | {row['late']} | "
              f"{row['lateness_p50_ms']:.3f} / {row['lateness_p99_ms']:.3f} / {row['lateness_max_ms']:.3f} | "
              f"{row['max_in_flight']} | {row['errors']} | {row['client_cpu']:.0%} | {row['processes']} | {row['steal_ms']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
