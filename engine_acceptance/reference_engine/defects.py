"""The defects the reference engine can inject, each applied in exactly one place.

Every acceptance test must be shown to fail on the defect it exists to catch. The
self-tests start the reference engine with `--inject NAME` and expect the matching
test to fail. `DEFECTS` (`defect_names.py`) is the registry (name -> what it breaks);
`DefectHooks` is where each defect takes effect, called by the server at fixed points of a reply.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import secrets
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .chat_template import HISTORY_REASONING_KEYS, MEDIA_PLACEHOLDERS
from .code_answers import hostile_function
from .defect_names import (FIREWALLED_PATH, MEDIA_DECODE_CRASH, MEDIA_MISMATCH_500, SLOW_FIRST_TOKEN_S,
                           THINKING_ON_FAILURE, THINKING_SWITCH_KWARGS, THINKING_TEMPLATE_CRASH, TOKENIZE_CRASH,
                           TOOL_PARSER_CRASH)
from .generation import THINK_CLOSE, THINK_OPEN, Generation, Piece, ToolCallOut
from .retrieval import corrupt_first_code, drop_middle
from .media_facts import ImageFacts, SeenMedia
from .tokenizer import ReferenceTokenizer

if TYPE_CHECKING:
    from .conversation import ThinkingMode
    from .protocol import ChatRequest, MediaRequestError, RequestError, Sampling
    from .responder import Answer
    from .tools import ToolRequest

# Exit status of a reference engine that "crashed" on corrupt media (media-crash) or an invalid value
# (bad-params-crash).
MEDIA_CRASH_EXIT_CODE = 70
# spec-decode-rejects: the share of the configured speculative-decoding acceptance left.
REJECTED_ACCEPTANCE_SHARE = 0.25

__all__ = ["CONTRACT_PARAMS", "INTERMITTENT_TOOL_CALL_PERIOD", "MEDIA_CRASH_EXIT_CODE", "DefectHooks",
           "decode_each_byte"]

# ignore-thinking-off-1-in-5: every this-many-th identical request is the faulty one.
THINKING_OFF_FAULT_EVERY = 5

# tool-args-intermittent: every this many-th tool call the engine makes is cut (1/33, about 3%).
INTERMITTENT_TOOL_CALL_PERIOD = 33

# The request fields whose invalid values the error-code contract checks (bad-params-500,
# accept-bad-params, error-body-plain act on refusals naming these; media refusals are apart).
CONTRACT_PARAMS = frozenset({"temperature", "top_p", "n", "max_tokens", "max_completion_tokens", "model",
                             "messages", "stop"})


def _turns_thinking_on(kwargs: Mapping[str, Any]) -> bool:
    """Whether a request's chat_template_kwargs turn thinking on with one of the known switches."""
    return (kwargs.get("enable_thinking") is True or kwargs.get("thinking") is True
            or kwargs.get("thinking_mode") in ("enabled", "adaptive"))


def _cut_arguments(call: ToolCallOut) -> ToolCallOut:
    """The call with its arguments cut in the middle: never JSON, since an object's closing brace is gone."""
    return dataclasses.replace(call, arguments=call.arguments[:max(1, len(call.arguments) // 2)])


@dataclass(frozen=True)
class DefectHooks:
    """The active defects, applied where the server hands over each part of a reply."""

    active: frozenset[str] = field(default_factory=frozenset)
    # media-cache-by-size: (width, height) -> the first image of that size the engine saw.
    image_cache: dict[tuple[int, int], ImageFacts] = field(default_factory=dict, compare=False, repr=False)
    # tool-args-intermittent: numbers every tool call the engine returns, 1, 2, ... (next() is atomic
    # under the GIL, so calls prepared in worker threads are counted once each).
    tool_call_counter: Iterator[int] = field(default_factory=lambda: itertools.count(1), compare=False, repr=False)
    # ignore-thinking-off-1-in-5: requests seen per body hash (large bodies are prepared in threads: a lock).
    identical_requests: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    identical_lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def thinking(self, mode: ThinkingMode, body: Mapping[str, Any] | None = None) -> ThinkingMode:
        """The thinking mode the model runs in, after the request (`body`) asked for `mode`."""
        if "thinking-on-500" in self.active:
            # Every request that turns thinking on was answered 500 (chat_request): the rest do not reason.
            return dataclasses.replace(mode, enabled=False)
        if "ignore-thinking-off" in self.active and not mode.enabled:
            return dataclasses.replace(mode, enabled=True)
        if "ignore-thinking-off-1-in-5" in self.active and not mode.enabled:
            if self._count_identical(body or {}) % THINKING_OFF_FAULT_EVERY == 0:
                return dataclasses.replace(mode, enabled=True)
        return mode

    def _count_identical(self, body: Mapping[str, Any]) -> int:
        """How many requests with this very body (this one included) the engine has seen."""
        # The whole body, canonical: a streamed and a non-streamed request, or another
        # question, are counted apart, so a check's K identical samples are their own series.
        key = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
        with self.identical_lock:
            self.identical_requests[key] = self.identical_requests.get(key, 0) + 1
            return self.identical_requests[key]

    def tool_request(self, request: ToolRequest | None) -> ToolRequest | None:
        """The request's tool choice as the engine applies it."""
        if "tool-parser-400" in self.active and request is not None and request.tools and request.choice != "none":
            from .protocol import RequestError  # protocol -> config -> defects: import late

            raise RequestError(TOOL_PARSER_CRASH)
        if "tools-answered-in-text" in self.active and request is not None and request.tools:
            return dataclasses.replace(request, choice="none", named=None)
        if "ignore-tool-choice" in self.active and request is not None and request.tools:
            return dataclasses.replace(request, choice="auto", named=None)
        if "auto-tool-choice-as-required" in self.active and request is not None and request.choice == "auto":
            return dataclasses.replace(request, choice="required")
        return request

    def chat_request(self, req: ChatRequest) -> ChatRequest:
        """The chat request as the engine renders and answers it, after validation."""
        from .protocol import RequestError  # protocol -> config -> defects: import late

        if "media-decode-400" in self.active and req.media:
            raise RequestError(MEDIA_DECODE_CRASH)
        if "history-null-content-400" in self.active:
            _refuse_null_content(req.messages)
        if "history-reasoning-dropped" in self.active:
            req = dataclasses.replace(req, messages=[
                {key: value for key, value in message.items() if key not in HISTORY_REASONING_KEYS}
                for message in req.messages])
        if "thinking-switch-template-400" in self.active and any(
                key in req.chat_template_kwargs for key in THINKING_SWITCH_KWARGS):
            raise RequestError(THINKING_TEMPLATE_CRASH)
        if "thinking-on-500" in self.active and _turns_thinking_on(req.chat_template_kwargs):
            raise RequestError(THINKING_ON_FAILURE, status=500, err_type="InternalServerError")
        if "media-ignored" not in self.active:
            return req
        # After validation, so corrupt media is still refused; before the template, so it costs no tokens.
        messages = [{**message, "content": [part for part in message["content"]
                                            if part.get("type") not in MEDIA_PLACEHOLDERS]}
                    if isinstance(message.get("content"), list) else message for message in req.messages]
        return dataclasses.replace(req, messages=messages, media=())

    def billed_prompt_tokens(self, counted: int, messages: Sequence[Mapping[str, Any]],
                             tokenizer: ReferenceTokenizer) -> int:
        """What chat usage.prompt_tokens says of a prompt of `counted` tokens."""
        if "usage-ignores-history" in self.active and messages:
            from .chat_template import render_messages  # chat_template is a leaf; kept beside its one use

            return tokenizer.count(render_messages(messages[-1:]))
        return counted

    def cached_tokens(self, found: int) -> int:
        """The cached tokens the engine reports (and counts as hits) when its prefix cache found `found`."""
        return 0 if "prefix-cache-never-hits" in self.active else found

    def loses_cached_prefix(self) -> bool:
        """Whether a prefix-cache hit loses the cached blocks' contents (the model reads only the rest)."""
        return "prefix-cache-changes-answer" in self.active

    def thinking_budget(self, budget: int | None) -> int | None:
        """The reasoning budget the engine applies to a request that asked for `budget` tokens."""
        return None if "thinking-budget-ignored" in self.active else budget

    def template_messages(self, messages: Sequence[Any]) -> Sequence[Any]:
        """The conversation as the chat template renders it into the prompt usage and /tokenize count."""
        if "template-drops-messages" in self.active:
            return [{"role": message["role"], "content": ""} for message in messages]
        return messages

    def prompt_messages(self, messages: Sequence[Any]) -> Sequence[Any]:
        """The conversation as the model reads it (usage still counts what was sent)."""
        if "drop-middle" in self.active:
            return drop_middle(messages)
        return messages

    def chat_answer(self, answer: Answer) -> Answer:
        """What the model says, before it is generated as tokens."""
        if "corrupt-code" in self.active:
            answer = dataclasses.replace(answer, text=corrupt_first_code(answer.text))
        if "malicious-code" in self.active and answer.rule == "code":
            signature = re.search(r"def\s+(\w+)\((\w+)\)", answer.text)
            if signature:
                return dataclasses.replace(answer, text=hostile_function(*signature.groups()))
        return answer

    def _tool_call_defects(self, generation: Generation) -> Generation:
        if not generation.tool_calls:
            return generation
        calls = generation.tool_calls
        if "single-tool-call" in self.active:
            calls = calls[:1]
        if "bad-tool-json" in self.active:
            calls = tuple(dataclasses.replace(c, arguments=repr(json.loads(c.arguments))) for c in calls)
        if "tool-args-intermittent" in self.active:
            calls = tuple(_cut_arguments(c) if next(self.tool_call_counter) % INTERMITTENT_TOOL_CALL_PERIOD == 0
                          else c for c in calls)
        generation = dataclasses.replace(generation, tool_calls=calls)
        if "tool-calls-finish-stop" in self.active:
            generation = dataclasses.replace(generation, finish_reason="stop")
        if "tool-markup-in-content" in self.active:
            from .tools import tool_markup  # tools -> protocol -> config -> defects: import late

            generation = generation.with_content(generation.content + tool_markup(calls))
        return generation

    def chat_generation(self, generation: Generation) -> Generation:
        """A chat reply, before it is rendered streamed or not."""
        generation = self._tool_call_defects(generation)
        if "split-char-replacement" in self.active:
            generation = dataclasses.replace(
                generation, content=decode_each_byte(generation.content),
                reasoning=None if generation.reasoning is None else decode_each_byte(generation.reasoning))
        if "empty-content" in self.active:
            return generation.with_content("")
        if "reasoning-never-closes" in self.active and generation.reasoning is not None:
            # The parser never sees </think>: what would have been the answer is still reasoning at the limit.
            return dataclasses.replace(generation, reasoning=f"{generation.reasoning}\n{generation.content}".strip(),
                                       content="", tool_calls=(), finish_reason="length")
        return generation

    def usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        """Every usage object, chat and completions, streamed and not."""
        if "usage-off-by-one" in self.active:
            # Consistent totals: only a count of the prompt itself can show it.
            usage = {**usage, "prompt_tokens": usage["prompt_tokens"] + 1, "total_tokens": usage["total_tokens"] + 1}
        if "bad-usage" in self.active:
            return {**usage, "total_tokens": usage["total_tokens"] + 1}
        return usage

    def chat_stream_pieces(self, pieces: list[Piece], *, prompt_ends_reasoning: bool = False) -> list[Piece]:
        """The deltas of a streamed chat reply, in order (`prompt_ends_reasoning`: the prompt holds </think>)."""
        if "content-at-end" in self.active:
            pieces = _content_held_to_its_end(pieces)
        if "tool-stream-index-zero" in self.active:
            pieces = [dataclasses.replace(p, tool=dataclasses.replace(p.tool, index=0)) if p.tool else p
                      for p in pieces]
        if "tool-index-from-one" in self.active:
            pieces = [dataclasses.replace(p, tool=dataclasses.replace(p.tool, index=p.tool.index + 1)) if p.tool
                      else p for p in pieces]
        leaks = "reasoning-leak" in self.active or (
            "prompt-markers-end-reasoning" in self.active and prompt_ends_reasoning)
        if not leaks or not any(p.kind == "reasoning" for p in pieces):
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

    def ignore_eos(self, requested: bool) -> bool:
        """Whether a completion honours the request's `ignore_eos`."""
        if "early-eos" in self.active:
            return False
        return requested

    def firewall_answer(self, method: str, path: str) -> tuple[int, str] | None:
        """firewall-403: (status, plain-text body) for a request a proxy in front of the engine blocks; else None."""
        if "firewall-403" in self.active and method == "POST" and path == FIREWALLED_PATH:
            return 403, "Forbidden"
        return None

    def check_tokenize(self) -> None:
        """tokenize-500: POST /tokenize raises, answered 500 in the engine's error shape."""
        if "tokenize-500" in self.active:
            from .protocol import RequestError  # protocol -> config -> defects: import late

            raise RequestError(TOKENIZE_CRASH, status=500, err_type="InternalServerError")

    def sends_done(self) -> bool:
        """Whether a stream ends with `data: [DONE]`."""
        return "no-done" not in self.active

    def media_error(self, error: MediaRequestError) -> RequestError:
        """The refusal of corrupt media (a 400 when no defect is active)."""
        if "media-crash" in self.active:
            # A real crash: no response, no cleanup, the socket closes with the process.
            sys.stderr.write(f"media-crash: reference engine exits ({MEDIA_CRASH_EXIT_CODE}) on corrupt media:"
                             f" {error.message}\n")
            sys.stderr.flush()
            os._exit(MEDIA_CRASH_EXIT_CODE)
        from .protocol import RequestError  # protocol -> config -> defects: import late

        if "media-500" in self.active and error.fault != "over-limit":
            # Media it cannot decode (SGLang's 500 in seed 001); too many items is another refusal.
            return RequestError(f"Internal server error: RuntimeError: {error.message}", status=500,
                                err_type="InternalServerError", param=error.param)
        if "media-mismatch-500" in self.active and error.fault == "mismatched":
            # vLLM 0.32's words for PNG bytes in a video part (its video loader's frame arithmetic).
            return RequestError(MEDIA_MISMATCH_500, status=500, err_type="InternalServerError", param=None)
        if "media-limit-500" in self.active and error.fault == "over-limit":
            return RequestError(f"Internal server error: AssertionError: {error.message}", status=500,
                                err_type="InternalServerError", param=None)
        return error

    def checks_declared_media_type(self) -> bool:
        """Whether a data URL's declared type is checked against its part (media-type-ignored: not)."""
        return "media-type-ignored" not in self.active

    # --- API contract -----------------------------------------------------------------

    def applies_response_format(self) -> bool:
        """Whether a validated response_format constrains the reply."""
        return "ignore-response-format" not in self.active

    def structured_generation(self, generation: Generation) -> Generation:
        """A reply made under a response_format, before it is rendered."""
        if "structured-reasoning-in-content" in self.active and generation.reasoning:
            return dataclasses.replace(generation, reasoning=None,
                                       content=f"{generation.reasoning}\n\n{generation.content}")
        return generation

    def include_stop(self) -> bool:
        """Whether the stop string that ended a reply stays in its content."""
        return "stop-included" in self.active

    def max_tokens(self, requested: int | None, body: dict[str, Any]) -> int | None:
        """The chat max_tokens the engine applies (`requested`: the request's, max_completion_tokens first)."""
        if "max-tokens-ignored" in self.active:
            return None
        if "max-completion-tokens-ignored" in self.active and body.get("max_completion_tokens") is not None:
            # Only the older field is read, as engines that predate max_completion_tokens do.
            return body.get("max_tokens")
        return requested

    def choices(self, requested: int) -> int:
        """How many chat choices the engine generates for `n`."""
        return 1 if "n-ignored" in self.active else requested

    def accepts_bad_request(self, error: RequestError) -> bool:
        """accept-bad-params: answer a request refused for an invalid value anyway."""
        return "accept-bad-params" in self.active and error.param in CONTRACT_PARAMS

    @staticmethod
    def repaired_body(body: dict[str, Any], model: str) -> dict[str, Any]:
        """The request an engine that validates nothing would act on: invalid values gone, one user turn."""
        repaired = {key: value for key, value in body.items()
                    if key not in CONTRACT_PARAMS or key == "messages"}
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        texts = [m.get("content") for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
        # An over-long prompt is silently cut, as a truncating engine would.
        repaired["messages"] = [{"role": "user", "content": (texts[-1] if texts else "hello")[:2000]}]
        repaired["model"] = model
        return repaired

    def request_error(self, error: RequestError) -> RequestError:
        """A chat refusal (not of media) as the engine sends it."""
        from .protocol import RequestError  # protocol -> config -> defects: import late

        if "schema-500" in self.active and error.param == "response_format":
            return RequestError("", status=500, err_type="InternalServerError")
        if error.param not in CONTRACT_PARAMS:
            return error
        if "bad-params-crash" in self.active:
            sys.stderr.write(f"bad-params-crash: reference engine exits ({MEDIA_CRASH_EXIT_CODE}) on an invalid"
                             f" value: {error.message}\n")
            sys.stderr.flush()
            os._exit(MEDIA_CRASH_EXIT_CODE)
        if "bad-params-500" in self.active:
            return RequestError(f"Internal server error: ValueError: {error.message}", status=500,
                                err_type="InternalServerError")
        if "error-body-plain" in self.active:
            plain = RequestError(error.message, status=error.status, err_type=error.err_type, param=error.param)
            plain.plain = True
            return plain
        return error

    def logprob_entries(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One choice's token log-probabilities, as the engine sends them."""
        if "top-logprobs-duplicated" not in self.active:
            return entries
        return [{**entry, "top_logprobs": [{key: entry[key] for key in ("token", "logprob", "bytes")}]
                 * len(entry["top_logprobs"])} for entry in entries]

    def final_stream_logprobs(self, rest: list[dict[str, Any]], every: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The logprobs of a streamed choice's finish chunk: what the deltas left (`rest` of `every`)."""
        return every + rest if "stream-logprobs-repeated" in self.active else rest

    def sampled_answer(self, answer: Answer, sampling: Sampling) -> Answer:
        """What a sampled request says: the same for the same seed, unless the seed is ignored."""
        if "seed-ignored" in self.active and sampling.seed is not None and (sampling.temperature or 0) > 0:
            # The first generated tokens differ, reasoning or answer, as a sampler seeded anew would.
            if answer.reasoning:
                return dataclasses.replace(answer, reasoning=f"({secrets.token_hex(3)}) {answer.reasoning}")
            return dataclasses.replace(answer, text=f"({secrets.token_hex(3)}) {answer.text}")
        return answer

    def seen_media(self, media: Sequence[SeenMedia]) -> tuple[SeenMedia, ...]:
        """What the model perceives of each decoded image and video."""
        if "media-cache-by-size" in self.active:
            media = tuple(
                dataclasses.replace(item, facts=self.image_cache.setdefault(
                    (item.facts.width, item.facts.height), item.facts))
                if isinstance(item.facts, ImageFacts) else item
                for item in media
            )
        if "black-pure-color" not in self.active:
            return tuple(media)
        black = (("black", 1.0),)
        return tuple(
            dataclasses.replace(item, facts=dataclasses.replace(item.facts, colors=black))
            if isinstance(item.facts, ImageFacts) and item.facts.pure else item
            for item in media
        )

    # --- Responses API ------------------------------------------------------------------

    def responses_usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        """The usage of a response, streamed and not."""
        if "responses-bad-usage" in self.active:
            return {**usage, "total_tokens": usage["total_tokens"] + 1}
        return usage

    def responses_items(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A response's output items, before they are sent streamed or not."""
        if "responses-reasoning-in-output" not in self.active:
            return items
        reasoning = [item["content"][0]["text"] for item in items if item["type"] == "reasoning" and item["content"]]
        if not reasoning:
            return items
        leaked = f"{THINK_OPEN}\n{''.join(reasoning)}\n{THINK_CLOSE}\n\n"
        kept = []
        for item in items:
            if item["type"] == "reasoning":
                continue
            if item["type"] == "message" and item["content"]:
                part = item["content"][0]
                item = {**item, "content": [{**part, "text": leaked + part["text"]}]}
            kept.append(item)
        return kept

    def responses_final_output(self, items: list[dict[str, Any]], events: list[dict[str, Any]]
                               ) -> list[dict[str, Any]]:
        """The output of a streamed response's response.completed, given the items and the events sent."""
        if "responses-completed-text-truncated" in self.active:
            deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
            items = [{**item, "content": [{**item["content"][0], "text": deltas[-1]}]}
                     if item["type"] == "message" and item["content"] and deltas else item for item in items]
        if "responses-call-id-changed" in self.active:
            items = [{**item, "call_id": f"call_{os.urandom(16).hex()}"} if item["type"] == "function_call" else item
                     for item in items]
        return items

    def responses_stream_events(self, events: list[Any]) -> list[Any]:
        """The events of a streamed response, in the order sent (each has an ``event`` dict)."""
        if "responses-events-out-of-order" not in self.active:
            return events
        added = next((i for i, e in enumerate(events) if e.event["type"] == "response.output_item.added"
                      and e.event["item"]["type"] == "message"), None)
        first = next((i for i, e in enumerate(events) if e.event["type"] == "response.output_text.delta"), None)
        if added is None or first is None:
            return events
        moved = list(events)
        event = moved.pop(added)
        moved.insert(first, event)  # the delta moved up by one: the item is announced after it
        return moved

    # --- the wire (issue 15) ------------------------------------------------------------

    def drops_connection_after_stream(self) -> bool:
        return "stream-drops-connection" in self.active

    def role_in_first_chunk(self) -> bool:
        """Whether each choice's first stream chunk carries the role (else it comes with the first output)."""
        return "no-role-first-chunk" not in self.active

    def honours_include_usage(self) -> bool:
        """Whether a stream that asks stream_options.include_usage gets its usage at all."""
        return "no-stream-usage" not in self.active

    def usage_on_finish_chunk(self) -> bool:
        """Whether include_usage's usage rides on the finish_reason chunk instead of a chunk of its own."""
        return "usage-on-finish-chunk" in self.active

    def honours_continuous_usage(self) -> bool:
        """Whether stream_options.continuous_usage_stats puts usage in the stream's chunks."""
        return "no-continuous-usage" not in self.active

    def finish_reason_twice(self) -> bool:
        """Whether a choice's last output chunk carries its finish_reason as well as the finish chunk."""
        return "finish-reason-twice" in self.active

    def stream_content_type(self, proper: str) -> str:
        """The Content-Type of a streamed chat reply, whose `proper` one is text/event-stream."""
        return "application/json" if "stream-content-type-json" in self.active else proper

    # --- latency ------------------------------------------------------------------------

    def first_token_delay_s(self) -> float:
        """Seconds added before the first token of a chat or completions reply (all later ones shift too)."""
        return SLOW_FIRST_TOKEN_S if "slow-first-token" in self.active else 0.0

    def spec_decode_acceptance(self, configured: float) -> float:
        """The speculative-decoding acceptance the engine counts at (spec-decode-rejects: a quarter of it)."""
        return configured * REJECTED_ACCEPTANCE_SHARE if "spec-decode-rejects" in self.active else configured

    # --- cancellation -------------------------------------------------------------------

    def keeps_generating_after_disconnect(self) -> bool:
        """Whether a request whose client left runs on to its end instead of being aborted."""
        return "disconnect-keeps-generating" in self.active

    def wedges_after_mid_stream_disconnect(self) -> bool:
        """Whether a client leaving mid-stream stops the engine from answering new chat requests."""
        return "disconnect-wedge" in self.active


def _refuse_null_content(messages: Sequence[Mapping[str, Any]]) -> None:
    """history-null-content-400: a request model whose assistant content must be a string, as a strict one has it."""
    from .protocol import RequestError  # protocol -> config -> defects: import late

    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") is None:
            raise RequestError(f"1 validation error for ChatCompletionRequest: messages.{index}.content: Input should "
                               "be a valid string [type=string_type, input_value=None]", param="messages")


def _content_held_to_its_end(pieces: list[Piece]) -> list[Piece]:
    """content-at-end: the answer's deltas as one, where its last one was; its tokens still pace it, so it
    leaves once the whole answer is generated."""
    content = [piece for piece in pieces if piece.kind == "content"]
    if len(content) < 2:
        return pieces
    held = Piece("content", "".join(piece.text for piece in content), sum(piece.tokens for piece in content))
    last = pieces.index(content[-1])
    return [held if index == last else piece for index, piece in enumerate(pieces) if piece.kind != "content"
            or index == last]


def decode_each_byte(text: str) -> str:
    """`text` as a detokenizer that decodes each byte-fallback token alone writes it (vLLM issue 931,
    SGLang issue 580): a character outside the vocabulary, here any of four UTF-8 bytes (emoji), is
    four tokens of one byte, each U+FFFD. CJK characters are in the vocabulary, as in most tokenizers."""
    return "".join(char.encode("utf-8").decode("ascii", "replace") if len(char.encode("utf-8")) == 4
                   else char for char in text)
