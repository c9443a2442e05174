"""The names of the defects the reference engine can inject, and what each breaks: data only.

``DEFECTS`` is the registry (name -> what it breaks), read by the engine's command line,
its configuration and the launchers that check an ``--inject`` name before starting it.
It lives apart from :mod:`.defects`, where each defect takes effect, because that module
reaches into most of the engine (generation, tools, vision, retrieval) while the names are
needed by the configuration those modules read: here they import only the server faults'
names (:mod:`.faults`, which imports nothing of the engine), so no import circle runs through them.
"""

from __future__ import annotations

from collections.abc import Iterable

from .faults import FAULTS

__all__ = ["DEFECTS", "FIREWALLED_PATH", "MEDIA_DECODE_CRASH", "MEDIA_MISMATCH_500", "SLOW_FIRST_TOKEN_S",
           "THINKING_ON_FAILURE", "THINKING_SWITCH_KWARGS", "THINKING_TEMPLATE_CRASH", "TOOL_PARSER_CRASH",
           "UnknownDefectError", "validate_defects"]

# slow-first-token: how late the first token of every reply comes.
SLOW_FIRST_TOKEN_S = 1.0
# tool-parser-400: vLLM's words when its tool parser raises (the proxy answered exactly this).
TOOL_PARSER_CRASH = ("Error in extracting tool call from response: JSONDecodeError: Expecting ',' delimiter: "
                     "line 1 column 24 (char 23)")
# media-decode-400: Pillow's words for bytes it cannot read, as vLLM passes them on.
MEDIA_DECODE_CRASH = "Failed to load image: cannot identify image file <_io.BytesIO object at 0x7f3a2c1b9e40>"
# tokenize-500: what a tokenize endpoint that raises answers (vLLM wraps an unexpected exception so).
TOKENIZE_CRASH = "Internal server error: AttributeError: 'NoneType' object has no attribute 'apply_chat_template'"
# media-mismatch-500: vLLM 0.32's answer (HTTP 500) to PNG bytes sent as a video/mp4 part (issue 40).
MEDIA_MISMATCH_500 = "upper bound and lower bound inconsistent with step sign"
# firewall-403: the one route a proxy in front of the engine blocks.
FIREWALLED_PATH = "/v1/responses"
# The chat_template_kwargs keys of the thinking switches the suite knows (its probe tries each).
THINKING_SWITCH_KWARGS = ("enable_thinking", "thinking", "thinking_mode")
# thinking-switch-template-400: a chat template that reads the switch and crashes, as vLLM 0.32 answers it:
# renderers/hf.py safe_apply_chat_template catches whatever apply_chat_template raised and sends the
# template's own reason (jinja2's, here an UndefinedError) as 400 BadRequestError.
THINKING_TEMPLATE_CRASH = "'thinking_budget' is undefined"
# thinking-on-500: vLLM 0.32's answer to a request the engine failed (exceptions.py GenerationError, raised
# when a request finishes with finish_reason "error"): 500 InternalServerError.
THINKING_ON_FAILURE = "Internal server error"

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
    "media-mismatch-500": (
        "media whose bytes are of another kind than their part (a PNG sent as a video/mp4 part) is answered"
        f" HTTP 500 {MEDIA_MISMATCH_500!r} instead of 400 (vLLM 0.32, issue 40); other corrupt media stays 400"
    ),
    "media-type-ignored": (
        "a data URL's declared type is not checked against its part: a PNG labelled text/plain in an image"
        " part is decoded and answered 200 (vLLM 0.32 reads the bytes and ignores the label, issue 40)"
    ),
    "media-limit-500": (
        "more images or videos in one prompt than the engine takes (8 images, 2 videos) are answered HTTP 500"
        " instead of vLLM's 400 'At most N image(s) may be provided in one prompt'"
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
    "reasoning-never-closes": (
        "a reply that reasons never closes its reasoning: the answer stays in the reasoning field, content is"
        " empty, finish_reason 'length' (pretrained Gemma 3 270M under vLLM's qwen3 parser never writes </think>)"
    ),
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
    "max-completion-tokens-ignored": (
        "chat max_completion_tokens is accepted and ignored (max_tokens is still honoured): the reply runs to its"
        " natural end"
    ),
    "top-logprobs-duplicated": (
        "each token's top_logprobs lists the generated token k times instead of the k most likely distinct"
        " tokens, streamed and not"
    ),
    "stream-logprobs-repeated": (
        "streamed logprobs: the finish chunk repeats every entry the deltas already carried, so a stream has"
        " twice as many entries as tokens"
    ),
    "seed-ignored": "a sampled chat request's seed is ignored: the same seed twice gives different replies",
    # The Responses API (issue 15): /v1/responses.
    "responses-bad-usage": "responses: usage.total_tokens = input_tokens + output_tokens + 1, streamed and not",
    "responses-events-out-of-order": (
        "responses, streamed: the message's response.output_item.added is sent after its first"
        " response.output_text.delta"
    ),
    "responses-completed-text-truncated": (
        "responses, streamed: the message in response.completed holds only the last output_text delta, while the"
        " deltas and output_text.done carry the whole text (vLLM PR 30223)"
    ),
    "responses-call-id-changed": (
        "responses, streamed: the function_call items of the stream carry one call_id and response.completed"
        " another (vLLM PR 47916)"
    ),
    "responses-reasoning-in-output": (
        "responses: no reasoning item; the reasoning is written into the message's output_text inside"
        " <think>...</think>, streamed and not"
    ),
    # Transport faults (stalls, resets, 503 storms, huge replies, ...): applied by faults.FaultInjector.
    **FAULTS,
    # The wire, read raw (issue 15): what a streamed chat completion's chunks, bytes and headers say.
    "no-role-first-chunk": (
        "streamed chat: the first chunk of each choice carries no role (an empty delta); the role comes with"
        " the first piece of output instead"
    ),
    "no-stream-usage": (
        "streamed chat and completions ignore stream_options.include_usage: no chunk carries usage"
        " (llama-cpp-python 0.3.36, whose request types have no stream_options)"
    ),
    "usage-on-finish-chunk": (
        "streamed chat with stream_options.include_usage: usage is attached to the finish_reason chunk (choices"
        " not empty) and no final usage chunk with empty choices is sent"
    ),
    "no-continuous-usage": (
        "stream_options.continuous_usage_stats is accepted and ignored: usage comes only in the final chunk"
    ),
    "finish-reason-twice": (
        "streamed chat: each choice's last output chunk already carries its finish_reason, and the finish chunk"
        " repeats it"
    ),
    "split-char-replacement": (
        "the detokenizer decodes each byte-fallback token alone, so a character the vocabulary lacks (an emoji,"
        " four UTF-8 bytes, four tokens) becomes four U+FFFD in content and reasoning, streamed and not"
    ),
    "stream-content-type-json": (
        "a streamed chat reply is labelled Content-Type: application/json instead of text/event-stream"
        " (its body is still SSE)"
    ),
    "stream-drops-connection": (
        "chat and completions: the connection is closed after each streamed reply, though no 'Connection: close'"
        " was sent (llama.cpp's llama-server b11312): a client's next request on it fails or needs a new connection"
    ),
    "tool-index-from-one": (
        "streamed tool-call fragments are indexed from 1 (1, 2, ...): merged by index they still give the right"
        " calls, but a client that fills an array by index gets a hole at 0"
    ),
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
    # A second real engine (issue 16): what llama.cpp's server does with a text-only model.
    "media-ignored": (
        "image and video parts are accepted (corrupt ones still refused) and dropped before the prompt is"
        " rendered: no placeholder tokens in usage.prompt_tokens, and the answer is made as if no media was"
        " sent (llama.cpp's server 0.3.36 with a GGUF and no CLIP model)"
    ),
    # A misconfigured chat template (issue 40): llama.cpp's llama-server started with --jinja --chat-template gemma
    # renders the literal word, 3 prompt tokens for a 2,700-character message.
    "template-drops-messages": (
        "the chat template renders each turn's role marker but not its content, so usage.prompt_tokens and"
        " /tokenize's count of a conversation are a handful of tokens whatever the messages hold (the model"
        " still answers the messages)"
    ),
    # Intermittent faults (issue 17): what one sample cannot see, a rate over hundreds can.
    "tool-args-intermittent": (
        "3% of tool calls (every 33rd, counted across the engine's replies) have their arguments cut mid-JSON,"
        " streamed and not (real tool parsers fail like this intermittently)"
    ),
    "auto-tool-choice-as-required": (
        "tool_choice 'auto' is applied as 'required': every turn with tools calls one, even where the question"
        " needs none or the tool results have just arrived"
    ),
    "tool-calls-finish-stop": (
        "a reply that calls tools ends with finish_reason 'stop' instead of 'tool_calls', streamed and not (as"
        " vLLM answered a named tool_choice)"
    ),
    # What one request of a check cannot see, K trials can.
    "ignore-thinking-off-1-in-5": (
        "every 5th identical request with thinking turned off still returns reasoning (counted per request body:"
        " five identical requests sent together always include exactly one faulty reply)"
    ),
    # Service-level objectives (issue 18): figures fine for throughput, too slow for an SLO.
    "slow-first-token": (
        f"chat and completions: the first token of every reply comes {SLOW_FIRST_TOKEN_S:g} s late, at any load"
        " (a prefill that waits for a batch that never fills); later tokens keep their pace"
    ),
    # Agent traffic and prefix reuse (issue 41): what a single turn never shows.
    "history-null-content-400": (
        "a chat request whose history holds an assistant message with tool_calls and content null (as the OpenAI API"
        " allows, and as the engine itself answers a turn that calls tools) is answered 400: the request model wants"
        " content to be a string"
    ),
    "history-reasoning-dropped": (
        "the chat path drops the reasoning field (reasoning, reasoning_content) of the history's assistant messages"
        " before the template renders them, though the model needs its reasoning carried back (interleaved"
        " thinking); /tokenize still renders it"
    ),
    "usage-ignores-history": (
        "chat usage.prompt_tokens counts only the conversation's last message (and the generation prompt), not the"
        " history before it: the prompt is still read whole"
    ),
    "prompt-markers-end-reasoning": (
        "streamed chat: the reasoning parser decides from the whole prompt whether reasoning has ended, so a prompt"
        " that holds </think> (a system prompt explaining the format, reasoning sent back in the history) sends the"
        " reasoning, markers and all, into content (seed 000 §3.2)"
    ),
    "prefix-cache-changes-answer": (
        "a prefix-cache hit loses the cached blocks' contents: the model reads only the prompt after them, so the"
        " same greedy request answers differently once its prefix is cached"
    ),
    "prefix-cache-never-hits": (
        "the prefix cache is looked up and never hits: cached_tokens is always 0 and vllm:prefix_cache_hits never"
        " grows, while vllm:prefix_cache_queries does"
    ),
    "thinking-budget-ignored": (
        "thinking_token_budget is accepted and ignored: the reasoning runs its whole length past the budget"
    ),
    # Load that tells reasoning from answer (issue 41): figures the load reports beside TTFT.
    "content-at-end": (
        "streamed chat: the reasoning streams as it is generated, but the answer (content) is held back and sent"
        " in one delta once its last token is generated, and usage still counts the reasoning tokens: TTFT looks"
        " as before, the first content token comes at the end (a reasoning parser that buffers the answer)"
    ),
    "spec-decode-rejects": (
        "speculative decoding's acceptance falls to a quarter (0.8 to 0.2 by default): /metrics counts a quarter"
        " as many accepted tokens per draft token (a draft model that no longer matches the served one); the"
        " replies are unchanged"
    ),
    # Faults that answer 4xx (issue 26): not a refusal of the capability, so not "not served".
    "tool-parser-400": (
        "every chat request that offers tools (tool_choice other than 'none') is answered 400 in vLLM's error"
        f" shape: {TOOL_PARSER_CRASH!r} (a tool parser that crashes)"
    ),
    "media-decode-400": (
        "every chat request with an image or video part is answered 400"
        f" {MEDIA_DECODE_CRASH!r}, though the media are valid (a broken decoder)"
    ),
    "firewall-403": (
        f"POST {FIREWALLED_PATH} is answered 403 with the plain-text body 'Forbidden' (a proxy or firewall in"
        " front of the engine)"
    ),
    # Issue 39: a probe's "broken" fails the gate; a check with nothing to look at does not pass.
    "tokenize-500": (
        f"POST /tokenize is answered 500 in vLLM's error shape: {TOKENIZE_CRASH!r} (a tokenize endpoint that"
        " raises); chat, completions and their usage are unaffected"
    ),
    "tools-answered-in-text": (
        "the model never calls a tool: every request that offers tools is answered in text as if tool_choice were"
        " 'none' (a model never trained for function calling), streamed and not, whatever tool_choice says"
    ),
    # Thinking switches that fault (issue 39): not a refusal of the switch, so not "not served".
    "thinking-switch-template-400": (
        f"every chat request whose chat_template_kwargs carries a thinking switch ({', '.join(THINKING_SWITCH_KWARGS)})"
        f" is answered 400 in vLLM's words for a chat template that crashes: {THINKING_TEMPLATE_CRASH!r}"
    ),
    "thinking-on-500": (
        "the model does not reason by default, and every chat request that turns thinking on (enable_thinking or"
        f" thinking true, thinking_mode enabled or adaptive) is answered 500 {THINKING_ON_FAILURE!r}; turning it"
        " off works"
    ),
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
