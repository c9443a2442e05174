"""Token log-probabilities of a reply, in the shape vLLM's chat completions return them.

``logprobs: true`` asks for one entry per generated token (``{"token", "logprob", "bytes",
"top_logprobs"}``); ``top_logprobs: k`` fills each entry's ``top_logprobs`` with the k most
likely tokens at that step, most likely first. The reference model is deterministic, so the
generated token is always the most likely one: it heads its own list, and k - 1 other tokens
follow with lower log-probabilities. The figures are made up but consistent (a token's
log-probability depends only on the token), which is all the wire contract needs.

Streamed, each delta carries the entries of the tokens it holds; the finish chunk carries
what is left (the end-of-sequence token), so the entries of a stream add up to
``completion_tokens`` as they do non-streamed.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from .generation import THINK_CLOSE, THINK_OPEN, Generation
from .tokenizer import ReferenceTokenizer

__all__ = ["LogprobSlicer", "logprob_entries"]

# Tokens that stand in for the less likely alternatives of every step.
_ALTERNATIVES = (" the", " a", ",", ".", " and", " of", "\n", " to", " is", " in", " that", " it", " for", " on",
                 " with", " as", " was", " be", " at", " by", " this")


def _logprob(token: str) -> float:
    """A made-up but stable log-probability for the most likely token: in [-0.5, -0.01)."""
    return round(-0.01 - (zlib.crc32(token.encode("utf-8")) % 490) / 1000, 3)


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _step(token: str, top: int) -> dict[str, Any]:
    best = _logprob(token)
    alternatives = [candidate for candidate in _ALTERNATIVES if candidate != token][: max(top - 1, 0)]
    top_list = [_entry(token, best)] if top > 0 else []
    top_list += [_entry(candidate, round(best - 1.0 - rank, 3)) for rank, candidate in enumerate(alternatives)]
    return {**_entry(token, best), "top_logprobs": top_list}


def logprob_entries(generation: Generation, tokenizer: ReferenceTokenizer, top: int) -> list[dict[str, Any]]:
    """One entry per completion token of `generation` (reasoning, content, then EOS when it ended there)."""
    thought = "" if generation.reasoning is None else f"{THINK_OPEN}\n{generation.reasoning}\n{THINK_CLOSE}\n\n"
    tokens = [tokenizer.decode([token_id]) for token_id in tokenizer.encode(thought + generation.content)]
    # Tokens the text no longer shows (a stop string cut off, EOS) still count.
    tokens = tokens[: generation.completion_tokens]
    tokens += [tokenizer.decode([tokenizer.eos_token_id])] * (generation.completion_tokens - len(tokens))
    return [_step(token, top) for token in tokens]


class LogprobSlicer:
    """Hands out a stream's entries in order: so many per delta, the rest with the finish chunk."""

    def __init__(self, entries: Sequence[dict[str, Any]]) -> None:
        self._entries = list(entries)
        self._next = 0

    def take(self, tokens: int) -> list[dict[str, Any]]:
        taken = self._entries[self._next: self._next + tokens]
        self._next += len(taken)
        return taken

    def rest(self) -> list[dict[str, Any]]:
        return self.take(len(self._entries))
