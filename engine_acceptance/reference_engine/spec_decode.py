"""Speculative decoding as the reference engine counts it: draft and accepted tokens at a set acceptance.

A speculative engine proposes K draft tokens per step and the served model accepts some of them;
each step yields the accepted drafts and one token of its own. The reference engine drafts
nothing, but it counts as if it did, so that ``/metrics`` serves vLLM's counters
(``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``;
``vllm/v1/spec_decode/metrics.py``) with a known ratio: every output token generated adds
``1 / (1 + A K)`` steps, K draft tokens a step and A K of them accepted, so the accepted over the
draft tokens is A over any stretch of generation (to a token: the counters are served whole).
Defect ``spec-decode-rejects`` lowers A, as a draft model that no longer matches the served one
would: the replies are the same, the suite's load must see the acceptance fall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_ACCEPTANCE", "DRAFT_TOKENS", "SpecDecodeCounts"]

# vLLM's examples draft 3 tokens a step (num_speculative_tokens); 0.8 is a good draft model's acceptance.
DRAFT_TOKENS = 3
DEFAULT_ACCEPTANCE = 0.8


@dataclass
class SpecDecodeCounts:
    """The engine's counters since it started, counted per output token generated."""

    acceptance: float = DEFAULT_ACCEPTANCE
    draft_tokens_per_step: int = DRAFT_TOKENS
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted_tokens: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.acceptance <= 1.0:
            raise ValueError(f"the speculative-decoding acceptance is a share, 0 to 1, got {self.acceptance}")

    def generated(self, tokens: int) -> None:
        """``tokens`` more output tokens: the steps, draft tokens and accepted tokens they took."""
        steps = tokens / (1.0 + self.acceptance * self.draft_tokens_per_step)
        self.drafts += steps
        self.draft_tokens += steps * self.draft_tokens_per_step
        self.accepted_tokens += steps * self.draft_tokens_per_step * self.acceptance

    def served(self) -> dict[str, int]:
        """The counters as ``/metrics`` serves them: whole tokens and steps counted so far."""
        return {"drafts": math.floor(self.drafts), "draft_tokens": math.floor(self.draft_tokens),
                "accepted_tokens": math.floor(self.accepted_tokens)}
