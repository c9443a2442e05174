"""Client benchmark: the machine's own floor for open-loop send timing (issue 18).

Not a test. The open-loop timer (``arrivals.sleep_until``) alone, with no engine and no
I/O, on the schedules ``open_loop_lateness.py`` uses: how late it returns. What this
shows is the machine's part of the lateness (a VM that stalls a process, a CPU that
wakes slowly from idle), so the client's own misses can be told from it.

    python benchmarks/open_loop_timer_floor.py [--spin-ms 2] [--rates 10,50,100] [--seconds 10]

A second part spins on ``time.monotonic()`` for ``--seconds`` and counts the gaps over
1 ms, with the kernel's steal time meanwhile (``/proc/stat``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time

import numpy as np

import engine_acceptance.load.arrivals as arrivals
from engine_acceptance.load.arrivals import arrival_offsets, format_rate, parse_rates


async def timer_cell(rate: float, burstiness: float, seconds: float) -> str:
    offsets = arrival_offsets(max(50, round(rate * seconds)), rate, burstiness=burstiness, seed=0)
    start = time.monotonic() + 0.05
    late: list[float] = []
    cpu = time.process_time()
    for offset in offsets:
        await arrivals.sleep_until(start + offset)
        late.append(time.monotonic() - (start + offset))
        await asyncio.sleep(0)
    ms = np.array(late) * 1000.0
    busy = (time.process_time() - cpu) / max(1e-9, time.monotonic() - start)
    return (f"| {format_rate(rate)} | {format_rate(burstiness)} | {len(ms)} | {int((ms > 1).sum())} | "
            f"{np.percentile(ms, 50):.3f} / {np.percentile(ms, 99):.3f} / {ms.max():.3f} | {busy:.0%} |")


def steal_jiffies() -> int:
    with open("/proc/stat", encoding="ascii") as stat:
        return int(stat.readline().split()[8])


def spin(seconds: float) -> str:
    stolen = steal_jiffies()
    end = time.monotonic() + seconds
    previous = time.monotonic()
    gaps: list[float] = []
    while previous < end:
        now = time.monotonic()
        if now - previous > 0.001:
            gaps.append(now - previous)
        previous = now
    return (f"spinning {seconds:g} s: {len(gaps)} gaps over 1 ms (max {1000 * max(gaps, default=0.0):.3f} ms); "
            f"steal time meanwhile {10 * (steal_jiffies() - stolen)} ms (all CPUs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spin-ms", type=float, default=arrivals.SPIN_S * 1000, help="The timer's spin before a deadline")
    parser.add_argument("--rates", default="10,50,100", help="Requests per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="Seconds per cell")
    args = parser.parse_args()
    # The timer reads the module's SPIN_S at each call: set here for this run only.
    arrivals.SPIN_S = args.spin_ms / 1000.0
    print(f"SPIN_S {args.spin_ms:g} ms\n")
    print("| rate req/s | burstiness | sends | late (> 1 ms) | lateness P50 / P99 / max ms | CPU |")
    print("|---|---|---|---|---|---|")
    for burstiness in (1.0, math.inf):
        for rate in parse_rates(args.rates):
            print(asyncio.run(timer_cell(rate, burstiness, args.seconds)))
    print("\n" + spin(min(args.seconds, 5.0)))


if __name__ == "__main__":
    main()
