"""Probe of the prefix cache: the same long prompt sent twice, and what the engine reports of the second.

A deployment that keeps the KV cache of prompts it has seen (vLLM's V1 engine by default, SGLang's
radix cache) says how much of a prompt it found in one of two places: the reply's
``usage.prompt_tokens_details.cached_tokens`` or the hit counter at ``/metrics``
(:mod:`engine_acceptance.wire.prefix_cache`; the engine profile names both). The probe sends a prompt
of a few thousand characters that starts with a nonce, so nothing has cached it before, then sends it
again and reads the report:

* cached tokens on the second request: **served**;
* a report that found nothing on an identical second request: **broken**. An engine whose cache never
  hits looks exactly like one started without prefix caching on purpose (vLLM
  ``--no-enable-prefix-caching``, SGLang ``--disable-radix-cache``, as seed 000 ran both): the evidence
  names ``--not-served prefix_cache``, which states that intent;
* nothing reported anywhere (no cached tokens in usage, no counter): **not served**, in those words.
  Whatever the engine reports, the checks that a cached prefix changes no answer still run (text's).
"""

from __future__ import annotations

import secrets

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, cap, chat_body, readable_reply
from engine_acceptance.capabilities.registry import stated_intent
from engine_acceptance.wire.prefix_cache import cache_report, read_cache_counters

__all__ = ["PROBE_PREFIX_LINES", "probe_prefix_cache", "unique_prefix"]

# About 4,000 characters: a thousand tokens of a BPE tokenizer, many blocks of any engine's cache (vLLM 16
# tokens, SGLang 1 to 128), and little prefill.
PROBE_PREFIX_LINES = 48
# The nonce first: the prompt's first block of tokens is then the probe's own too.
_LINE = "{nonce} line {index}: the archive keeps every record of this session in order.\n"


def unique_prefix(nonce: str, lines: int = PROBE_PREFIX_LINES) -> str:
    """A long text that begins with `nonce`, so no cache holds any block of it before it is sent."""
    return "".join(_LINE.format(index=index, nonce=nonce) for index in range(lines))


async def probe_prefix_cache(context: ProbeContext) -> Probe:
    profile = context.engine_profile
    names = {key: profile.metric_names(key) for key in ("prefix_cache_queries", "prefix_cache_hits")}
    metrics = profile.features.get("metrics_endpoint")
    prompt = unique_prefix(secrets.token_hex(8)) + "Reply with the word OK."
    # One output token: only the prompt's lookup matters here.
    body = chat_body([{"role": "user", "content": prompt}], 1)
    first = readable_reply(await context.chat.chat(body, stream=False), "prefix_cache", context.rules)
    if isinstance(first, tuple):
        return Probe("prefix_cache", *first)
    before = await read_cache_counters(context.raw, metrics, names)
    exchange = await context.chat.chat(body, stream=False)
    second = readable_reply(exchange, "prefix_cache", context.rules)
    if isinstance(second, tuple):
        return Probe("prefix_cache", *second)
    after = await read_cache_counters(context.raw, metrics, names)
    report = cache_report(second, profile.cached_tokens_in, before, after)
    if report.cached_tokens is None:
        return Probe("prefix_cache", "not_served", cap(
            f"the engine reports no cached tokens: {report.source}"
            + (f"; {metrics}: {after.describe()}" if metrics else "")))
    said = f"the same prompt sent twice: {report.describe()}"
    if report.cached_tokens > 0:
        return Probe("prefix_cache", "served", cap(said), {"source": report.source, "from_usage": report.from_usage})
    return Probe("prefix_cache", "broken", f"{cap(said, 120)}: a cache that never hits; {stated_intent('prefix_cache')}")
