"""``GET /metrics``: a few Prometheus figures, named the way the imitated engine names them.

vLLM serves Prometheus text at ``/metrics`` (SGLang too, with ``--enable-metrics``); the
suite's soak reads memory and queue figures there at its start and its end, and the
cancellation checks read the running and waiting requests and the KV-cache usage until they
return to idle after clients disconnect. The reference engine serves the same kind of figures,
measured for real from its load accounting (``stream.BatchLoad``): requests generating now,
requests waiting (only ever a request held by an injected wedge: it never queues otherwise),
the share of its KV cache the requests it holds occupy, and its process's resident memory; with
its prefix cache (``prefix_cache.py``), the counters of prompt tokens looked up and found cached
(vLLM's ``vllm:prefix_cache_queries``/``vllm:prefix_cache_hits``, SGLang's ``sglang:prompt_tokens``
and ``sglang:cached_tokens``); and, imitating vLLM with a speculative config, the
speculative-decoding counters of draft steps, draft tokens and accepted tokens (``spec_decode.py``;
vLLM's ``vllm/v1/spec_decode/metrics.py``). Prometheus serves a counter with ``_total`` appended.
SGLang serves only gauges of its last batch for speculative decoding (``sglang:spec_accept_rate``):
the reference engine leaves them out in its convention.
Names per convention are data here, as in ``conventions.py``, and match the engines' own
(vLLM's ``vllm/v1/metrics/loggers.py``, SGLang's ``python/sglang/srt/metrics/collector.py``).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from .config import ReferenceEngineConfig
from .prefix_cache import PrefixCache
from .stream import BatchLoad

__all__ = ["METRIC_NAMES", "MetricNames", "metrics_handler", "render_metrics", "resident_memory_bytes"]


@dataclass(frozen=True)
class MetricNames:
    """The gauges' names in one engine's convention."""

    running: str
    waiting: str
    # A fraction from 0 to 1, although vLLM's name says "perc".
    kv_cache_usage: str
    # Counters, in tokens: prompt tokens looked up in the prefix cache, and of those found.
    prefix_cache_queries: str
    prefix_cache_hits: str
    # Speculative decoding's counters (drafts, draft tokens, accepted tokens), without _total; () for none.
    spec_decode: tuple[str, ...] = ()


METRIC_NAMES: dict[str, MetricNames] = {
    # vllm/v1/metrics/loggers.py (PrometheusStatLogger): counter_prefix_cache_queries, counter_prefix_cache_hits.
    "vllm": MetricNames("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                        "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                        ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                         "vllm:spec_decode_num_accepted_tokens")),
    # python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector): prompt_tokens_total, cached_tokens_total.
    "sglang": MetricNames("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                          "sglang:prompt_tokens", "sglang:cached_tokens"),
}
_SPEC_HELP = ("Number of spec decoding drafts.", "Number of draft tokens.", "Number of accepted tokens.")


def resident_memory_bytes() -> int:
    """This process's resident set size (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def render_metrics(convention: str, model: str, load: BatchLoad, cache: PrefixCache | None = None) -> str:
    """Prometheus text exposition of the reference engine's figures (the prefix cache's with `cache`)."""
    names = METRIC_NAMES[convention]
    label = f'model_name="{model}"'
    lines = []
    for name, help_text, value in (
        (names.running, "Number of requests generating now.", load.active),
        (names.waiting, "Number of requests waiting to be processed.", load.waiting),
        (names.kv_cache_usage, "KV-cache usage. 1 means 100 percent usage.", load.kv_usage()),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{label}}} {float(value)}"]
    if cache is not None:
        for name, help_text, value in (
            (names.prefix_cache_queries, "Prefix cache queries, in terms of number of queried tokens.",
             cache.counters.queries),
            (names.prefix_cache_hits, "Prefix cache hits, in terms of number of cached tokens.", cache.counters.hits),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name}_total{{{label}}} {float(value)}"]
    if load.spec is not None and names.spec_decode:
        counts = load.spec.served()
        for name, help_text, value in zip(names.spec_decode, _SPEC_HELP,
                                          (counts["drafts"], counts["draft_tokens"], counts["accepted_tokens"])):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                      f'{name}_total{{{label},engine="0"}} {float(value)}']
    lines += [
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        f"process_resident_memory_bytes {float(resident_memory_bytes())}",
    ]
    return "\n".join(lines) + "\n"


def metrics_handler(config: ReferenceEngineConfig, load: BatchLoad,
                    cache: PrefixCache | None = None) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler, given the engine's configuration, its load accounting and its prefix cache (None: it has none),
    not the engine: it is built on them."""

    async def metrics(request: web.Request) -> web.Response:
        body = render_metrics(config.convention, config.model, load, cache)
        return web.Response(text=body, content_type="text/plain", charset="utf-8")

    return metrics
