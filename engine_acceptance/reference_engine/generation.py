"""Turning an answer into generated tokens: the output budget, finish reason and counts.

A real engine generates `<think>` reasoning `</think>` answer `<eos>` token by token,
stops at EOS or at `max_tokens`, and a reasoning parser splits the text again. This
module does the same with the reference tokenizer, so `completion_tokens`, the
`length` finish reason and a reply cut inside its reasoning all behave like a real
engine's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .tokenizer import ReferenceTokenizer

__all__ = [
    "COMPLETION_FILLER",
    "COMPLETION_NATURAL_TEXT",
    "Generation",
    "Piece",
    "THINK_CLOSE",
    "THINK_OPEN",
    "ToolCallOut",
    "ToolFragment",
    "generate_chat",
    "generate_completion",
    "run_past_eos",
    "split_pieces",
]

# Public: the reasoning-leak defect writes these markers into content.
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# Continuation used by /v1/completions: the model "stops" after this sentence.
COMPLETION_NATURAL_TEXT = " and the reference engine ends its continuation here."
# Repeated for `ignore_eos`; ASCII, so every character is exactly one token.
COMPLETION_FILLER = " the quick brown fox jumps over the lazy dog"


@dataclass(frozen=True)
class ToolCallOut:
    """One tool call the model made, as a tool parser hands it over."""

    id: str
    name: str
    # JSON text, exactly as the engine sends it (a defect may break it).
    arguments: str


@dataclass(frozen=True)
class Generation:
    """One generated reply, already split into reasoning, content and tool calls."""

    reasoning: str | None
    content: str
    finish_reason: str
    completion_tokens: int
    tool_calls: tuple[ToolCallOut, ...] = ()
    # Tokens of the reasoning between its markers (usage.completion_tokens_details.reasoning_tokens).
    reasoning_tokens: int = 0

    def with_content(self, content: str) -> Generation:
        return replace(self, content=content)


def _budget(ids: list[int], max_tokens: int) -> tuple[list[int], str]:
    if len(ids) > max_tokens:
        return ids[:max_tokens], "length"
    return ids, "stop"


def _first_stop(answer: str, stop: Sequence[str]) -> tuple[int, str] | None:
    """Where the earliest stop string begins in `answer`, and which one."""
    hits = [(answer.find(s), s) for s in stop if s and s in answer]
    return min(hits, key=lambda hit: (hit[0], -len(hit[1]))) if hits else None


def generate_chat(
    reasoning: str | None, answer: str, *, max_tokens: int, tokenizer: ReferenceTokenizer,
    stop: Sequence[str] = (), include_stop: bool = False,
) -> Generation:
    """Generate `reasoning` and `answer` within `max_tokens` (EOS counted, like vLLM).

    A stop string in the answer ends generation once it is generated: its tokens count,
    the text is cut before it (after it with `include_stop`, vLLM's include_stop_str_in_output).
    """
    prefix = "" if reasoning is None else f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n"
    hit = _first_stop(answer, stop)
    if hit is None:
        ids = tokenizer.encode(prefix + answer) + [tokenizer.eos_token_id]
    else:
        at, matched = hit
        ids = tokenizer.encode(prefix + answer[: at + len(matched)])
    ids, finish = _budget(ids, max_tokens)
    text = tokenizer.decode(i for i in ids if i != tokenizer.eos_token_id)
    if finish == "length":
        # Cut inside a multi-byte character: vLLM's and SGLang's detokenizers hold an incomplete UTF-8
        # sequence back, so the reply ends before it (never with U+FFFD); the tokens still count.
        text = text.rstrip("\ufffd")
    if hit is not None and finish == "stop" and not include_stop:
        text = text[: -len(hit[1])]
    if reasoning is None:
        return Generation(None, text, finish, len(ids))
    # The reasoning parser's view: everything between the markers is reasoning,
    # and a reply cut before the closing marker has no content at all.
    body = text.removeprefix(THINK_OPEN)
    if THINK_CLOSE in body:
        thought, _, content = body.partition(THINK_CLOSE)
        thought = thought.strip("\n")
        return Generation(thought, content.lstrip("\n"), finish, len(ids),
                          reasoning_tokens=tokenizer.count(thought))
    thought = body.lstrip("\n")
    return Generation(thought, "", finish, len(ids), reasoning_tokens=tokenizer.count(thought))


def generate_completion(
    *, max_tokens: int, ignore_eos: bool, tokenizer: ReferenceTokenizer
) -> Generation:
    """A plain-text continuation: exactly `max_tokens` with `ignore_eos`, else a
    short sentence ending in EOS (cut at `max_tokens`)."""
    if ignore_eos:
        text = "".join(itertools.islice(itertools.cycle(COMPLETION_FILLER), max_tokens))
        return Generation(None, text, "length", tokenizer.count(text))
    ids, finish = _budget(
        tokenizer.encode(COMPLETION_NATURAL_TEXT) + [tokenizer.eos_token_id], max_tokens
    )
    text = tokenizer.decode(i for i in ids if i != tokenizer.eos_token_id)
    return Generation(None, text, finish, len(ids))


def run_past_eos(generation: Generation, max_tokens: int) -> Generation:
    """Chat with `ignore_eos` (vLLM and SGLang take it in chat requests too): the reply does not
    end at EOS but goes on with filler, one token per character, until `max_tokens` ("length")."""
    if generation.tool_calls or generation.finish_reason != "stop":
        return generation
    # The natural reply's count includes its EOS, which is not generated now.
    text_tokens = generation.completion_tokens - 1
    missing = max_tokens - text_tokens
    if missing <= 0:
        return generation
    filler = "".join(itertools.islice(itertools.cycle(COMPLETION_FILLER), missing))
    return replace(generation, content=generation.content + filler, finish_reason="length",
                   completion_tokens=max_tokens)


@dataclass(frozen=True)
class ToolFragment:
    """Which tool call a "tool_call" piece extends; id and name only on its first piece."""

    index: int
    id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Piece:
    """One streamed delta: which field it extends ("reasoning", "content" or
    "tool_call"), its text (for a tool call: a piece of its arguments), and how
    many tokens it stands for (for pacing)."""

    kind: str
    text: str
    tokens: int
    tool: ToolFragment | None = None


def split_pieces(text: str, *, kind: str, tokens_per_piece: int) -> list[Piece]:
    """Cut `text` into stream deltas of about `tokens_per_piece` tokens each.

    Cuts fall between characters, never inside one, like a detokenizer that holds
    back an incomplete UTF-8 sequence. With the byte-level tokenizer a character
    costs its UTF-8 length (the count only paces the stream).
    """
    pieces: list[Piece] = []
    current: list[str] = []
    current_tokens = 0
    for char in text:
        current.append(char)
        current_tokens += len(char.encode("utf-8"))
        if current_tokens >= tokens_per_piece:
            pieces.append(Piece(kind, "".join(current), current_tokens))
            current, current_tokens = [], 0
    if current:
        pieces.append(Piece(kind, "".join(current), current_tokens))
    return pieces
