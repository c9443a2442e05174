"""Throughput metrics as TEST-PLAN §7 and vLLM's ``vllm bench serve`` define them.

Per request (times from the moment the request was handed to the HTTP client):

- TTFT: to the first event with non-empty output (TEST-PLAN; vLLM takes the first
  event carrying a choice, the same thing on engines that never send an empty one).
- E2E: to the last event carrying a choice (vLLM's ``latency``).
- ITL: the gaps between consecutive choice events from the first output on, so
  ``e2e - ttft == sum(itl)`` holds exactly, as in vLLM.
- TPOT: ``(e2e - ttft) / (n - 1)`` with ``n = usage.completion_tokens``; when the
  engine sent no usage the number of choice events is used and the request says so.

A reasoning model's output in two parts (chat only: ``/v1/completions`` has no reasoning
field), beside TTFT, which stays the first output of any kind:

- first reasoning token: to the first event carrying reasoning text; first content token:
  to the first event carrying content text (the answer), tool calls being neither;
- reasoning tokens: what usage reports (:data:`~engine_acceptance.wire.reassembly.REASONING_TOKENS_PATHS`,
  the path kept as the source), else counted, one token per event carrying reasoning, and
  said so (``events``): exact only for an engine that streams one token per event, which is
  why each request keeps its output events beside ``usage.completion_tokens``;
- content tokens: the output tokens less the reasoning tokens (the answer, tool calls, markers);
- cached prompt tokens: ``usage.prompt_tokens_details.cached_tokens``; None (not zero) when
  the engine reports none.

Per round: P50/P95/P99 of each latency by linear interpolation (numpy's default method),
output tok/s = successful output tokens / round wall time, the mean tokens per request, the
share of prompt tokens served from the cache, the speculative-decoding acceptance (the
engine's counters around the round, when given), errors by kind. Per cell: for each metric
the median of the rounds' values and their min-max; the rounds' requests are never pooled
into one percentile.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from engine_acceptance.reporting.results import Spread
from engine_acceptance.wire.reassembly import REASONING_TOKENS_PATHS, Reply

__all__ = [
    "CellSummary",
    "HIGHER_IS_BETTER",
    "LATENCY_METRICS",
    "METRIC_UNITS",
    "PERCENTILES",
    "PERCENTILE_METHOD",
    "REASONING_FROM_EVENTS",
    "RequestRecord",
    "RoundSummary",
    "SPEC_DECODE_ACCEPTANCE",
    "percentile",
    "record_request",
    "request_samples",
    "summarize_cell",
    "summarize_round",
    "with_spec_decode",
]

PERCENTILES = (50, 95, 99)
PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy.percentile default, as vLLM)"
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
# The first reasoning and the first content token (chat): latencies like TTFT, per request.
SPLIT_LATENCIES = ("first_reasoning", "first_content")
# Tokens per request, by kind (the mean of a round's successful requests).
TOKEN_COUNTS = ("reasoning_tokens", "content_tokens", "cached_tokens")
# A round's speculative-decoding acceptance: accepted / draft tokens, from the engine's counters.
SPEC_DECODE_ACCEPTANCE = "spec_decode_acceptance"
# The share of the prompt tokens the engine served from its prefix cache (requests that reported it).
PROMPT_CACHED_SHARE = "prompt_cached_share"
# A request's reasoning tokens counted from the stream, the engine reporting none in usage.
REASONING_FROM_EVENTS = "events"

# Every figure a round reports, with its unit; higher_is_better decides how a
# baseline comparison reads a change.
METRIC_UNITS: dict[str, str] = {
    "output_tok_s": "tok/s",
    "request_per_s": "req/s",
    **{f"p{p}_{name}_ms": "ms" for name in (*LATENCY_METRICS, *SPLIT_LATENCIES) for p in PERCENTILES},
    **{f"mean_{name}_ms": "ms" for name in (*LATENCY_METRICS, *SPLIT_LATENCIES)},
    **{f"mean_{name}": "tok" for name in TOKEN_COUNTS},
    PROMPT_CACHED_SHARE: "share",
    SPEC_DECODE_ACCEPTANCE: "share",
}
HIGHER_IS_BETTER = frozenset({"output_tok_s", "request_per_s", PROMPT_CACHED_SHARE, SPEC_DECODE_ACCEPTANCE})


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
    # The output's two parts (module docstring): None where the reply had no such part, or on
    # /v1/completions for the reasoning (no reasoning field there).
    first_reasoning_s: float | None = None
    first_content_s: float | None = None
    reasoning_tokens: int | None = None
    # Where reasoning_tokens came from: the usage path the engine reported it at, or "events".
    reasoning_tokens_source: str | None = None
    content_tokens: int | None = None
    # usage.prompt_tokens_details.cached_tokens; None when the engine reported none.
    cached_tokens: int | None = None
    # Events carrying output of any kind, and reasoning: what a counted reasoning figure rests on.
    output_events: int = 0
    reasoning_events: int = 0

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
            "first_reasoning_ms": _ms(self.first_reasoning_s),
            "first_content_ms": _ms(self.first_content_s),
            "reasoning_tokens": self.reasoning_tokens,
            "reasoning_tokens_source": self.reasoning_tokens_source,
            "content_tokens": self.content_tokens,
            "cached_tokens": self.cached_tokens,
            "output_events": self.output_events,
            "reasoning_events": self.reasoning_events,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


# The per-request latencies a run bundle keeps of a cell (run_bundle.cell_entry), in ms. Not the
# inter-token gaps: one per output token, they would make the bundle a hundred times larger.
SAMPLED_LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms", "first_reasoning_ms", "first_content_ms")
# And its token counts per request; the cached tokens with the prompt tokens of the same requests
# (cached_of_prompt_tokens), so a diff can take the share of the prompt served from the cache.
SAMPLED_COUNTS = ("reasoning_tokens", "content_tokens", "cached_tokens", "cached_of_prompt_tokens")


def request_samples(records: Iterable[RequestRecord], *, chat: bool) -> dict[str, list[float]]:
    """Each successful request's latencies (ms) and token counts; a figure no request had is left out.

    TTFT, TPOT and E2E are always there (empty when nothing succeeded), as bundles had them before
    the output was split; the others only where some request has them, so an engine that reports no
    cached tokens leaves no empty list claiming it was measured. The split of the output (first
    reasoning and content token, their tokens) only for ``chat``: on ``/v1/completions`` the first
    content token is TTFT and the content tokens are the output tokens, figures kept already.
    """
    done = [record for record in records if record.ok]
    samples: dict[str, list[float]] = {
        "ttft_ms": [record.ttft_s * 1000.0 for record in done if record.ttft_s is not None],
        "tpot_ms": [record.tpot_s * 1000.0 for record in done if record.tpot_s is not None],
        "e2e_ms": [record.e2e_s * 1000.0 for record in done if record.e2e_s is not None],
    }
    optional = {
        "first_reasoning_ms": [r.first_reasoning_s * 1000.0 for r in done if r.first_reasoning_s is not None],
        "first_content_ms": [r.first_content_s * 1000.0 for r in done if r.first_content_s is not None],
        "reasoning_tokens": [float(r.reasoning_tokens) for r in done if r.reasoning_tokens is not None],
        "content_tokens": [float(r.content_tokens) for r in done if r.content_tokens is not None],
        "cached_tokens": [float(r.cached_tokens) for r in done
                          if r.cached_tokens is not None and r.prompt_tokens is not None],
        "cached_of_prompt_tokens": [float(r.prompt_tokens) for r in done
                                    if r.cached_tokens is not None and r.prompt_tokens is not None],
    }
    split = ("first_reasoning_ms", "first_content_ms", "reasoning_tokens", "content_tokens")
    samples.update({name: values for name, values in optional.items() if values and (chat or name not in split)})
    return samples



def record_request(
    reply: Reply | None,
    *,
    start_s: float,
    status: int | None,
    error_kind: str | None = None,
    error: str | None = None,
    chat: bool = False,
) -> RequestRecord:
    """Turn one streamed completion into its metrics, or into an error of a kind.

    Error kinds: ``timeout``/``connection`` (from the client), ``http_<status>``,
    ``stream`` (a reply whose stream broke the protocol: no ``[DONE]``, bad JSON,
    an error event, no finish reason), ``no_output`` (no event carried text).
    ``chat``: the reply came from ``/v1/chat/completions``, where reasoning has a field of
    its own; a completion's reasoning tokens stay None (there is nothing to split).
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
    reasoning, reasoning_source = _reasoning_tokens(reply, chat)
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
        first_reasoning_s=reply.first_reasoning_time,
        first_content_s=reply.first_content_time,
        reasoning_tokens=reasoning,
        reasoning_tokens_source=reasoning_source,
        content_tokens=max(0, n - (reasoning or 0)),
        cached_tokens=usage.cached_tokens if usage is not None else None,
        output_events=reply.output_events,
        reasoning_events=reply.reasoning_events,
    )


def _reasoning_tokens(reply: Reply, chat: bool) -> tuple[int | None, str | None]:
    """The reasoning's tokens and where they came from: usage, else one per reasoning event (chat only)."""
    if not chat:
        return None, None
    reported = reply.usage.first_detail(REASONING_TOKENS_PATHS) if reply.usage is not None else None
    if reported is not None:
        return reported[0], f"usage.{reported[1]}"
    return reply.reasoning_events, REASONING_FROM_EVENTS


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
    # The engine's speculative-decoding counters' increase over the round (None: not read).
    spec_accepted: int | None = None
    spec_drafted: int | None = None

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
            "spec_decode": (None if self.spec_drafted is None else
                            {"accepted_tokens": self.spec_accepted, "draft_tokens": self.spec_drafted}),
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
        "first_reasoning": [r.first_reasoning_s for r in done if r.first_reasoning_s is not None],
        "first_content": [r.first_content_s for r in done if r.first_content_s is not None],
    }
    metrics: dict[str, float | None] = {
        "output_tok_s": output_tokens / wall_s if wall_s > 0 else None,
        "request_per_s": len(done) / wall_s if wall_s > 0 else None,
    }
    for name, values in samples.items():
        for p in PERCENTILES:
            metrics[f"p{p}_{name}_ms"] = _ms(percentile(values, p))
        metrics[f"mean_{name}_ms"] = _ms(float(np.mean(values))) if values else None
    for name in TOKEN_COUNTS:
        counts = [getattr(r, name) for r in done if getattr(r, name) is not None]
        metrics[f"mean_{name}"] = float(np.mean(counts)) if counts else None
    metrics[PROMPT_CACHED_SHARE] = _cached_share(done)
    metrics[SPEC_DECODE_ACCEPTANCE] = None
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


def _cached_share(records: Sequence[RequestRecord]) -> float | None:
    """Cached prompt tokens over the prompt tokens of the requests that reported both; None: none did."""
    pairs = [(r.cached_tokens, r.prompt_tokens) for r in records
             if r.cached_tokens is not None and r.prompt_tokens is not None]
    prompt = sum(prompt for _, prompt in pairs)
    return sum(cached for cached, _ in pairs) / prompt if prompt else None


def with_spec_decode(summary: RoundSummary, accepted: int, drafted: int) -> RoundSummary:
    """The round with the engine's speculative-decoding counters' increase over it, and its acceptance."""
    metrics = {**summary.metrics, SPEC_DECODE_ACCEPTANCE: accepted / drafted if drafted > 0 else None}
    return dataclasses.replace(summary, metrics=metrics, spec_accepted=accepted, spec_drafted=drafted)


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
    def spec_decode(self) -> tuple[int, int] | None:
        """The speculative-decoding counters' increase over the rounds that read them: (accepted, draft tokens)."""
        read = [r for r in self.rounds if r.spec_drafted is not None]
        if not read:
            return None
        return sum(r.spec_accepted or 0 for r in read), sum(r.spec_drafted or 0 for r in read)

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
