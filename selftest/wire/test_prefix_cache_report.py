"""Self-tests of reading a prefix cache's report (engine_acceptance/wire/prefix_cache.py) and of the reply
details it reads (Usage.detail), on crafted replies and counter readings: usage first, the hit counter's
growth where usage says nothing, nothing when neither exists; and the stated cold/warm TTFT gate."""

from __future__ import annotations

from engine_acceptance.wire.prefix_cache import CacheCounters, cache_report, warm_ttft_problem
from engine_acceptance.wire.prometheus import Gauge
from engine_acceptance.wire.reassembly import REASONING_TOKENS_PATHS, reply_from_body

PATH = "prompt_tokens_details.cached_tokens"


def _reply(usage: dict) -> object:
    return reply_from_body({"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"},
                                         "finish_reason": "stop"}], "usage": usage})


def _hits(value: float) -> CacheCounters:
    return CacheCounters(queries=Gauge("vllm:prefix_cache_queries_total", value * 2, 1),
                         hits=Gauge("vllm:prefix_cache_hits_total", value, 1))


def test_usage_details_are_read_by_dotted_path_and_only_as_integers() -> None:
    reply = _reply({"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11,
                    "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 0}})
    assert reply.usage.detail(PATH) == 8
    assert reply.usage.first_detail(REASONING_TOKENS_PATHS) == (0, "completion_tokens_details.reasoning_tokens")
    assert reply.usage.detail("prompt_tokens_details.missing") is None
    assert _reply({"prompt_tokens": 1, "prompt_tokens_details": None}).usage.detail(PATH) is None
    assert _reply({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": True}}).usage.detail(PATH) is None


def test_cached_tokens_in_usage_come_first() -> None:
    reply = _reply({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 96}})
    report = cache_report(reply, PATH, _hits(0), _hits(5))
    assert (report.cached_tokens, report.from_usage) == (96, True)
    assert report.describe() == "usage.prompt_tokens_details.cached_tokens 96 of 100 prompt tokens"


def test_without_usage_details_the_hit_counter_growth_is_the_report() -> None:
    # vLLM without --enable-prompt-tokens-details: prompt_tokens_details is null, the counters are at /metrics.
    reply = _reply({"prompt_tokens": 100, "prompt_tokens_details": None})
    report = cache_report(reply, PATH, _hits(1000), _hits(1096))
    assert (report.cached_tokens, report.from_usage) == (96, False)
    assert report.describe() == "vllm:prefix_cache_hits_total grew by 96 of 100 prompt tokens"


def test_nothing_reported_anywhere_says_so() -> None:
    report = cache_report(_reply({"prompt_tokens": 100}), PATH, CacheCounters(), CacheCounters())
    assert report.cached_tokens is None
    assert "usage has no prompt_tokens_details.cached_tokens, and no prefix-cache hit counter" in report.describe()
    failed = CacheCounters(problem="GET /metrics: HTTP 404")
    assert cache_report(_reply({"prompt_tokens": 1}), PATH, failed, failed).source == "GET /metrics: HTTP 404"


def test_the_warm_ttft_gate_holds_only_where_a_limit_is_stated() -> None:
    assert warm_ttft_problem(400.0, 390.0, None) is None
    assert warm_ttft_problem(400.0, 100.0, 0.5) is None
    problem = warm_ttft_problem(400.0, 390.0, 0.5)
    assert problem is not None and "0.97 of the 400.0 ms without it" in problem
    assert "prefix_cache.warm_ttft_ratio_max 0.5" in problem
    assert warm_ttft_problem(0.0, 5.0, 0.5) is None
