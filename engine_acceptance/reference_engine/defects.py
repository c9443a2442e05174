"""The defects the reference engine can inject, each applied in exactly one place.

Every acceptance test must be shown to fail on the defect it exists to catch. The
self-tests start the reference engine with `--inject NAME` and expect the matching
test to fail. `DEFECTS` is the registry (name -> what it breaks); `DefectHooks` is
where each defect takes effect, called by the server at fixed points of a reply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .generation import THINK_CLOSE, THINK_OPEN, Generation, Piece

__all__ = ["DEFECTS", "DefectHooks", "UnknownDefectError", "validate_defects"]

DEFECTS: dict[str, str] = {
    "reasoning-leak": (
        "streamed chat only: reasoning is sent inside content wrapped in <think>...</think>"
        " and the reasoning field stays empty (a parser that judged state from the whole prompt)"
    ),
    "no-done": "streams never send 'data: [DONE]'; the connection closes after the last chunk",
    "bad-usage": "usage.total_tokens = prompt + completion + 1, streamed and not",
    "empty-content": "chat content is '' in every reply, streamed and not; reasoning unaffected",
}


class UnknownDefectError(ValueError):
    """A defect name that is not in the registry."""

    def __init__(self, unknown: Iterable[str]) -> None:
        self.unknown = sorted(unknown)
        super().__init__(
            f"unknown defect(s): {', '.join(self.unknown)}; valid: {', '.join(sorted(DEFECTS))}"
        )


def validate_defects(names: Iterable[str]) -> frozenset[str]:
    """The names as a frozenset; UnknownDefectError if any is not registered."""
    if isinstance(names, str):
        # A lone string would otherwise be split into characters.
        names = (names,)
    chosen = frozenset(names)
    unknown = chosen - DEFECTS.keys()
    if unknown:
        raise UnknownDefectError(unknown)
    return chosen


@dataclass(frozen=True)
class DefectHooks:
    """The active defects, applied where the server hands over each part of a reply."""

    active: frozenset[str] = field(default_factory=frozenset)

    def chat_generation(self, generation: Generation) -> Generation:
        """A chat reply, before it is rendered streamed or not."""
        if "empty-content" in self.active:
            return generation.with_content("")
        return generation

    def usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        """Every usage object, chat and completions, streamed and not."""
        if "bad-usage" in self.active:
            return {**usage, "total_tokens": usage["total_tokens"] + 1}
        return usage

    def chat_stream_pieces(self, pieces: list[Piece]) -> list[Piece]:
        """The deltas of a streamed chat reply, in order."""
        if "reasoning-leak" not in self.active or not any(p.kind == "reasoning" for p in pieces):
            return pieces
        # The buggy parser believes reasoning already ended, so the raw generated
        # text, markers included, flows into content.
        reasoning = [Piece("content", p.text, p.tokens) for p in pieces if p.kind == "reasoning"]
        content = [p for p in pieces if p.kind != "reasoning"]
        return [
            Piece("content", f"{THINK_OPEN}\n", 1),
            *reasoning,
            Piece("content", f"\n{THINK_CLOSE}\n\n", 1),
            *content,
        ]

    def sends_done(self) -> bool:
        """Whether a stream ends with `data: [DONE]`."""
        return "no-done" not in self.active
