"""The reference engine's tokenizer: byte-level, built with the `tokenizers` library.

Every UTF-8 byte is one token (ids 0-255 are the byte values) and a few special
tokens follow. This makes token counts exact and cheap to reason about (an ASCII
prompt of N characters is N tokens), lets a test build a prompt of any length, and
keeps million-token prompts affordable. Because it is a real `tokenizers` object it
can be exported as `tokenizer.json`, and the suite counting locally with that file
gets the same numbers as the server.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

__all__ = [
    "BYTE_VOCAB_SIZE",
    "EOS_TOKEN",
    "SPECIAL_TOKENS",
    "ReferenceTokenizer",
    "get_tokenizer",
]

BYTE_VOCAB_SIZE = 256
EOS_TOKEN = "<|endoftext|>"
# Appended after the 256 byte tokens, in this order; new ones go at the end so
# existing ids never move.
SPECIAL_TOKENS: tuple[str, ...] = (
    EOS_TOKEN,
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<think>",
    "</think>",
    "<|image|>",
    "<|video|>",
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by ByteLevel."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars)}


def _build() -> Tokenizer:
    byte_chars = _bytes_to_unicode()
    # id == byte value, so a token-id prompt is just bytes and vice versa.
    vocab = {byte_chars[byte]: byte for byte in range(256)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # use_regex=False: no word splitting is needed when there are no merges, and it
    # keeps encoding linear on very long prompts.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return tokenizer


class ReferenceTokenizer:
    """Encode, decode and count tokens exactly as the reference engine does."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self._tok = tokenizer if tokenizer is not None else _build()
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)
        self.eos_token_id: int = self.token_to_id(EOS_TOKEN)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; special-token strings in it become their single ids."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def count(self, text: str) -> int:
        """len(encode(text)), without encoding: one token per UTF-8 byte, one per special token.

        Exact because there are no merges and no special token contains another; it keeps
        refusing a prompt of millions of bytes (longer than the context) a matter of milliseconds.
        """
        return len(text.encode("utf-8")) - sum(text.count(token) * (len(token.encode("utf-8")) - 1)
                                               for token in SPECIAL_TOKENS)

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """Text of `ids`; an incomplete UTF-8 sequence decodes to U+FFFD."""
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int:
        token_id = self._tok.token_to_id(token)
        if token_id is None:
            raise KeyError(token)
        return token_id

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary string of one id (ByteLevel characters for byte tokens)."""
        token = self._tok.id_to_token(token_id)
        if token is None:
            raise KeyError(token_id)
        return token

    def invalid_ids(self, ids: Sequence[int]) -> list[int]:
        """Ids outside the vocabulary; a request containing any is rejected."""
        return [i for i in ids if not 0 <= i < self.vocab_size]

    def to_json(self) -> str:
        """The `tokenizer.json` content, loadable with `tokenizers.Tokenizer.from_str`."""
        return self._tok.to_str()


@functools.lru_cache(maxsize=1)
def get_tokenizer() -> ReferenceTokenizer:
    """The process-wide tokenizer (building it is cheap, but there is only one)."""
    return ReferenceTokenizer()
