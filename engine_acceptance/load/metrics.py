"""Throughput metrics as TEST-PLAN §7 and vLLM's ``vllm bench serve`` define them.

Per request (times from the moment the request was handed to the HTTP client):

- TTFT: to the first event with non-empty output (TEST-PLAN; vLLM takes the first
  event carrying a choice, the same thing on engines that never send an empty one).
- E2E: to the last event carrying a choice (vLLM's ``latency``).
- ITL: the gaps between consecutive choice events from the first output on, so
  ``e2e - ttft == sum(itl)`` holds exactly, as in vLLM.
- TPOT: ``(e2e - ttft) / (n - 1)`` with ``n = usage.completion_tokens``; when the
  engine sent no usage the number of choice events is used and the request says so.

Per round: P50/P95/P99 of each by linear interpolation (numpy's default method),
output tok/s = successful output tokens / round wall time, errors by kind. Per
cell: for each metric the median of the rounds' values and their min-max; the
rounds' requests are never pooled into one percentile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from engine_acceptance.reporting.results import Spread
from engine_acceptance.wire.reassembly import Reply

__all__ = [
    "CellSummary",
    "HIGHER_IS_BETTER",
    "LATENCY_METRICS",
    "METRIC_UNITS",
    "PERCENTILES",
    "PERCENTILE_METHOD",
    "RequestRecord",
    "RoundSummary",
    "percentile",
    "record_request",
    "summarize_cell",
    "summarize_round",
]

PERCENTILES = (50, 95, 99)
PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy.percentile default, as vLLM)"
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")

# Every figure a round reports, with its unit; higher_is_better decides how a
# baseline comparison reads a change.
METRIC_UNITS: dict[str, str] = {
    "output_tok_s": "tok/s",
    "request_per_s": "req/s",
    **{f"p{p}_{name}_ms": "ms" for name in LATENCY_METRICS for p in PERCENTILES},
    **{f"mean_{name}_ms": "ms" for name in LATENCY_METRICS},
}
HIGHER_IS_BETTER = frozenset({"output_tok_s", "request_per_s"})


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile by linear interpolation; None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


@dataclass(frozen=True)
class RequestRecord:
    """What one measured request did. ``error_kind`` is None for a success."""

    start_s: float
    error_kind: str | None = None
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()
    tpot_s: float | None = None
    output_tokens: int | None = None
    # "usage" (usage.completion_tokens) or "events" (fallback: one token per event).
    output_tokens_source: str | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "error_kind": self.error_kind,
            "error": self.error,
            "ttft_ms": _ms(self.ttft_s),
            "tpot_ms": _ms(self.tpot_s),
            "e2e_ms": _ms(self.e2e_s),
            "itl_count": len(self.itl_s),
            "output_tokens": self.output_tokens,
            "output_tokens_source": self.output_tokens_source,
            "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


# The per-request latencies a run bundle keeps of a cell (run_bundle.cell_entry), in ms. Not the
# inter-token gaps: one per output token, they would make the bundle a hundred times larger.
SAMPLED_LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms")


def samples_ms(records: Iterable[RequestRecord]) -> dict[str, list[float]]:
    """Each successful request's TTFT, TPOT and E2E, in ms."""
    done = [record for record in records if record.ok]
    return {
        "ttft_ms": [record.ttft_s * 1000.0 for record in done if record.ttft_s is not None],
        "tpot_ms": [record.tpot_s * 1000.0 for record in done if record.tpot_s is not None],
        "e2e_ms": [record.e2e_s * 1000.0 for record in done if record.e2e_s is not None],
    }


def record_request(
    reply: Reply | None,
    *,
    start_s: float,
    status: int | None,
    error_kind: str | None = None,
    error: str | None = None,
) -> RequestRecord:
    """Turn one streamed completion into its metrics, or into an error of a kind.

    Error kinds: ``timeout``/``connection`` (from the client), ``http_<status>``,
    ``stream`` (a reply whose stream broke the protocol: no ``[DONE]``, bad JSON,
    an error event, no finish reason), ``no_output`` (no event carried text).
    """
    if error_kind is not None:
        return RequestRecord(start_s, error_kind, error)
    if status is None or not 200 <= status < 300:
        return RequestRecord(start_s, f"http_{status}", error)
    if reply is None:
        return RequestRecord(start_s, "stream", error or "the response was not an event stream")
    if reply.problems:
        return RequestRecord(start_s, "stream", "; ".join(reply.problems), finish_reason=reply.finish_reason)
    ttft = reply.first_output_time
    if ttft is None:
        return RequestRecord(start_s, "no_output", "no event carried output text",
                             finish_reason=reply.finish_reason)
    # Choice events from the first output on; events before it (an empty first
    # chunk) are not part of the decode phase.
    times = [t for t in reply.choice_times if t >= ttft]
    e2e = times[-1]
    itl = tuple(later - earlier for earlier, later in zip(times, times[1:]))
    usage = reply.usage
    if usage is not None and isinstance(usage.completion_tokens, int):
        n, source = usage.completion_tokens, "usage"
    else:
        n, source = len(times), "events"
    prompt_tokens = usage.prompt_tokens if usage is not None and isinstance(usage.prompt_tokens, int) else None
    tpot = (e2e - ttft) / (n - 1) if n > 1 else None
    return RequestRecord(
        start_s=start_s,
        ttft_s=ttft,
        e2e_s=e2e,
        itl_s=itl,
        tpot_s=tpot,
        output_tokens=n,
        output_tokens_source=source,
        prompt_tokens=prompt_tokens,
        finish_reason=reply.finish_reason,
    )


@dataclass(frozen=True)
class RoundSummary:
    """One round's figures: metric name (with unit) -> value; errors by kind."""

    requests: int
    completed: int
    wall_s: float
    output_tokens: int
    errors_by_kind: dict[str, int]
    metrics: dict[str, float | None]
    # Requests whose token count came from counting events, not from usage.
    fallback_counts: int = 0
    client: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.requests - self.completed

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "completed": self.completed,
            "failed": self.failed,
            "wall_s": self.wall_s,
            "output_tokens": self.output_tokens,
            "errors_by_kind": dict(self.errors_by_kind),
            "fallback_output_counts": self.fallback_counts,
            "metrics": dict(self.metrics),
            "client": dict(self.client),
        }


def summarize_round(records: Sequence[RequestRecord], wall_s: float,
                    client: dict[str, Any] | None = None) -> RoundSummary:
    """Percentiles over this round's successful requests, and its throughput."""
    done = [r for r in records if r.ok]
    errors: dict[str, int] = {}
    for record in records:
        if record.error_kind is not None:
            errors[record.error_kind] = errors.get(record.error_kind, 0) + 1
    output_tokens = sum(r.output_tokens or 0 for r in done)
    samples: dict[str, list[float]] = {
        "ttft": [r.ttft_s for r in done if r.ttft_s is not None],
        "tpot": [r.tpot_s for r in done if r.tpot_s is not None],
        "itl": [gap for r in done for gap in r.itl_s],
        "e2e": [r.e2e_s for r in done if r.e2e_s is not None],
    }
    metrics: dict[str, float | None] = {
        "output_tok_s": output_tokens / wall_s if wall_s > 0 else None,
        "request_per_s": len(done) / wall_s if wall_s > 0 else None,
    }
    for name, values in samples.items():
        for p in PERCENTILES:
            metrics[f"p{p}_{name}_ms"] = _ms(percentile(values, p))
        metrics[f"mean_{name}_ms"] = _ms(float(np.mean(values))) if values else None
    return RoundSummary(
        requests=len(records),
        completed=len(done),
        wall_s=wall_s,
        output_tokens=output_tokens,
        errors_by_kind=errors,
        metrics=metrics,
        fallback_counts=sum(1 for r in done if r.output_tokens_source == "events"),
        client=dict(client or {}),
    )


@dataclass(frozen=True)
class CellSummary:
    """One cell (shape at one concurrency): each metric as median [min-max] of rounds."""

    key: str
    rounds: tuple[RoundSummary, ...]
    metrics: dict[str, Spread]

    def median(self, metric: str) -> float | None:
        spread = self.metrics.get(metric)
        return spread.median if spread else None

    @property
    def errors_by_kind(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for summary in self.rounds:
            for kind, count in summary.errors_by_kind.items():
                total[kind] = total.get(kind, 0) + count
        return total

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "metrics": {name: spread.as_dict() for name, spread in self.metrics.items()},
            "errors_by_kind": self.errors_by_kind,
            "rounds": [summary.as_dict() for summary in self.rounds],
        }


def summarize_cell(key: str, rounds: Iterable[RoundSummary]) -> CellSummary:
    """Median of the rounds' values for each metric, never a pooled percentile."""
    rounds = tuple(rounds)
    spreads = {name: Spread.of([summary.metrics.get(name) for summary in rounds]) for name in METRIC_UNITS}
    return CellSummary(key=key, rounds=rounds, metrics=spreads)
