"""Counting prompt tokens in the served model's own tokens, locally or on the server.

:class:`TokenCounter` is the suite's one tokenizer interface: code that needs counts
(the haystack builder, the recall and usage-accounting checks) is handed a counter by
its caller and never chooses or imports a tokenizer itself. It only counts, because
that is all its callers need (the load generator's token-id prompts are ids returned by
the engine's ``/tokenize`` or a ``tokenizer.json``). The built-in reference engine is
no exception: its tokenizer reaches the suite as data, a ``tokenizer.json``
(``python -m engine_acceptance.reference_engine --export-tokenizer PATH``, or its
``GET /tokenizer.json``) or its ``/tokenize``, exactly as a real model's would.

Two sources, and every count says which one it came from:

* :class:`LocalTokenCounter`: a ``tokenizer.json`` loaded with the ``tokenizers``
  library (``--tokenizer PATH``). Fast, and needs no engine.
* :class:`ServerTokenCounter`: the engine's ``POST /tokenize`` (vLLM, SGLang; the
  session's ``tokenize_api`` says where, when the engine serves one). It can also count a
  whole conversation as the engine's chat template renders it
  (:meth:`ServerTokenCounter.count_conversation`), which is what ``usage.prompt_tokens``
  must equal.

Long texts are counted as pieces that end with a newline, in bounded batches, so a
million-token prompt never sits in memory as one tokenizer ``Encoding`` (about 200
bytes per token). That relies on the tokenizer not merging across a line end, which
:func:`newline_boundaries_are_additive` checks and the recall checks verify against
the server whenever it can count.

With neither (an OpenAI-compatible server without ``/tokenize`` and no
``--tokenizer``), nothing can count exactly. Then a :class:`TokenEstimate` says how
many tokens a kind of text has per character, calibrated by :func:`calibrate` from
the ``usage.prompt_tokens`` the engine reports for two short requests, and
:class:`CharacterCounter` lets the haystack builder work in characters. The true
length is only known afterwards, from the reply's usage, and every report says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tokenizers import Tokenizer

from engine_acceptance.wire import http
from engine_acceptance.wire.tokenize_api import TokenizeApi
from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.errors import EngineAcceptanceError

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "MAX_CHARS_PER_TOKEN",
    "TEXT_NOT_COUNTED",
    "TextNotCounted",
    "text_not_counted",
    "CharacterCounter",
    "LocalTokenCounter",
    "PromptAccounting",
    "ServerTokenCounter",
    "TokenCountError",
    "TokenCounter",
    "TokenEstimate",
    "calibrate",
    "newline_boundaries_are_additive",
    "uncounted",
    "usage_prompt_tokens",
]

# Characters per encode_batch call: the transient Encodings (about 200 bytes a token)
# stay near 20 MB at a time, and the batch is still large enough to use every core.
LOCAL_BATCH_CHARS = 64 * 1024


def uncounted(no_tokenize: str) -> str:
    """Why nothing counts a prompt exactly, said wherever a length is estimated instead.

    `no_tokenize` is the engine's tokenize endpoint's state in its probe's words, absent or
    broken (``AcceptanceSession.no_tokenize_reason``): one that answered and is broken is
    never called absent.
    """
    return f"{no_tokenize} and no --tokenizer"


class TokenCountError(EngineAcceptanceError):
    """A count could not be made: unreadable tokenizer file, or /tokenize refused."""


class TextNotCounted(TokenCountError):
    """The engine's counts leave the prompt's text out: the chat template or the prompt is broken.

    Raised by :func:`calibrate` when a longer text is counted no more tokens than a shorter
    one, or fewer than one token per :data:`MAX_CHARS_PER_TOKEN` characters: no tokenizer
    makes that of prose, so what the engine counted is not the text (a chat template that
    drops the message renders a handful of tokens whatever the message holds).
    """


# No tokenizer packs more characters than this into its tokens on average over prose (English
# runs about 4, Chinese about 1.5): a text counted sparser than that is not in what was counted.
MAX_CHARS_PER_TOKEN = 16
# The words every such finding starts with: what is wrong, before the figures.
TEXT_NOT_COUNTED = "the chat template or the prompt is broken"


def text_not_counted(count: int, text_tokens: int, *, counted: str, text: str) -> str | None:
    """The problem when ``count`` (usage, or the engine's count of the conversation) holds under half the text.

    A rendered conversation holds its messages' text and adds markers around it, so it counts at
    least the text's tokens; under half of them means the template (or whatever built the prompt)
    left the message out. None when the count is plausible.
    """
    if count * 2 >= text_tokens:
        return None
    return (f"{TEXT_NOT_COUNTED}: {counted} is {count:,} tokens but {text} alone counts {text_tokens:,}: "
            f"the message text is not in what the engine counted")


class TokenCounter(Protocol):
    """Anything that counts tokens of texts (without special tokens): what callers pass in.

    Implemented by :class:`LocalTokenCounter` (a ``tokenizer.json``),
    :class:`ServerTokenCounter` (the engine's ``/tokenize``) and, when nothing can count,
    :class:`CharacterCounter`.
    """

    #: "local" or "server", for the report.
    kind: str
    #: Characters per piece the haystack builder should hand over at once.
    preferred_chunk_chars: int

    def describe(self) -> str: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...

    def count(self, text: str) -> int: ...


class LocalTokenCounter:
    """Counts with a ``tokenizer.json`` through the ``tokenizers`` library."""

    kind = "local"
    preferred_chunk_chars = 8 * 1024

    def __init__(self, tokenizer: Tokenizer, *, source: str) -> None:
        self._tok = tokenizer
        self.source = source

    @classmethod
    def from_file(cls, path: str | Path) -> "LocalTokenCounter":
        path = Path(path)
        if not path.is_file():
            raise TokenCountError(f"{path} is not a file")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises plain Exception for bad JSON
            raise TokenCountError(f"{path} is not a tokenizer.json the tokenizers library can load: {exc}") from exc
        return cls(tokenizer, source=str(path))

    @classmethod
    def from_json(cls, text: str, *, source: str) -> "LocalTokenCounter":
        return cls(Tokenizer.from_str(text), source=source)

    def describe(self) -> str:
        size = self._tok.get_vocab_size(with_added_tokens=True)
        return f"local tokenizer.json {self.source} ({size} tokens in its vocabulary)"

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        counts: list[int] = []
        batch: list[str] = []
        size = 0
        for text in texts:
            batch.append(text)
            size += len(text)
            if size >= LOCAL_BATCH_CHARS:
                counts += self._count_batch(batch)
                batch, size = [], 0
        if batch:
            counts += self._count_batch(batch)
        return counts

    def _count_batch(self, batch: list[str]) -> list[int]:
        # Special tokens (a BOS) belong to the chat template, not to the text.
        return [len(encoding.ids) for encoding in self._tok.encode_batch_fast(batch, add_special_tokens=False)]


class ServerTokenCounter:
    """Counts with the engine's tokenize endpoint (synchronous HTTP, :func:`~engine_acceptance.wire.http.run_sync`).

    ``api`` says the route and the body it takes (:class:`~engine_acceptance.wire.tokenize_api.TokenizeApi`:
    vLLM's ``{"prompt"}`` or llama-server's ``{"content"}``); a bare path means vLLM's shape. It holds
    no connection between calls: each call opens a session, sends its requests one after another,
    each on a connection of its own, and closes it.
    """

    kind = "server"
    # Each piece is one HTTP request: bigger pieces, fewer round trips.
    preferred_chunk_chars = 64 * 1024

    def __init__(self, target: EngineTarget, api: TokenizeApi | str) -> None:
        self.target = target
        self.api = api if isinstance(api, TokenizeApi) else TokenizeApi(api)
        self.endpoint = self.api.endpoint

    def describe(self) -> str:
        return f"server POST {self.endpoint} at {self.target.base_url}"

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return self._post_all([(self.endpoint, self.api.text_request(self.target.model, text)) for text in texts])

    def count_completion_prompt(self, text: str) -> int:
        """Tokens of a ``/v1/completions`` prompt as that route counts it (special tokens added, a BOS)."""
        return self._post_all([(self.endpoint, self.api.completions_request(self.target.model, text))])[0]

    def count_conversation(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                           tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Tokens of the conversation as the engine's chat template renders it for a reply.

        `tools`: the tools the chat request offers, which the template renders too (vLLM's
        TokenizeChatRequest takes them, as the chat request does).
        """
        return self._post_all([self.api.conversation_request(self.target.model, messages, tools=tools,
                                                             add_generation_prompt=add_generation_prompt)])[0]

    def _post_all(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> list[int]:
        """The count of each (path, body), in order, from requests sent one after another on one loop."""
        if not requests:
            return []
        base = self.target.base_url.rstrip("/")

        async def send() -> list[int]:
            async with _session(self.target) as client:
                # No redirect followed: aiohttp would send a redirected POST on as a GET.
                return [self._count_in(path, await http.fetch(client, "POST", base + path, json_body=body,
                                                              follow_redirects=False))
                        for path, body in requests]

        return http.run_sync(send)

    @staticmethod
    def _count_in(path: str, answer: http.Answer) -> int:
        if answer.status is None:
            raise TokenCountError(f"POST {path} failed: {answer.error}")
        if answer.status != 200:
            raise TokenCountError(f"POST {path} answered HTTP {answer.status}: {answer.text()[:300]}")
        try:
            data = json.loads(answer.body)
        except ValueError as exc:
            raise TokenCountError(f"POST {path} answered non-JSON: {answer.text()[:300]}") from exc
        count = TokenizeApi.count_in(data)
        if count is None:
            raise TokenCountError(f"POST {path} answer has no 'count', 'input_tokens' or 'tokens': "
                                  f"{answer.text()[:300]}")
        return count


def _session(target: EngineTarget) -> aiohttp.ClientSession:
    """The target's key; connecting bounded by the connect timeout and each read by the total (httpx's
    ``Timeout(total, connect=connect)``, which these requests had before); proxies from the environment."""
    timeouts = target.timeouts
    return http.session(timeout=http.per_wait_timeout(connect=timeouts.connect, read=timeouts.total),
                        headers=target.auth_headers(), proxies_from_environment=True)


def newline_boundaries_are_additive(counter: TokenCounter, lines: Sequence[str]) -> tuple[bool, str]:
    """Whether counting these newline-ended pieces apart gives the count of their join.

    The haystack builder counts a long prompt piece by piece; this is the property it
    relies on, checked on a sample for a tokenizer the suite has not seen before.
    """
    apart = sum(counter.count_many(lines))
    whole = counter.count("".join(lines))
    if apart == whole:
        return True, f"{len(lines)} pieces: {whole} tokens together and apart"
    return False, f"{len(lines)} pieces: {whole} tokens together but {apart} counted apart"


@dataclass(frozen=True)
class PromptAccounting:
    """One prompt counted three ways: its text, the rendered conversation, and the server's usage.

    The chat template adds tokens (role markers, a BOS), so the text count is not
    what ``usage.prompt_tokens`` says. The engine's ``/tokenize`` with ``messages``
    renders the conversation the same way the chat endpoint does, and must agree with
    usage within ``tolerance``. Without it, usage minus the text count is the
    template's overhead and must lie in ``[0, template_tokens_max]``.
    """

    text_tokens: int
    text_counted_with: str
    usage_prompt_tokens: int | None
    tolerance: int
    template_tokens_max: int
    # The engine's count of the text, when the text was counted locally and the engine can count.
    server_text_tokens: int | None = None
    # The engine's count of the rendered conversation, when it has a tokenize endpoint.
    conversation_tokens: int | None = None

    def _text_left_out(self) -> list[str]:
        """The counts that hold under half of the text's tokens (the template or the prompt dropped it)."""
        text = f"the message text ({self.text_counted_with})"
        found = []
        if self.usage_prompt_tokens is not None:
            found.append(text_not_counted(self.usage_prompt_tokens, self.text_tokens, counted="usage.prompt_tokens",
                                          text=text))
        if self.conversation_tokens is not None and self.conversation_tokens != self.usage_prompt_tokens:
            found.append(text_not_counted(self.conversation_tokens, self.text_tokens,
                                          counted="the engine's own count of the conversation", text=text))
        return [problem for problem in found if problem]

    @property
    def difference(self) -> int | None:
        """usage.prompt_tokens minus the count it is compared with."""
        if self.usage_prompt_tokens is None:
            return None
        reference = self.conversation_tokens if self.conversation_tokens is not None else self.text_tokens
        return self.usage_prompt_tokens - reference

    def problems(self) -> list[str]:
        problems = []
        if self.server_text_tokens is not None and self.server_text_tokens != self.text_tokens:
            problems.append(
                f"the local tokenizer counts {self.text_tokens} tokens in the message text but the engine's "
                f"/tokenize counts {self.server_text_tokens} ({self.server_text_tokens - self.text_tokens:+d}): "
                f"--tokenizer is not the served model's tokenizer")
        usage, difference = self.usage_prompt_tokens, self.difference
        left_out = self._text_left_out()
        problems += left_out
        if usage is None or difference is None:
            problems.append("the reply has no usage.prompt_tokens to compare")
        elif self.conversation_tokens is not None:
            if abs(difference) > self.tolerance:
                problems.append(
                    f"usage.prompt_tokens is {usage} but the engine's own /tokenize counts {self.conversation_tokens} "
                    f"for the same conversation: {difference:+d} tokens (tolerance {self.tolerance})")
        elif not left_out and not 0 <= difference <= self.template_tokens_max:
            problems.append(
                f"usage.prompt_tokens is {usage} and the message text counts {self.text_tokens}: the chat template "
                f"would add {difference:+d} tokens, outside the declared 0..{self.template_tokens_max}")
        return problems

    def describe(self) -> str:
        parts = [f"text {self.text_tokens:,} ({self.text_counted_with})"]
        if self.server_text_tokens is not None:
            parts.append(f"text by the engine {self.server_text_tokens:,}")
        if self.conversation_tokens is not None:
            parts.append(f"conversation by the engine {self.conversation_tokens:,} "
                         f"(template {self.conversation_tokens - self.text_tokens:+,d})")
        usage = "none" if self.usage_prompt_tokens is None else f"{self.usage_prompt_tokens:,}"
        parts.append(f"usage.prompt_tokens {usage}")
        if self.difference is not None:
            limit = (f"tolerance {self.tolerance}" if self.conversation_tokens is not None
                     else f"template allowance 0..{self.template_tokens_max}")
            parts.append(f"difference {self.difference:+d} ({limit})")
        return "; ".join(parts)

    def summary(self) -> dict[str, object]:
        return {**vars(self), "difference": self.difference, "problems": self.problems()}


# --- estimating, when nothing can count ------------------------------------------------

class CharacterCounter:
    """Counts characters: lets the haystack builder lay out a text to a character budget.

    Used when no tokenizer can count (no ``/tokenize``, no ``--tokenizer``): the budget
    comes from a :class:`TokenEstimate`, and the needles' depths are depths in characters.
    """

    kind = "characters"
    preferred_chunk_chars = 8 * 1024

    def describe(self) -> str:
        return "characters (no tokenizer: the token count is an estimate)"

    def count(self, text: str) -> int:
        return len(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(text) for text in texts]


@dataclass(frozen=True)
class TokenEstimate:
    """Tokens per character of one kind of text, and a count every prompt adds or saves.

    ``tokens_per_char`` is the slope between two samples that differ only in how much
    of the text they hold; ``added_tokens`` the intercept: what the engine counts beyond
    that text's rate (a BOS, a chat template, or parts common to both samples that are
    denser or sparser than the text, hence possibly negative). ``how`` says where the
    figures came from.
    """

    tokens_per_char: float
    added_tokens: int
    calibrated: bool
    how: str

    def chars_for(self, tokens: int) -> int:
        """Characters of text expected to make ``tokens`` tokens at the slope (the intercept not included)."""
        return max(1, round(tokens / self.tokens_per_char))

    def tokens_in(self, chars: int) -> int:
        """Tokens expected in ``chars`` characters of text (the text alone)."""
        return round(chars * self.tokens_per_char)

    def describe(self) -> str:
        return f"{self.rate()}, {self.how}"

    def rate(self) -> str:
        """``0.34 characters per token, intercept -526 tokens``: the figures without their origin."""
        added = f", intercept {self.added_tokens:+,d} tokens" if self.added_tokens else ""
        return f"{1 / self.tokens_per_char:.2f} characters per token{added}"

    def as_dict(self) -> dict[str, object]:
        return {"tokens_per_char": round(self.tokens_per_char, 4), "added_tokens": self.added_tokens,
                "calibrated": self.calibrated, "how": self.how}


def usage_prompt_tokens(target: EngineTarget, path: str, body: Mapping[str, Any]) -> int:
    """POST one non-streamed request under ``/v1`` and return its ``usage.prompt_tokens``."""

    async def send() -> http.Answer:
        async with _session(target) as client:
            # No redirect followed, as in ServerTokenCounter.
            return await http.fetch(client, "POST", target.v1_url + path, json_body=dict(body),
                                    follow_redirects=False)

    answer = http.run_sync(send)
    if answer.status is None:
        raise TokenCountError(f"POST /v1{path} failed: {answer.error}")
    if answer.status != 200:
        raise TokenCountError(f"POST /v1{path} answered HTTP {answer.status}: {answer.text()[:300]}")
    payload = answer.json()
    if not isinstance(payload, dict):
        raise TokenCountError(f"POST /v1{path} answered no JSON object: {answer.text()[:300]}")
    usage = payload.get("usage")
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise TokenCountError(f"POST /v1{path} answered without usage.prompt_tokens: {answer.text()[:300]}")
    return count


def calibrate(target: EngineTarget, *, path: str, make_body: Callable[[str], Mapping[str, Any]],
              samples: Sequence[str], fallback: TokenEstimate) -> TokenEstimate:
    """Tokens per character from the engine's ``usage.prompt_tokens`` for a short and a longer sample.

    The slope between the two is the text's tokens per character, the intercept what
    every prompt adds beyond that rate (the engine's BOS or chat template, and any part
    both samples share). When the engine reports no usage, ``fallback`` is returned with
    the reason in its ``how``. When its counts leave the text out (the longer sample counted
    no more tokens than the shorter, or under one token per :data:`MAX_CHARS_PER_TOKEN`
    characters), that is a finding, not a calibration: :class:`TextNotCounted` says the chat
    template or the prompt is broken, with the figures.
    """
    first, last = samples[0], samples[-1]
    try:
        points = [(len(text), usage_prompt_tokens(target, path, make_body(text))) for text in (first, last)]
    except TokenCountError as exc:
        return TokenEstimate(fallback.tokens_per_char, fallback.added_tokens, False,
                             f"{fallback.how}: the calibration requests gave no count ({exc})")
    (short_chars, short_tokens), (long_chars, long_tokens) = points
    slope = (long_tokens - short_tokens) / (long_chars - short_chars) if long_chars != short_chars else 0.0
    if slope <= 0 or long_tokens * MAX_CHARS_PER_TOKEN < long_chars:
        raise TextNotCounted(
            f"{TEXT_NOT_COUNTED}: the engine's usage.prompt_tokens counted {short_tokens:,} tokens for a "
            f"{short_chars:,}-character text and {long_tokens:,} for {long_chars:,} characters (POST /v1{path}): "
            f"the text is not in what the engine counted (no tokenizer makes fewer than one token of "
            f"{MAX_CHARS_PER_TOKEN} characters of prose, nor fewer tokens of a longer text)")
    added = round(short_tokens - slope * short_chars)
    return TokenEstimate(slope, added, True,
                         f"calibrated with the engine's usage.prompt_tokens: {short_chars:,} characters counted "
                         f"{short_tokens:,} tokens, {long_chars:,} counted {long_tokens:,}")
