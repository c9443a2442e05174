"""Reading what a prefix cache reports: cached tokens in usage, and its counters at ``/metrics``.

An engine that keeps the KV cache of prompts it has seen says so in one of two places, or both:
``usage.prompt_tokens_details.cached_tokens`` of each reply (OpenAI's place; vLLM with
``--enable-prompt-tokens-details``, SGLang with ``--enable-cache-report``), and Prometheus counters
of the prompt tokens looked up and found (vLLM's ``vllm:prefix_cache_queries_total`` and
``vllm:prefix_cache_hits_total``, on at every deployment; SGLang's ``sglang:prompt_tokens_total`` and
``sglang:cached_tokens_total`` with ``--enable-metrics``). The engine profile names both places
(``features.cached_tokens_in``, ``features.metric_names``); this module reads them, and says what
a request found: tokens from usage where the reply carries them, else the growth of the hit counter
around the request (which counts every client's hits: read it where nothing else runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.prometheus import Gauge, parse_prometheus, read_gauge
from engine_acceptance.wire.reassembly import Reply

__all__ = ["CacheCounters", "CacheReport", "cache_report", "read_cache_counters", "usage_cached_tokens",
           "warm_ttft_problem"]

# The counters' keys in an engine profile's metric_names.
QUERIES, HITS = "prefix_cache_queries", "prefix_cache_hits"


def usage_cached_tokens(reply: Reply | None, path: str) -> int | None:
    """The cached tokens the reply's usage reports at `path` (under usage), or None when it reports none."""
    if reply is None or reply.usage is None:
        return None
    return reply.usage.detail(path)


@dataclass(frozen=True)
class CacheCounters:
    """One reading of the prefix cache's counters (each None when the engine serves no such series)."""

    queries: Gauge | None = None
    hits: Gauge | None = None
    # Why the counters could not be read (the endpoint failed); None when they were.
    problem: str | None = None

    @property
    def served(self) -> bool:
        return self.hits is not None

    def describe(self) -> str:
        if self.problem:
            return self.problem
        found = [f"{gauge.name} {gauge.value:g}" for gauge in (self.queries, self.hits) if gauge is not None]
        return ", ".join(found) or "no prefix-cache counter"


async def read_cache_counters(client: RawStreamingClient, path: str | None,
                              names: Mapping[str, Sequence[str]]) -> CacheCounters:
    """The counters `names` lists (``prefix_cache_queries``, ``prefix_cache_hits`` -> candidate names) at `path`."""
    if path is None or not any(names.get(key) for key in (QUERIES, HITS)):
        return CacheCounters()
    exchange = await client.get(path)
    if exchange.error_kind is not None or exchange.status != 200:
        return CacheCounters(problem=f"GET {path}: {exchange.describe_failure()}")
    text = exchange.body if isinstance(exchange.body, str) else exchange.raw.decode("utf-8", "replace")
    series = parse_prometheus(text)
    return CacheCounters(queries=read_gauge(series, names.get(QUERIES, ())),
                         hits=read_gauge(series, names.get(HITS, ())))


@dataclass(frozen=True)
class CacheReport:
    """What the engine reported of one request's prefix-cache lookup, and where."""

    # Tokens found cached, or None when the engine reported nothing the suite can read.
    cached_tokens: int | None
    # The usage path the count came from, the hit counter whose growth it is, or why there is none.
    source: str
    # Whether the count is the reply's own (usage), not a counter's growth around the request.
    from_usage: bool = False
    # The prompt's tokens (usage.prompt_tokens), to say what share was cached.
    prompt_tokens: int | None = None

    def describe(self) -> str:
        if self.cached_tokens is None:
            return f"no cached tokens reported ({self.source})"
        share = f" of {self.prompt_tokens} prompt tokens" if self.prompt_tokens else ""
        if self.from_usage:
            return f"usage.{self.source} {self.cached_tokens}{share}"
        return f"{self.source} grew by {self.cached_tokens}{share}"


def cache_report(reply: Reply | None, usage_path: str, before: CacheCounters, after: CacheCounters) -> CacheReport:
    """What the engine reported of the request between two counter readings: usage first, else the hit counter."""
    prompt = reply.usage.prompt_tokens if reply is not None and reply.usage is not None else None
    from_usage = usage_cached_tokens(reply, usage_path)
    if from_usage is not None:
        return CacheReport(from_usage, usage_path, from_usage=True, prompt_tokens=prompt)
    if before.hits is not None and after.hits is not None:
        return CacheReport(int(after.hits.value - before.hits.value), after.hits.name, prompt_tokens=prompt)
    reason = before.problem or after.problem or f"usage has no {usage_path}, and no prefix-cache hit counter"
    return CacheReport(None, reason, prompt_tokens=prompt)


def warm_ttft_problem(cold_ms: float, warm_ms: float, ratio_max: float | None) -> str | None:
    """The stated gate on time to first token with the prefix cached: None when it holds or no limit is stated.

    `ratio_max` is the model profile's ``prefix_cache.warm_ttft_ratio_max``: the warm median may be at
    most that fraction of the cold one. Unstated, the figures are reported and nothing is gated.
    """
    if ratio_max is None or cold_ms <= 0:
        return None
    ratio = warm_ms / cold_ms
    if ratio <= ratio_max:
        return None
    return (f"time to first token with the prefix cached is {warm_ms:.1f} ms, {ratio:.2f} of the {cold_ms:.1f} ms "
            f"without it: above the model profile's prefix_cache.warm_ttft_ratio_max {ratio_max}")
