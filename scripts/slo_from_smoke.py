"""The CI SLO cell's rate and limits, as ratios of the same engine's closed-loop smoke.

CI's real-engine stage gates vLLM on one open-loop SLO cell. Fixed limits (2 s TTFT,
250 ms TPOT at 1 req/s) made the verdict depend on how fast the shared CI machine was
that hour: on a slow hour 1 req/s of 128/32 was past the engine's capacity there, the
queue grew for the whole cell and every request missed (P50 TTFT 13.6 s, 2026-12-03),
with nothing wrong in the engine. So the cell is set from the engine's own closed-loop
figures, measured minutes earlier on the same machine by the acceptance run's smoke
(``throughput.json``, the ``128/32`` cell at the highest concurrency):

- rate: half the requests per second that cell completed (open-loop arrivals at half
  the closed-loop capacity);
- limits: a few times that cell's P99 TTFT, TPOT and E2E.

What it gates is then a ratio: under Poisson arrivals at half its capacity the engine
keeps its latencies within those multiples of its own closed-loop ones (a stalled
scheduler or a queue that never drains fails it), whatever the machine's speed.

Usage: ``slo_from_smoke.py THROUGHPUT_JSON`` prints ``RATE TTFT_MS TPOT_MS E2E_MS`` on
stdout and how they were derived on stderr; it exits non-zero, saying why, when the
file or the cell is missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHAPE = "128/32"
# Half the closed-loop capacity: a Poisson burst then rarely holds more requests than the
# smoke's concurrency, whose figures the limits scale.
RATE_SHARE = 0.5
# Multiples of the smoke cell's P99s. TTFT gets the widest: a request arriving while others
# decode waits for a scheduling step and shares it with their prefills.
MULTIPLES = {"ttft": 5.0, "tpot": 3.0, "e2e": 3.0}


def derive(throughput: dict) -> tuple[float, dict[str, float], str]:
    """Rate (req/s), limits (ms) and the sentence that says where they came from."""
    cells = [cell for cell in throughput.get("cells", []) if cell.get("key", "").startswith(f"{SHAPE}@")]
    if not cells:
        keys = [cell.get("key") for cell in throughput.get("cells", [])]
        raise ValueError(f"no {SHAPE} cell in the smoke's figures (cells: {keys})")
    cell = max(cells, key=lambda c: c["concurrency"])
    metrics = cell["summary"]["metrics"]

    def figure(name: str) -> float:
        value = (metrics.get(name) or {}).get("median")
        if not value:
            raise ValueError(f"cell {cell['key']} has no {name}")
        return float(value)

    capacity = figure("request_per_s")
    rate = round(RATE_SHARE * capacity, 3)
    limits = {name: round(multiple * figure(f"p99_{name}_ms")) for name, multiple in MULTIPLES.items()}
    how = (f"SLO cell from the smoke's {cell['key']} cell (closed loop, {capacity:.3f} req/s, P99 TTFT "
           f"{figure('p99_ttft_ms'):.0f} ms, TPOT {figure('p99_tpot_ms'):.0f} ms, E2E {figure('p99_e2e_ms'):.0f} ms): "
           f"rate {rate:g} req/s ({RATE_SHARE:g} x), limits "
           + ", ".join(f"{name} {limits[name]} ms ({MULTIPLES[name]:g} x)" for name in MULTIPLES))
    return rate, limits, how


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {Path(argv[0]).name} THROUGHPUT_JSON", file=sys.stderr)
        return 2
    path = Path(argv[1])
    try:
        rate, limits, how = derive(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"cannot set the SLO cell from {path}: {error}", file=sys.stderr)
        return 1
    print(how, file=sys.stderr)
    print(rate, *(limits[name] for name in MULTIPLES))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
