"""The defects the reference engine can inject, each applied in exactly one place.

Every acceptance test must be shown to fail on the defect it exists to catch. The
self-tests start the reference engine with `--inject NAME` and expect the matching
test to fail. `DEFECTS` is the registry (name -> what it breaks); `DefectHooks` is
where each defect takes effect, called by the server at fixed points of a reply.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .code_answers import hostile_function
from .faults import FAULTS
from .generation import THINK_CLOSE, THINK_OPEN, Generation, Piece
from .retrieval import corrupt_first_code, drop_middle
from .vision import ImageFacts, SeenMedia

if TYPE_CHECKING:
    from .protocol import MediaError, RequestError
    from .responder import Answer, ThinkingMode
    from .tools import ToolRequest

# Exit status of a reference engine that "crashed" on corrupt media (media-crash) or an invalid value
# (bad-params-crash).
MEDIA_CRASH_EXIT_CODE = 70

__all__ = ["CONTRACT_PARAMS", "DEFECTS", "MEDIA_CRASH_EXIT_CODE", "DefectHooks", "UnknownDefectError",
           "validate_defects"]

DEFECTS: dict[str, str] = {
    "reasoning-leak": (
        "streamed chat only: reasoning is sent inside content wrapped in <think>...</think>"
        " and the reasoning field stays empty (a parser that judged state from the whole prompt)"
    ),
    "no-done": "streams never send 'data: [DONE]'; the connection closes after the last chunk",
    "bad-usage": "usage.total_tokens = prompt + completion + 1, streamed and not",
    "media-500": (
        "corrupt media is answered with HTTP 500 and an InternalServerError body instead of 400"
        " (SGLang in seed 001: PIL and TorchCodec errors wrapped as RuntimeError)"
    ),
    "media-crash": (
        "the engine process dies while decoding corrupt media: that request gets no answer and"
        " nothing is served afterwards (the listener is gone)"
    ),
    "black-pure-color": (
        "an image of one single colour is seen as black (MiniMax-M3 on vLLM and SGLang in seed 001);"
        " bordered images, charts and video are seen correctly"
    ),
    "empty-content": "chat content is '' in every reply, streamed and not; reasoning unaffected",
    "ignore-thinking-off": (
        "thinking stays on when a request turns it off (thinking_mode: disabled, enable_thinking: false):"
        " reasoning is still returned"
    ),
    "single-tool-call": "of several parallel tool calls only the first is returned, streamed and not",
    "bad-tool-json": "tool-call arguments are a Python dict repr ({'city': '广州'}), not JSON, streamed and not",
    "tool-markup-in-content": (
        "the raw <tool_call> markup the tool parser consumed is left in content as well, streamed and not"
    ),
    "tool-stream-index-zero": (
        "streamed tool-call fragments all carry index 0, so parallel calls merge into one when reassembled"
    ),
    "ignore-tool-choice": "tool_choice 'none' and a forced named tool are ignored and treated as 'auto'",
    "malicious-code": (
        "a request for a Python function is answered with a hostile one: it reads the environment, writes"
        " outside its directory, opens a socket, fork-bombs and loops forever"
    ),
    "early-eos": (
        "completions ignore 'ignore_eos': the continuation stops at its natural end of sequence"
        " (about 54 tokens), so a fixed-length load gets fewer output tokens than it asked for"
    ),
    "drop-middle": (
        "the model never reads the middle 40% of a long message (over 4096 characters), as a truncating"
        " engine would; usage still counts the whole prompt"
    ),
    "usage-off-by-one": "usage.prompt_tokens (and total_tokens with it) is one more than the prompt has",
    "corrupt-code": "the first code like jade-50-1-259920 in an answer has its last digit changed",
    "media-cache-by-size": (
        "the multimodal processor cache is keyed by an image's size, not its content: an image the size of one"
        " seen before is read as that one (two 512x512 images in one request come back as the first twice)"
    ),
    # API contract (issue 15): structured outputs, error codes, sampling parameters.
    "ignore-response-format": (
        "response_format is validated but not applied: the reply is free text instead of JSON, streamed and not"
    ),
    "structured-reasoning-in-content": (
        "with response_format and thinking on, the reasoning is written into content ahead of the JSON and the"
        " reasoning field stays empty (a grammar applied to the whole output, reasoning included)"
    ),
    "schema-500": (
        "a response_format schema that cannot be compiled gets HTTP 500 with an empty InternalServerError"
        " message instead of 400 (vLLM issue 57725)"
    ),
    "bad-params-500": (
        "invalid request values (temperature < 0, n < 1, max_tokens < 1, an unknown model, malformed messages,"
        " a prompt longer than the context) get HTTP 500 instead of 400/404"
    ),
    "accept-bad-params": (
        "invalid request values are answered 200 as if valid: the values are dropped, the messages repaired,"
        " an over-long prompt truncated"
    ),
    "bad-params-crash": (
        "the engine process dies on an invalid request value: that request gets no answer and nothing is"
        " served afterwards"
    ),
    "error-body-plain": (
        "refusals of invalid request values keep their 4xx status but the body is plain text, not an error object"
    ),
    "stop-included": "a stop string ends the reply but is left at the end of the content",
    "max-tokens-ignored": "chat max_tokens is ignored: the reply runs to its natural end (finish_reason 'stop')",
    "n-ignored": "chat n > 1 is accepted but only one choice is generated, and usage counts one",
    # Transport faults (stalls, resets, 503 storms, huge replies, ...): applied by faults.FaultInjector.
    **FAULTS,
    # Cancellation (issue 15): what the engine does when a client disconnects.
    "disconnect-keeps-generating": (
        "a request whose client disconnected is not aborted: it goes on generating to its end (max_tokens when it"
        " asked ignore_eos), counted running and holding its KV cache until then (a leaked request, as when an"
        " engine never hears of the disconnect)"
    ),
    "disconnect-wedge": (
        "after a client disconnects mid-stream the engine stops answering new chat requests: they are accepted,"
        " counted waiting, and never answered (the disconnected requests themselves are freed)"
    ),
}

# The request fields whose invalid values the error-code contract checks (bad-params-500,
# accept-bad-params, error-body-plain act on refusals naming these; media refusals are apart).
CONTRACT_PARAMS = frozenset({"temperature", "top_p", "n", "max_tokens", "max_completion_tokens", "model",
                             "messages", "stop"})


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
    # media-cache-by-size: (width, height) -> the first image of that size the engine saw.
    image_cache: dict[tuple[int, int], ImageFacts] = field(default_factory=dict, compare=False, repr=False)

    def thinking(self, mode: ThinkingMode) -> ThinkingMode:
        """The thinking mode the model runs in, after the request asked for `mode`."""
        if "ignore-thinking-off" in self.active and not mode.enabled:
            return dataclasses.replace(mode, enabled=True)
        return mode

    def tool_request(self, request: ToolRequest | None) -> ToolRequest | None:
        """The request's tool choice as the engine applies it."""
        if "ignore-tool-choice" in self.active and request is not None and request.tools:
            return dataclasses.replace(request, choice="auto", named=None)
        return request

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
            import json

            calls = tuple(dataclasses.replace(c, arguments=repr(json.loads(c.arguments))) for c in calls)
        generation = dataclasses.replace(generation, tool_calls=calls)
        if "tool-markup-in-content" in self.active:
            from .tools import tool_markup  # tools -> protocol -> config -> defects: import late

            generation = generation.with_content(generation.content + tool_markup(calls))
        return generation

    def chat_generation(self, generation: Generation) -> Generation:
        """A chat reply, before it is rendered streamed or not."""
        generation = self._tool_call_defects(generation)
        if "empty-content" in self.active:
            return generation.with_content("")
        return generation

    def usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        """Every usage object, chat and completions, streamed and not."""
        if "usage-off-by-one" in self.active:
            # Consistent totals: only a count of the prompt itself can show it.
            usage = {**usage, "prompt_tokens": usage["prompt_tokens"] + 1, "total_tokens": usage["total_tokens"] + 1}
        if "bad-usage" in self.active:
            return {**usage, "total_tokens": usage["total_tokens"] + 1}
        return usage

    def chat_stream_pieces(self, pieces: list[Piece]) -> list[Piece]:
        """The deltas of a streamed chat reply, in order."""
        if "tool-stream-index-zero" in self.active:
            pieces = [dataclasses.replace(p, tool=dataclasses.replace(p.tool, index=0)) if p.tool else p
                      for p in pieces]
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

    def ignore_eos(self, requested: bool) -> bool:
        """Whether a completion honours the request's `ignore_eos`."""
        if "early-eos" in self.active:
            return False
        return requested

    def sends_done(self) -> bool:
        """Whether a stream ends with `data: [DONE]`."""
        return "no-done" not in self.active

    def media_error(self, error: MediaError) -> RequestError:
        """The refusal of corrupt media (a 400 when no defect is active)."""
        if "media-crash" in self.active:
            # A real crash: no response, no cleanup, the socket closes with the process.
            sys.stderr.write(f"media-crash: reference engine exits ({MEDIA_CRASH_EXIT_CODE}) on corrupt media:"
                             f" {error.message}\n")
            sys.stderr.flush()
            os._exit(MEDIA_CRASH_EXIT_CODE)
        if "media-500" in self.active:
            from .protocol import RequestError  # protocol -> config -> defects: import late

            return RequestError(f"Internal server error: RuntimeError: {error.message}", status=500,
                                err_type="InternalServerError", param=error.param)
        return error

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

    def max_tokens(self, requested: int | None) -> int | None:
        """The chat max_tokens the engine applies."""
        return None if "max-tokens-ignored" in self.active else requested

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

    # --- cancellation -------------------------------------------------------------------

    def keeps_generating_after_disconnect(self) -> bool:
        """Whether a request whose client left runs on to its end instead of being aborted."""
        return "disconnect-keeps-generating" in self.active

    def wedges_after_mid_stream_disconnect(self) -> bool:
        """Whether a client leaving mid-stream stops the engine from answering new chat requests."""
        return "disconnect-wedge" in self.active
