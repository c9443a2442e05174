"""Speculative-decoding acceptance over a round of load, from the engine's own counters.

An engine that drafts tokens with a small model (or its own extra heads) and verifies them
with the served model is fast only while most drafts are accepted; a release that lowers
the acceptance (a new draft model, a changed sampler) loses throughput without any error.
vLLM counts the draft tokens proposed and the tokens accepted as Prometheus counters at
``/metrics`` when a speculative config is set (``vllm/v1/spec_decode/metrics.py``,
``SpecDecodingProm``: ``vllm:spec_decode_num_draft_tokens`` and
``vllm:spec_decode_num_accepted_tokens``, served with ``_total``; its own docs take the
acceptance rate as the ratio of their increases). A round's acceptance is therefore the
accepted tokens' increase over the draft tokens' increase, read just before and just after
the round: outside the timed loop, and over the measured requests only (a cell runs alone on
the engine; its warm-up is before the first read).

The counters' names are the engine profile's (``features.metric_names``:
``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens``), newest first as for the
gauges. SGLang serves only gauges of its last logged batch (``sglang:spec_accept_rate``,
``python/sglang/srt/metrics/collector.py``): a figure of one batch, not of the round, so its
profile names none and the report says the engine reports no acceptance. Why a cell has no
acceptance is kept in words (:attr:`SpecDecodeCounters.unavailable`), never as a zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiohttp

from engine_acceptance.load.metrics import RoundSummary, with_spec_decode
from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.wire.prometheus import parse_prometheus, read_gauge
from engine_acceptance.wire.types import EngineTarget

__all__ = ["COUNTERS", "RoundCounters", "SpecDecodeCounters", "SpecDecodeReading", "spec_decode_counters"]

# The two counters, as the engine profile names them under features.metric_names.
COUNTERS = ("spec_decode_draft_tokens", "spec_decode_accepted_tokens")


@dataclass(frozen=True)
class SpecDecodeReading:
    """The two counters' values at one moment (summed over the engine's series: data-parallel ranks)."""

    draft_tokens: float
    accepted_tokens: float


class SpecDecodeCounters:
    """Reads the engine's speculative-decoding counters; ``unavailable`` says why a read gave nothing."""

    def __init__(self, target: EngineTarget, path: str | None, names: Mapping[str, Sequence[str]], *,
                 profile: str = "the engine profile") -> None:
        self.target = target
        self.path = path
        self.names = {counter: tuple(names.get(counter, ())) for counter in COUNTERS}
        self.unavailable: str | None = None
        if not path:
            self.unavailable = f"{profile} names no metrics_endpoint"
        elif not all(self.names.values()):
            self.unavailable = (f"{profile} names no speculative-decoding counters (features.metric_names "
                                f"{' and '.join(COUNTERS)})")

    async def read(self) -> SpecDecodeReading | None:
        """The counters now; None (and ``unavailable`` set) when they cannot be read."""
        if self.path is None or not all(self.names.values()):
            return None
        url = self.target.base_url.rstrip("/") + self.path
        timeout = aiohttp.ClientTimeout(total=self.target.timeouts.total, sock_connect=self.target.timeouts.connect)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.get(url, headers=self.target.auth_headers()) as response:
                    status, text = response.status, await response.text(errors="replace")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.unavailable = f"GET {self.path} failed: {type(exc).__name__}: {exc}"
            return None
        if status != 200:
            self.unavailable = f"GET {self.path} answered HTTP {status}"
            return None
        series = parse_prometheus(text)
        found = {counter: read_gauge(series, names) for counter, names in self.names.items()}
        missing = [names[0] for counter, names in self.names.items() if found[counter] is None]
        if missing:
            self.unavailable = (f"GET {self.path} serves no {' or '.join(missing)} (no speculative decoding "
                                f"configured)")
            return None
        draft, accepted = found["spec_decode_draft_tokens"], found["spec_decode_accepted_tokens"]
        assert draft is not None and accepted is not None
        self.unavailable = None
        return SpecDecodeReading(draft.value, accepted.value)

    @staticmethod
    def increase(before: SpecDecodeReading | None, after: SpecDecodeReading | None) -> tuple[int, int] | None:
        """(accepted, draft tokens) between two readings; None when either is missing or a counter went back
        (an engine restarted in between: its counters began again from zero)."""
        if before is None or after is None:
            return None
        drafted = after.draft_tokens - before.draft_tokens
        accepted = after.accepted_tokens - before.accepted_tokens
        if drafted < 0 or accepted < 0:
            return None
        return int(round(accepted)), int(round(drafted))


def spec_decode_counters(target: EngineTarget, engine_profile: EngineProfile) -> SpecDecodeCounters:
    """The reader for an engine profile: its metrics endpoint and its counters' names."""
    return SpecDecodeCounters(target, engine_profile.features.get("metrics_endpoint"),
                              {counter: engine_profile.metric_names(counter) for counter in COUNTERS},
                              profile=f"engine profile {engine_profile.name!r}")


class RoundCounters:
    """The counters read around each round of a cell: before its first round, then after every round.

    One read between two rounds serves as the first's end and the next one's start. ``counters``
    None (no reader given) reads nothing and leaves every round as it is.
    """

    def __init__(self, counters: SpecDecodeCounters | None) -> None:
        self.counters = counters
        self._last: SpecDecodeReading | None = None

    @property
    def unavailable(self) -> str | None:
        """Why the rounds have no acceptance (None: they have one, or nothing was asked)."""
        return self.counters.unavailable if self.counters is not None else None

    async def start(self) -> None:
        """Read before a round, unless the end of the previous one was read just now."""
        if self.counters is not None and self._last is None:
            self._last = await self.counters.read()

    async def finish(self, summary: RoundSummary) -> RoundSummary:
        """Read after a round: the round with the counters' increase over it, when both reads succeeded."""
        if self.counters is None:
            return summary
        after = await self.counters.read()
        increase = SpecDecodeCounters.increase(self._last, after)
        if increase is None and self._last is not None and after is not None:
            self.counters.unavailable = "a counter went back during the round (the engine restarted?)"
        self._last = after
        return summary if increase is None else with_spec_decode(summary, *increase)
