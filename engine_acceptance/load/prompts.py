"""Text prompts of an estimated length, for engines nothing can count tokens for.

The fixed-length load sends prompts of exactly N token ids (:class:`loadgen.PromptIds`),
cut from text the engine's ``/tokenize`` or a ``tokenizer.json`` encoded. Any other
OpenAI-compatible server (no ``/tokenize``, no ``--tokenizer``) still gets the load:
:class:`TextPrompts` cuts the same word corpus, at the same per-request offsets, to the
number of characters expected to make N tokens, and the completions endpoint gets text.

How many characters make a token is calibrated from the engine itself: two short
completions requests (a short and a longer sample of the corpus, ``max_tokens`` 1) and
their ``usage.prompt_tokens`` give the corpus's tokens per character and the tokens the
engine adds to every text prompt (a BOS). Without usage the estimate falls back to one
token per word of the corpus, and says so. Either way the true lengths are read from
each reply's usage afterwards, and the report says they are approximate and by how much
(:func:`engine_acceptance.load.closed_loop.validity.input_tokens_line`).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import ClassVar

from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.load.generator import _WORDS, PromptIds
from engine_acceptance.wire.token_count import TokenCountError, TokenEstimate, calibrate, usage_prompt_tokens

__all__ = ["CALIBRATION_WORDS", "TextPrompts", "recount_prompt_tokens", "word_estimate"]

# Words in the short and the longer calibration sample (the corpus's common English words).
CALIBRATION_WORDS = (32, 256)


def word_estimate() -> TokenEstimate:
    """The uncalibrated guess: one token per word of the corpus (common English words)."""
    chars_per_word = sum(len(word) + 1 for word in _WORDS) / len(_WORDS)
    return TokenEstimate(1 / chars_per_word, 0, False, "uncalibrated: one token per common English word assumed")


@dataclass(frozen=True)
class TextPrompts:
    """Mutually distinct text prompts of an estimated token length, from a corpus of words."""

    words: tuple[str, ...]
    estimate: TokenEstimate
    source: str
    seed: int
    # Why the prompts are text, not token ids: said wherever their length is reported (the tokenize
    # endpoint absent or broken, in its probe's words, and no --tokenizer: wire.token_count.uncounted).
    why: str = "no tokenizer"
    exact: ClassVar[bool] = False
    origin: ClassVar[str] = "text"

    def chars_for(self, length: int) -> int:
        """Characters of prompt text aimed at for ``length`` tokens, counting what the engine adds (a BOS)."""
        return self.estimate.chars_for(max(1, length - max(0, self.estimate.added_tokens)))

    def prompt(self, length: int, index: int) -> str:
        """Words from an offset of its own (wrapping around), ending at the word boundary nearest the aim."""
        want = self.chars_for(length)
        size = len(self.words)
        position = (self.seed + index) % size
        chosen: list[str] = []
        chars = -1  # no space before the first word
        while True:
            word = self.words[position % size]
            longer = chars + 1 + len(word)
            if chosen and longer - want > want - chars:
                break
            chosen.append(word)
            chars = longer
            position += 1
            if chars >= want:
                break
        return " ".join(chosen)

    def describe(self, length: int) -> str:
        return f"text prompts of about {self.chars_for(length):,} characters ({self.estimate.describe()})"

    @classmethod
    def for_engine(cls, target: EngineTarget, *, min_tokens: int, why: str, seed: int | None = None
                   ) -> "TextPrompts":
        """Calibrate on the engine's completions endpoint and return the prompts (synchronous HTTP)."""
        seed = random.randrange(1 << 30) if seed is None else seed
        estimate = word_estimate()
        # A corpus long enough that each prompt holds about min_tokens words or fewer.
        words = tuple(PromptIds.corpus_text(min_tokens + 1024, seed).split())
        # Samples from another seed: they must not warm a prefix cache for the load's prompts.
        samples = [PromptIds.corpus_text(count, seed + 1) for count in CALIBRATION_WORDS]
        estimate = calibrate(target, path="/completions", samples=samples, fallback=estimate,
                             make_body=lambda text: {"model": target.model, "prompt": text, "max_tokens": 1,
                                                     "temperature": 0, "stream": False})
        return cls(words, estimate, f"text cut to an estimated length ({why})", seed % len(words), why)


async def recount_prompt_tokens(target: EngineTarget, prompt: str) -> tuple[int | None, str | None]:
    """The engine's ``usage.prompt_tokens`` for ``prompt`` sent once more (``max_tokens`` 1), or why not."""
    body = {"model": target.model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": False}
    try:
        return await asyncio.to_thread(usage_prompt_tokens, target, "/completions", body), None
    except TokenCountError as exc:
        return None, str(exc)
