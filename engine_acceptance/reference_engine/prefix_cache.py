"""The reference engine's prefix cache: blocks of prompt tokens seen before, as vLLM's and SGLang's keep them.

A real engine keeps the KV cache of a prompt's full blocks (vLLM: 16 tokens a block, each
block's key a hash of its tokens and of the block before it) and, when a later prompt starts
with the same blocks, skips their prefill: ``usage.prompt_tokens_details.cached_tokens`` says
how many (vLLM with ``--enable-prompt-tokens-details``, SGLang with ``--enable-cache-report``),
and ``/metrics`` counts the tokens looked up and found (``vllm:prefix_cache_queries`` and
``vllm:prefix_cache_hits``; SGLang's ``sglang:prompt_tokens`` and ``sglang:cached_tokens``).

This one does the same with the reference tokenizer's ids: the blocks of a chat prompt are
looked up, the leading ones found are its cached tokens, and all its full blocks are kept,
least recently used first out. As vLLM, it never counts the prompt's last token as cached (a
reply needs at least one token's prefill). The latency model's prefill then counts only the
tokens not cached, so a warm prompt's first token comes sooner when ``--prefill-ms-per-1k`` is
set. What a cache hit changes in the answer is the defects' business (``prefix-cache-*``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["BLOCK_TOKENS", "CACHE_BLOCKS", "MAX_CACHED_PROMPT_TOKENS", "CacheCounters", "PrefixCache"]

# vLLM's default block size on GPUs.
BLOCK_TOKENS = 16
# Blocks kept: 1M tokens, more than the suite's prompts that share a prefix ever hold at once.
CACHE_BLOCKS = 65536
# Longer prompts (the recall checks' haystacks) are neither looked up nor kept: hashing a million ids
# per request would cost the recall checks seconds, and no check sends such a prompt twice to be warm.
MAX_CACHED_PROMPT_TOKENS = 65536


@dataclass
class CacheCounters:
    """What ``/metrics`` reports: prompt tokens looked up, and of those found cached (monotonic counters)."""

    queries: int = 0
    hits: int = 0


@dataclass
class PrefixCache:
    """Full blocks of prompt token ids, keyed by a hash chained over the blocks before them."""

    capacity_blocks: int = CACHE_BLOCKS
    counters: CacheCounters = field(default_factory=CacheCounters)
    _blocks: OrderedDict[bytes, None] = field(default_factory=OrderedDict, repr=False)
    # Large prompts are prepared in worker threads: one lock for the blocks and the counters.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self, ids: Sequence[int]) -> int:
        """Look the prompt up and keep its blocks; the tokens found cached (a whole number of blocks)."""
        if len(ids) > MAX_CACHED_PROMPT_TOKENS:
            return 0
        keys = _block_keys(ids)
        with self._lock:
            cached_blocks = 0
            for key in keys:
                if key not in self._blocks:
                    break
                cached_blocks += 1
            for key in keys:
                self._blocks[key] = None
                self._blocks.move_to_end(key)
            while len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        return cached_blocks * BLOCK_TOKENS

    def count(self, prompt_tokens: int, cached_tokens: int) -> None:
        """Add one request to the counters ``/metrics`` serves (what was reported, not what was found)."""
        with self._lock:
            self.counters.queries += prompt_tokens
            self.counters.hits += cached_tokens


def _block_keys(ids: Sequence[int]) -> list[bytes]:
    """One key per full block of the prompt but its last token, each chained to the key before it."""
    usable = len(ids) - 1
    keys: list[bytes] = []
    parent = b""
    for start in range(0, usable - usable % BLOCK_TOKENS, BLOCK_TOKENS):
        block = ",".join(map(str, ids[start:start + BLOCK_TOKENS])).encode("ascii")
        parent = hashlib.blake2b(parent + b"|" + block, digest_size=16).digest()
        keys.append(parent)
    return keys
