"""The reference engine's HTTP application (aiohttp), OpenAI-compatible like vLLM/SGLang.

`build_app(config)` wires the routes, the error middleware (every refusal becomes
the imitated engine's error body) and the API-key middleware. Handlers stay thin:
parse (protocol), answer (responder + generation), apply defects (DefectHooks),
render (wire), send (stream).

Load accounting (``load_middleware``) counts every generation request from its arrival to
its end as running, with the KV cache it holds (its prompt and the tokens generated so far),
and serves both at ``/metrics``. A client that disconnects ends its request: the handler's
task is cancelled (the app runs with aiohttp's ``handler_cancellation``, so a non-streamed
request is noticed too) or a stream's next write fails, and the request's slot and KV cache
are freed at once, as vLLM and SGLang abort a request whose client left. The cancellation
defects take effect here (``disconnect-keeps-generating``, ``disconnect-wedge``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from .chat_template import render_messages, strip_rendered_prefix
from .config import ReferenceEngineConfig
from .conventions import UNAUTHORIZED_BODY, get_convention
from .defects import DefectHooks
from .faults import FaultInjector
from .generation import (
    THINK_CLOSE,
    Generation,
    Piece,
    generate_chat,
    generate_completion,
    run_past_eos,
    split_pieces,
)
from .prefix_cache import MAX_CACHED_PROMPT_TOKENS, PrefixCache
from .logprobs import LogprobSlicer, logprob_entries
from .protocol import (
    ChatRequest,
    CompletionRequest,
    MediaRequestError,
    RequestError,
    output_budget,
    parse_chat_request,
    parse_completion_request,
    parse_detokenize_request,
    parse_tokenize_request,
)
from .prometheus import metrics_handler
from . import responses_api
from .responder import decide_thinking, respond, thinking_asked_for
from .tools import (
    generate_tool_calls,
    parse_tool_request,
    plan_tool_answer,
    refuse_without_tool_parser,
    tool_call_delta,
    tool_call_pieces,
)
from .structured import structured_answer
from .spec_decode import SpecDecodeCounts
from .stream import EVENT_STREAM_TYPE, BatchLoad, ClientGone, EventStream, KvHold, Pacer, dump_json
from .tokenizer import ReferenceTokenizer, get_tokenizer
from .vision import has_media_parts
from . import wire

__all__ = ["CLIENT_MAX_SIZE", "ENGINE_KEY", "ReferenceEngine", "build_app"]

log = logging.getLogger("engine_acceptance.reference_engine")

# Million-token prompts and base64 media are far above aiohttp's 1 MiB default.
CLIENT_MAX_SIZE = 256 * 1024 * 1024
# Bodies above this are parsed and tokenized in a worker thread, so one huge prompt
# does not stall every other stream on the event loop.
OFFLOAD_BYTES = 256 * 1024
HEALTH_PATHS = ("/health",)
GENERATION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", responses_api.PATH})
ARRIVED_AT = web.RequestKey("arrived_at", float)


@dataclass
class Admission:
    """One generation request as the load accounting sees it, from its arrival to its end."""

    hold: KvHold
    # Set once the reply is planned: how far generation goes (disconnect-keeps-generating runs it on).
    pacer: Pacer | None = None
    total_tokens: int = 0
    # Counted waiting instead of running (a request held by disconnect-wedge).
    waiting: bool = False
    # The response's headers went out: a disconnect now is a disconnect mid-stream.
    streaming: bool = False
    # The client left (a write failed, or the handler was cancelled).
    gone: bool = False

    def plan(self, pacer: Pacer, total_tokens: int) -> None:
        self.pacer, self.total_tokens = pacer, total_tokens


ADMISSION = web.RequestKey("admission", Admission)


@dataclass(frozen=True)
class ChatPrompt:
    """A chat request's prompt as the engine saw it."""

    # The prompt's tokens, as the template rendered it.
    tokens: int
    # What usage.prompt_tokens says (a defect may bill less than the prompt has).
    billed: int
    # Tokens found in the prefix cache, as reported; None when the engine has no prefix cache.
    cached: int | None
    # Whether the rendered prompt holds the end-of-reasoning marker (a system prompt that explains the
    # format, reasoning sent back in the history): what prompt-markers-end-reasoning's parser misreads.
    ends_reasoning: bool

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json_response(body: Any, *, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=dump_json)


class ReferenceEngine:
    """State shared by the handlers of one running app."""

    def __init__(self, config: ReferenceEngineConfig, tokenizer: ReferenceTokenizer | None = None) -> None:
        self.config = config
        self.convention = get_convention(config.convention)
        self.tokenizer = tokenizer or get_tokenizer()
        self.hooks = DefectHooks(config.defects)
        # Transport faults (stalls, resets, 503s, huge replies): see faults.py.
        self.faults = FaultInjector(config.defects, error_body=self.convention.error_body)
        # Requests generating right now (the latency model's batch slowdown), the KV cache they hold, and
        # the speculative-decoding counters their tokens add to.
        self.load = BatchLoad(spec=None if config.spec_decode_acceptance is None else SpecDecodeCounts(
            self.hooks.spec_decode_acceptance(config.spec_decode_acceptance)))
        # Chat prompts' blocks seen before: cached tokens in usage and /metrics (when config.prefix_cache).
        self.prefix_cache = PrefixCache()
        # disconnect-wedge: set by a client leaving mid-stream; no chat request is answered after it.
        self.wedged = False
        # disconnect-keeps-generating: requests whose client left, still generating.
        self.leftovers: set[asyncio.Task[None]] = set()
        self.created = int(time.time())
        self.open_paths = frozenset((*HEALTH_PATHS, *self.convention.version_paths))

    # --- plumbing -------------------------------------------------------------

    def error_response(self, error: RequestError) -> web.Response:
        if error.plain:
            return web.Response(text=error.message, status=error.status, content_type="text/plain")
        body = self.convention.error_body(
            error.message, err_type=error.err_type, status=error.status, param=error.param
        )
        return _json_response(body, status=error.status)

    @web.middleware
    async def error_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RequestError as error:
            return self.error_response(error)
        except web.HTTPException:
            raise
        except Exception:  # a bug here must still answer like an engine: 500 + body
            log.exception("unhandled error on %s %s", request.method, request.path)
            return self.error_response(
                RequestError("Internal server error", status=500, err_type="InternalServerError")
            )

    @web.middleware
    async def auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # firewall-403: a proxy in front of the engine answers before the engine checks any key.
        blocked = self.hooks.firewall_answer(request.method, request.path)
        if blocked is not None:
            return web.Response(text=blocked[1], status=blocked[0], content_type="text/plain")
        key = self.config.api_key
        if key is None or request.method == "OPTIONS" or request.path in self.open_paths or \
                self.faults.ignores_api_key():
            return await handler(request)
        given = request.headers.get("Authorization", "")
        # Constant-time comparison: the key must not leak through response timing.
        if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            return _json_response(UNAUTHORIZED_BODY, status=401)
        return await handler(request)

    @web.middleware
    async def load_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # A streaming handler returns after its last event, so this spans the generation.
        if request.path not in GENERATION_PATHS:
            return await handler(request)
        # The latency model counts from arrival. Stamp, then let the other requests
        # that arrived in the same burst stamp theirs before any is parsed, so the
        # engine's own Python overhead does not add to the configured TTFT.
        request[ARRIVED_AT] = time.monotonic()
        await asyncio.sleep(0)
        admission = Admission(self.load.hold())
        request[ADMISSION] = admission
        self.load.active += 1
        handed_over = False
        try:
            response = await handler(request)
            if admission.gone:
                handed_over = self._client_left(admission)
            return response
        except asyncio.CancelledError:
            # aiohttp cancels the handler when its client disconnects (handler_cancellation).
            admission.gone = True
            handed_over = self._client_left(admission)
            raise
        finally:
            if not handed_over:
                self._leave(admission)

    def _leave(self, admission: Admission) -> None:
        """The request is over: its slot and its KV cache are free."""
        if admission.waiting:
            self.load.waiting -= 1
        else:
            self.load.active -= 1
        self.load.release(admission.hold)

    def _client_left(self, admission: Admission) -> bool:
        """A client disconnected; True when its request lives on (and so is not freed here)."""
        if admission.streaming and self.hooks.wedges_after_mid_stream_disconnect():
            self.wedged = True
        if admission.waiting or admission.pacer is None or not self.hooks.keeps_generating_after_disconnect():
            return False
        task = asyncio.ensure_future(self._generate_for_nobody(admission))
        self.leftovers.add(task)
        task.add_done_callback(self.leftovers.discard)
        return True

    async def _generate_for_nobody(self, admission: Admission) -> None:
        # disconnect-keeps-generating: the rest of the reply is generated, at the engine's pace, for no one.
        assert admission.pacer is not None
        try:
            await admission.pacer.reach(admission.total_tokens)
        finally:
            self._leave(admission)

    async def _hang_if_wedged(self, request: web.Request) -> None:
        """disconnect-wedge: a chat request after the wedge is accepted, counted waiting, never answered."""
        admission = request.get(ADMISSION)
        if not self.wedged or admission is None:
            return
        admission.waiting = True
        self.load.active -= 1
        self.load.waiting += 1
        # Never set: the request waits until its client gives up (and the handler is cancelled).
        await asyncio.Event().wait()

    async def read_json(self, request: web.Request) -> tuple[dict[str, Any], bool]:
        """The request body as a JSON object, and whether it is large."""
        raw = await request.read()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(f"Invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError("The request body must be a JSON object")
        return body, len(raw) > OFFLOAD_BYTES

    @staticmethod
    async def run(big: bool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if big:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def usage(self, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int | None = None,
              reasoning_tokens: int | None = None) -> dict[str, Any]:
        """A usage object; the reasoning's tokens only from a model that reasons (vLLM: a reasoning parser)."""
        return self.hooks.usage(wire.usage_body(
            prompt_tokens, completion_tokens, cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens if self.config.reasoning else None))

    # --- info endpoints ------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return _json_response(
            self.convention.version_body(
                model=self.config.model,
                max_model_len=self.config.max_model_len,
                tokenizer_path=self.config.model,
            )
        )

    async def models(self, request: web.Request) -> web.Response:
        return _json_response(
            wire.model_list_body(
                convention=self.convention,
                model=self.config.model,
                created=self.created,
                max_model_len=self.config.max_model_len,
            )
        )

    # --- chat ----------------------------------------------------------------------

    def prepare_chat(self, body: dict[str, Any]) -> tuple[ChatRequest, int, list[Generation]]:
        """The chat request `body` parsed, its prompt tokens and its choices generated (defects applied)."""
        req, prompt, generations = self._prepare_chat(body)
        return req, prompt.billed, generations

    def _prepare_chat(self, body: dict[str, Any]) -> tuple[ChatRequest, ChatPrompt, list[Generation]]:
        try:
            return self._prepare_chat_checked(body)
        except MediaRequestError as error:
            raise self.hooks.media_error(error) from None
        except RequestError as error:
            if self.hooks.accepts_bad_request(error):
                return self._prepare_chat_checked(self.hooks.repaired_body(body, self.config.model))
            raise self.hooks.request_error(error) from None

    def _consult_prefix_cache(self, text: str, counted: int,
                              messages: list[dict[str, Any]]) -> tuple[int | None, list[dict[str, Any]]]:
        """The cached tokens the engine reports (None: it has no prefix cache), and the messages the model reads."""
        if not self.config.prefix_cache:
            return None, messages
        ids = self.tokenizer.encode(text) if counted <= MAX_CACHED_PROMPT_TOKENS else []
        found = self.prefix_cache.admit(ids) if ids else 0
        reported = self.hooks.cached_tokens(found)
        self.prefix_cache.count(counted, reported)
        if found and self.hooks.loses_cached_prefix():
            # prefix-cache-changes-answer: the cached blocks' contents are lost, the model reads the rest.
            messages = strip_rendered_prefix(messages, len(self.tokenizer.decode(ids[:found])))
        return reported, messages

    def _prepare_chat_checked(self, body: dict[str, Any]) -> tuple[ChatRequest, ChatPrompt, list[Generation]]:
        req = self.hooks.chat_request(parse_chat_request(body, config=self.config, convention=self.convention,
                                                         check_media_type=self.hooks.checks_declared_media_type()))
        text = render_messages(self.hooks.template_messages(req.messages))
        prompt_tokens = self.tokenizer.count(text)
        cached, model_messages = self._consult_prefix_cache(text, prompt_tokens, req.messages)
        prompt = ChatPrompt(tokens=prompt_tokens,
                            billed=self.hooks.billed_prompt_tokens(prompt_tokens, req.messages, self.tokenizer),
                            cached=cached, ends_reasoning=THINK_CLOSE in text)
        budget = output_budget(prompt_tokens, self.hooks.max_tokens(req.max_tokens, req.raw), self.config.max_model_len)
        thinking = self.hooks.thinking(
            decide_thinking(req.chat_template_kwargs, req.reasoning_effort, self.convention), req.raw
        )
        if not self.config.reasoning:
            # A model that never reasons: no switch or effort turns it on.
            thinking = dataclasses.replace(thinking, enabled=False)
        elif not self.config.reasoning_by_default and not thinking_asked_for(req.chat_template_kwargs):
            # Reasoning on request only: without a switch that turns it on, the model answers directly.
            thinking = dataclasses.replace(thinking, enabled=False)
        reasoning_budget = self.hooks.thinking_budget(req.thinking_budget)
        requested_tools = parse_tool_request(req.raw)
        if not self.config.tool_parser:
            refuse_without_tool_parser(requested_tools)
        tools = self.hooks.tool_request(requested_tools)
        choices = self.hooks.choices(req.sampling.n)
        tool_answer = plan_tool_answer(
            req.messages, thinking, tools, call_id_prefix=self.convention.tool_call_id_prefix
        )
        if tool_answer is not None:
            generation = generate_tool_calls(
                tool_answer.reasoning, tool_answer.calls, max_tokens=budget, tokenizer=self.tokenizer,
                reasoning_budget=reasoning_budget,
            )
            return req, prompt, [self.hooks.chat_generation(generation)] * choices
        answer = self.hooks.chat_answer(
            respond(self.hooks.prompt_messages(model_messages), thinking, self.hooks.seen_media(req.media))
        )
        answer = self.hooks.sampled_answer(answer, req.sampling)
        structured = req.response_format is not None and self.hooks.applies_response_format()
        if structured:
            assert req.response_format is not None
            answer = dataclasses.replace(answer, text=structured_answer(req.response_format, answer.text))
        generation = generate_chat(
            answer.reasoning, answer.text, max_tokens=budget, tokenizer=self.tokenizer,
            stop=req.sampling.stop, include_stop=self.hooks.include_stop(), reasoning_budget=reasoning_budget,
        )
        if req.raw.get("ignore_eos") is True and not req.sampling.stop:
            generation = run_past_eos(generation, budget)
        if structured:
            generation = self.hooks.structured_generation(generation)
        # The reference model is deterministic: every choice says the same, each generated (and counted) anew.
        return req, prompt, [self.hooks.chat_generation(generation)] * choices

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        await self._hang_if_wedged(request)
        body, big = await self.read_json(request)
        # Decoding images and video takes milliseconds to tens of them: off the event loop.
        req, prompt, generations = await self.run(big or has_media_parts(body), self._prepare_chat, body)
        # Cached tokens from the prefix cache (0 on a miss, as vLLM with --enable-prompt-tokens-details
        # reports; None without a prefix cache: no prompt_tokens_details at all).
        usage = self.usage(prompt.billed, sum(g.completion_tokens for g in generations), cached_tokens=prompt.cached,
                           reasoning_tokens=sum(g.reasoning_tokens for g in generations))
        request_id, created = wire.new_request_id("chatcmpl"), int(time.time())
        # A prefix-cache hit skips the cached tokens' prefill (the latency model's prefill_ms_per_1k).
        pacer = self._pacer(request, prompt.tokens, cached_tokens=prompt.cached or 0)
        self._plan(request, pacer, max(g.completion_tokens for g in generations))
        logprobs = self._logprobs(req, generations)
        if req.stream:
            return await self._stream_chat(request, req, generations, usage, pacer, request_id, created,
                                           prompt, logprobs)
        # The choices are generated together, one engine step per token.
        await pacer.reach(max(g.completion_tokens for g in generations))
        return _json_response(
            wire.chat_completion_body(
                convention=self.convention,
                request_id=request_id,
                created=created,
                model=req.model,
                generations=generations,
                usage=usage,
                logprobs=logprobs,
            )
        )

    def _logprobs(self, req: ChatRequest, generations: list[Generation]) -> list[list[dict[str, Any]]] | None:
        """Each choice's token log-probabilities, when the request asked for them."""
        if req.sampling.logprobs is None:
            return None
        return [self.hooks.logprob_entries(logprob_entries(generation, self.tokenizer, req.sampling.logprobs))
                for generation in generations]

    def _pacer(self, request: web.Request, prompt_tokens: int, *, cached_tokens: int = 0) -> Pacer:
        admission = request.get(ADMISSION)
        arrived = request.get(ARRIVED_AT)
        # slow-first-token: the latency model counts from a later start, so every token is that much later.
        start = (time.monotonic() if arrived is None else arrived) + self.hooks.first_token_delay_s()
        return Pacer(self.config.latency, prompt_tokens, self.load, start,
                     hold=admission.hold if admission is not None else None, cached_tokens=cached_tokens)

    @staticmethod
    def _plan(request: web.Request, pacer: Pacer, total_tokens: int) -> None:
        admission = request.get(ADMISSION)
        if admission is not None:
            admission.plan(pacer, total_tokens)

    @staticmethod
    def _streaming(request: web.Request) -> None:
        admission = request.get(ADMISSION)
        if admission is not None:
            admission.streaming = True

    @staticmethod
    def _gone(request: web.Request) -> None:
        admission = request.get(ADMISSION)
        if admission is not None:
            admission.gone = True

    def _chat_pieces(self, generation: Generation, prompt: ChatPrompt) -> list[Piece]:
        size = self.config.stream_chunk_tokens
        pieces: list[Piece] = []
        if generation.reasoning:
            pieces += split_pieces(generation.reasoning, kind="reasoning", tokens_per_piece=size)
        pieces += split_pieces(generation.content, kind="content", tokens_per_piece=size)
        pieces += tool_call_pieces(generation.tool_calls, tokens_per_piece=size)
        return self.hooks.chat_stream_pieces(pieces, prompt_ends_reasoning=prompt.ends_reasoning)

    async def _stream_chat(
        self,
        request: web.Request,
        req: ChatRequest,
        generations: list[Generation],
        usage: dict[str, Any],
        pacer: Pacer,
        request_id: str,
        created: int,
        prompt: ChatPrompt,
        logprobs: list[list[dict[str, Any]]] | None = None,
    ) -> web.StreamResponse:
        hooks = self.hooks
        prompt_tokens = prompt.billed
        if not hooks.honours_include_usage():
            req = dataclasses.replace(req, include_usage=False)
        # continuous_usage_stats counts with include_usage only (vLLM's include_continuous_usage).
        continuous = (self.convention.continuous_usage if req.include_usage and req.continuous_usage
                      and hooks.honours_continuous_usage() else None)
        usage_on_finish = req.include_usage and continuous is None and hooks.usage_on_finish_chunk()
        role_first = hooks.role_in_first_chunk()
        slicers = None if logprobs is None else [LogprobSlicer(entries) for entries in logprobs]

        def chunk(index: int, delta: dict[str, Any], finish_reason: str | None = None,
                  running: dict[str, Any] | None = None, *, tokens: int = 0, final: bool = False) -> dict[str, Any]:
            # Each delta carries the logprobs of the tokens it holds, the finish chunk (`final`) the rest;
            # the role chunk holds no token: no logprobs, as vLLM sends it.
            entries = None
            if slicers is not None and (tokens or final):
                entries = slicers[index].take(tokens) if not final else hooks.final_stream_logprobs(
                    slicers[index].rest(), logprobs[index])
            body = wire.chat_chunk(
                convention=self.convention,
                request_id=request_id,
                created=created,
                model=req.model,
                delta=delta,
                finish_reason=finish_reason,
                index=index,
                logprobs=entries,
            )
            if running is not None:
                body["usage"] = running
            return body

        def running(tokens: int, *, output: bool) -> dict[str, Any] | None:
            """One choice's usage so far, on the chunks the convention gives it (vLLM: every chunk; SGLang:
            those with output). vLLM counts each choice's own tokens."""
            if continuous is None or (continuous == "output_chunks" and not output):
                return None
            return self.usage(prompt_tokens, tokens)

        per_choice = [self._chat_pieces(generation, prompt) for generation in generations]
        stream = await EventStream.open(request, close_connection=not hooks.sends_done(),
                                        stamp=self.config.stamp_events, fault=self.faults.stream_writer(request),
                                        content_type=hooks.stream_content_type(EVENT_STREAM_TYPE))
        self._streaming(request)
        try:
            for index in range(len(generations)):
                delta = wire.chat_delta(self.convention, role="assistant" if role_first else None, content="")
                await stream.send(chunk(index, delta, running=running(0, output=False)))
            produced = [0] * len(generations)
            # Round-robin over the choices: each advances one piece per engine step.
            for step in range(max((len(pieces) for pieces in per_choice), default=0)):
                for index, pieces in enumerate(per_choice):
                    if step < len(pieces):
                        produced[index] += pieces[step].tokens
                await pacer.reach(max(produced))
                for index, pieces in enumerate(per_choice):
                    if step >= len(pieces):
                        continue
                    piece = pieces[step]
                    if piece.kind == "reasoning":
                        delta = wire.chat_delta(self.convention, reasoning=piece.text)
                    elif piece.kind == "tool_call":
                        delta = tool_call_delta(self.convention, piece)
                    else:
                        delta = wire.chat_delta(self.convention, content=piece.text)
                    if step == 0 and not role_first:
                        delta["role"] = "assistant"
                    # finish-reason-twice: the last output chunk says it too.
                    early = (generations[index].finish_reason
                             if step == len(pieces) - 1 and hooks.finish_reason_twice() else None)
                    await stream.send(chunk(index, delta, early, running(produced[index], output=True),
                                            tokens=piece.tokens))
            await pacer.reach(max(max(produced), max(g.completion_tokens for g in generations)))
            for index, generation in enumerate(generations):
                final = (usage if usage_on_finish and index == len(generations) - 1
                         else running(generation.completion_tokens, output=False))
                await stream.send(chunk(index, wire.chat_delta(self.convention), generation.finish_reason, final,
                                        final=True))
            if req.include_usage and not usage_on_finish:
                await stream.send(
                    wire.usage_chunk(
                        object_name="chat.completion.chunk",
                        request_id=request_id,
                        created=created,
                        model=req.model,
                        usage=usage,
                    )
                )
            await stream.finish(send_done=hooks.sends_done(), drop_connection=hooks.drops_connection_after_stream())
        except ClientGone:
            log.debug("client left during chat stream %s", request_id)
            self._gone(request)
        return stream.response

    # --- responses ----------------------------------------------------------------------

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await responses_api.create_response(self, request, request.get(ARRIVED_AT))

    # --- completions ------------------------------------------------------------------

    def _prepare_completion(self, body: dict[str, Any]) -> tuple[CompletionRequest, int, list[Generation]]:
        req = parse_completion_request(
            body, config=self.config, convention=self.convention, tokenizer=self.tokenizer
        )
        generations = []
        for prompt in req.prompts:
            output_budget(len(prompt.ids), req.max_tokens, self.config.max_model_len)
            generations.append(
                generate_completion(
                    max_tokens=req.max_tokens, ignore_eos=self.hooks.ignore_eos(req.ignore_eos),
                    tokenizer=self.tokenizer
                )
            )
        return req, sum(len(p.ids) for p in req.prompts), generations

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body, big = await self.read_json(request)
        req, prompt_tokens, generations = await self.run(big, self._prepare_completion, body)
        usage = self.usage(prompt_tokens, sum(g.completion_tokens for g in generations))
        request_id, created = wire.new_request_id("cmpl"), int(time.time())
        # A batch is generated in parallel, as one engine step per token.
        pacer = self._pacer(request, max(len(p.ids) for p in req.prompts))
        self._plan(request, pacer, max(g.completion_tokens for g in generations))
        if req.stream:
            return await self._stream_completion(request, req, generations, usage, pacer, request_id, created)
        await pacer.reach(max(g.completion_tokens for g in generations))
        return _json_response(
            wire.completion_body(
                request_id=request_id,
                created=created,
                model=req.model,
                generations=generations,
                usage=usage,
            )
        )

    async def _stream_completion(
        self,
        request: web.Request,
        req: CompletionRequest,
        generations: list[Generation],
        usage: dict[str, Any],
        pacer: Pacer,
        request_id: str,
        created: int,
    ) -> web.StreamResponse:
        if not self.hooks.honours_include_usage():
            req = dataclasses.replace(req, include_usage=False)

        def chunk(index: int, text: str, finish_reason: str | None = None) -> dict[str, Any]:
            return wire.completion_chunk(
                convention=self.convention,
                request_id=request_id,
                created=created,
                model=req.model,
                index=index,
                text=text,
                finish_reason=finish_reason,
            )

        size = self.config.stream_chunk_tokens
        per_prompt = [split_pieces(g.content, kind="content", tokens_per_piece=size) for g in generations]
        produced = [0] * len(generations)
        stream = await EventStream.open(request, close_connection=not self.hooks.sends_done(),
                                        stamp=self.config.stamp_events)
        self._streaming(request)
        try:
            # Round-robin over the batch: every prompt advances one piece per step.
            for step in range(max((len(p) for p in per_prompt), default=0)):
                for index, pieces in enumerate(per_prompt):
                    if step < len(pieces):
                        produced[index] += pieces[step].tokens
                await pacer.reach(max(produced))
                for index, pieces in enumerate(per_prompt):
                    if step < len(pieces):
                        await stream.send(chunk(index, pieces[step].text))
            await pacer.reach(max(g.completion_tokens for g in generations))
            for index, generation in enumerate(generations):
                await stream.send(chunk(index, "", generation.finish_reason))
            if req.include_usage:
                await stream.send(
                    wire.usage_chunk(
                        object_name="text_completion",
                        request_id=request_id,
                        created=created,
                        model=req.model,
                        usage=usage,
                    )
                )
            await stream.finish(send_done=self.hooks.sends_done(),
                                drop_connection=self.hooks.drops_connection_after_stream())
        except ClientGone:
            log.debug("client left during completion stream %s", request_id)
            self._gone(request)
        return stream.response

    # --- tokenize ------------------------------------------------------------------------

    def _tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        req = parse_tokenize_request(body, config=self.config, convention=self.convention)
        self.hooks.check_tokenize()
        if req.messages is not None:
            text = render_messages(self.hooks.template_messages(req.messages),
                                   add_generation_prompt=req.add_generation_prompt)
        else:
            text = req.prompt or ""
        ids = self.tokenizer.encode(text)
        return {
            "count": len(ids),
            "max_model_len": self.config.max_model_len,
            "tokens": ids,
            "token_strs": [self.tokenizer.id_to_token(i) for i in ids] if req.return_token_strs else None,
        }

    async def tokenize(self, request: web.Request) -> web.Response:
        body, big = await self.read_json(request)
        return _json_response(await self.run(big, self._tokenize, body))

    async def detokenize(self, request: web.Request) -> web.Response:
        body, _ = await self.read_json(request)
        req = parse_detokenize_request(
            body, config=self.config, convention=self.convention, tokenizer=self.tokenizer
        )
        return _json_response({self.convention.detokenize_field: self.tokenizer.decode(req.tokens)})

    async def no_such_route(self, request: web.Request) -> web.Response:
        # vLLM and SGLang are FastAPI apps: a route they lack is 404 {"detail": "Not Found"}.
        return _json_response({"detail": "Not Found"}, status=404)

    async def tokenizer_json(self, request: web.Request) -> web.Response:
        # The suite can count prompt tokens locally with exactly the server's tokenizer.
        return web.Response(text=self.tokenizer.to_json(), content_type="application/json")


ENGINE_KEY = web.AppKey("reference_engine", ReferenceEngine)


def build_app(config: ReferenceEngineConfig) -> web.Application:
    """A ready-to-run aiohttp application serving `config`."""
    engine = ReferenceEngine(config)
    # Error handling is outermost so a failure in auth still gets a proper body.
    app = web.Application(
        client_max_size=CLIENT_MAX_SIZE,
        middlewares=[engine.load_middleware, engine.error_middleware, engine.auth_middleware,
                     engine.faults.middleware],
    )
    app[ENGINE_KEY] = engine
    app.router.add_get("/health", engine.health)
    for path in engine.convention.version_paths:
        app.router.add_get(path, engine.version)
    app.router.add_get("/v1/models", engine.models)
    app.router.add_post("/v1/chat/completions", engine.chat_completions)
    app.router.add_post("/v1/completions", engine.completions)
    if config.tokenize:
        app.router.add_post("/tokenize", engine.tokenize)
        app.router.add_post("/detokenize", engine.detokenize)
    else:
        app.router.add_route("*", "/tokenize", engine.no_such_route)
        app.router.add_route("*", "/detokenize", engine.no_such_route)
    app.router.add_get("/tokenizer.json", engine.tokenizer_json)
    app.router.add_get("/metrics", metrics_handler(engine.config, engine.load,
                                                   engine.prefix_cache if config.prefix_cache else None))
    if config.responses:
        app.router.add_post(responses_api.PATH, engine.responses)
    else:
        app.router.add_route("*", responses_api.PATH, engine.no_such_route)
    return app
