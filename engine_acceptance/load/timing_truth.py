"""Ground truth for the load generator's clock, from the reference engine's own stamps.

Started with ``stamp_events`` (``--stamp-events``), the reference engine puts
``engine_sent_at`` (its ``time.monotonic()`` just before the write) in every event.
On one host that is the same clock the client stamps its reads with, so for each
request the true TTFT, E2E and TPOT (what the engine did, measured from the same
client send time) and each event's delivery-and-stamping delay (the client's own
timing error) can be set beside what the load generator reported. Used by the
accuracy self-test and by ``benchmarks/client_accuracy.py``; not by the suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine_acceptance.load.generator import RawRequest, replay_events

__all__ = ["TrueTiming", "true_timing"]


@dataclass(frozen=True)
class TrueTiming:
    """One request as the engine sent it, in seconds from the client's send time."""

    ttft_s: float
    e2e_s: float
    tpot_s: float | None
    # Client stamp minus engine stamp, per event carrying a choice.
    event_lags_s: tuple[float, ...]


def true_timing(raw: RawRequest, output_tokens: int) -> TrueTiming | None:
    """The engine's timeline of one request; None when its events carry no stamps."""
    first: float | None = None
    last: float | None = None
    lags = []
    for event in replay_events(raw):
        if not event.data or event.is_done:
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            continue
        sent = chunk.get("engine_sent_at")
        choices = chunk.get("choices") or []
        if sent is None or not choices:
            continue
        if event.received_at is not None:
            lags.append(event.received_at - sent)
        if first is None and choices[0].get("text"):
            first = sent
        if first is not None:
            last = sent
    if first is None or last is None:
        return None
    tpot = (last - first) / (output_tokens - 1) if output_tokens > 1 else None
    return TrueTiming(first - raw.start, last - raw.start, tpot, tuple(lags))
