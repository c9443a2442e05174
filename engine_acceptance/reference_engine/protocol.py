"""Request parsing and validation, with the status codes and messages real engines use.

Handlers get typed, validated requests or a `RequestError`, which the server turns
into the imitated engine's error body. Messages follow vLLM's wording where the
suite or a user might compare them (unknown model, context length, vocabulary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from .chat_template import HISTORY_REASONING_KEYS, MEDIA_PLACEHOLDERS, ROLE_MARKERS
from .config import ReferenceEngineConfig
from .conventions import NO_REASONING_CONFIG, Convention
from .tokenizer import ReferenceTokenizer
from .media_facts import SeenMedia, UndecodableMedia
from .vision import perceive_part

__all__ = [
    "NOT_MULTIMODAL",
    "ChatRequest",
    "CompletionRequest",
    "DetokenizeRequest",
    "MediaRequestError",
    "PromptInput",
    "RequestError",
    "ResponseFormat",
    "Sampling",
    "TokenizeRequest",
    "output_budget",
    "parse_chat_request",
    "parse_completion_request",
    "parse_detokenize_request",
    "parse_tokenize_request",
]

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions
# Choices per request: enough for the suite's n>1 checks, bounded so one request stays small.
MAX_N = 16
# vLLM's default --max-logprobs.
MAX_LOGPROBS = 20
# Below this temperature vLLM samples greedily (its _SAMPLING_EPS).
GREEDY_EPS = 1e-5
# vLLM 0.32 (multimodal/registry.py, create_processor) raises this ValueError for the first
# image or video part sent to a text-only model, before the media is fetched or decoded;
# the server answers it as 400 BadRequestError with param null.
NOT_MULTIMODAL = "{model} is not a multimodal model"
# Media items one prompt may carry, as a vLLM deployment's --limit-mm-per-prompt sets them, and
# vLLM 0.32's words (multimodal/processing) for one more: a 400 before anything is decoded.
MEDIA_LIMITS = {"image": 8, "video": 2}
OVER_MEDIA_LIMIT = "At most {limit} {kind}(s) may be provided in one prompt."


class RequestError(Exception):
    """A request the engine refuses; becomes an error body with `status`."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        err_type: str = "BadRequestError",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.err_type = err_type
        self.param = param
        # error-body-plain: sent as text/plain instead of the engine's error object.
        self.plain = False


class MediaRequestError(RequestError):
    """Client media the engine refuses: a 400, like vLLM (defects may change that); `fault` says what is wrong."""

    def __init__(self, message: str, *, fault: str, param: str | None = "messages") -> None:
        super().__init__(message, param=param)
        # MediaFault's words, or "over-limit": more items of a kind than one prompt takes.
        self.fault = fault


# --- small typed getters -----------------------------------------------------------

def _type_error(key: str, expected: str, value: Any) -> RequestError:
    return RequestError(
        f"'{key}' must be {expected}, got {type(value).__name__}", param=key
    )


def _opt_bool(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _type_error(key, "a boolean", value)
    return value


def _opt_dict(body: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _type_error(key, "an object", value)
    return value


def _opt_str(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _type_error(key, "a string", value)
    return value


def _check_model(body: Mapping[str, Any], config: ReferenceEngineConfig, convention: Convention) -> str:
    """The served model name; 404 like vLLM for another name (SGLang ignores it)."""
    requested = _opt_str(body, "model")
    if requested is not None and requested != config.model and convention.rejects_unknown_model:
        raise RequestError(
            f"The model `{requested}` does not exist.",
            status=404,
            err_type="NotFoundError",
            param="model",
        )
    return config.model


def _stream_settings(body: Mapping[str, Any]) -> tuple[bool, bool]:
    stream = _opt_bool(body, "stream", False)
    options = _opt_dict(body, "stream_options")
    if options is not None and not stream:
        raise RequestError(
            "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    include_usage = bool(options and options.get("include_usage"))
    return stream, include_usage


def _number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _type_error(key, "a number", value)
    return float(value)


def _integer(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _type_error(key, "an integer", value)
    return value


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters the reference engine honours, validated as vLLM's SamplingParams does."""

    temperature: float | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    # None: no logprobs asked; k: logprobs with the k most likely tokens of each step (0: none).
    logprobs: int | None = None
    seed: int | None = None


def _sampling_checks(body: Mapping[str, Any]) -> Sampling:
    # vLLM's SamplingParams._verify_args wording: "<name> must be ..., got <value>." (HTTP 400).
    temperature = _number(body, "temperature")
    if temperature is not None and not temperature >= 0.0:
        raise RequestError(f"temperature must be non-negative, got {temperature}.", param="temperature")
    top_p = _number(body, "top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise RequestError(f"top_p must be in (0, 1], got {top_p}.", param="top_p")
    n = _integer(body, "n")
    if n is not None and n < 1:
        raise RequestError(f"n must be at least 1, got {n}.", param="n")
    if n is not None and n > MAX_N:
        raise RequestError(f"n must be at most {MAX_N}, got {n}.", param="n")
    if n is not None and n > 1 and temperature is not None and temperature < GREEDY_EPS:
        # vLLM's SamplingParams._verify_greedy_sampling: n identical greedy choices are refused.
        raise RequestError(f"n must be 1 when using greedy sampling, got {n}.", param="n")
    return Sampling(temperature=temperature, n=n or 1, stop=_stop_strings(body), logprobs=_logprobs(body),
                    seed=_integer(body, "seed"))


def _logprobs(body: Mapping[str, Any]) -> int | None:
    """The number of top log-probabilities asked for (vLLM's ChatCompletionRequest.check_logprobs wording)."""
    asked = body.get("logprobs")
    if asked is not None and not isinstance(asked, bool):
        raise _type_error("logprobs", "a boolean", asked)
    top = _integer(body, "top_logprobs")
    if top is not None and top < 0:
        raise RequestError("`top_logprobs` must be a positive value.", param="top_logprobs")
    if top and not asked:
        raise RequestError("when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs")
    if top is not None and top > MAX_LOGPROBS:
        raise RequestError(f"Requested sample logprobs of {top}, which is greater than max allowed: {MAX_LOGPROBS}",
                           param="top_logprobs")
    return (top or 0) if asked else None


def _stop_strings(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(item, str) for item in stop):
        raise RequestError("'stop' must be a string or a list of strings", param="stop")
    if any(not item for item in stop):
        raise RequestError("stop cannot contain an empty string.", param="stop")
    return tuple(stop)


def _max_tokens(body: Mapping[str, Any], key: str) -> int | None:
    value = _integer(body, key)
    if value is not None and value < 1:
        raise RequestError(f"{key} must be at least 1, got {value}.", param=key)
    return value


# --- chat ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    model: str
    stream: bool
    include_usage: bool
    # None: as many as the context allows, like vLLM.
    max_tokens: int | None
    temperature: float | None
    chat_template_kwargs: dict[str, Any]
    reasoning_effort: str | None
    raw: dict[str, Any]
    # Every image and video of the conversation, decoded, in order.
    media: tuple[SeenMedia, ...] = ()
    sampling: Sampling = Sampling()
    response_format: ResponseFormat | None = None
    # stream_options.continuous_usage_stats (vLLM and SGLang): usage in the stream's chunks too.
    continuous_usage: bool = False
    # The reasoning's token budget (vLLM's thinking_token_budget); None: unlimited or not taken.
    thinking_budget: int | None = None


def _validate_content(content: Any, index: int, seen_media: list[SeenMedia] | None = None,
                      text_only_model: str | None = None, check_media_type: bool = True) -> None:
    """Check one message's content; decode its media parts into `seen_media`.

    With `text_only_model` (the served name of a text-only model) any media part is refused;
    `check_media_type` checks each data URL's declared type against its part.
    """
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise RequestError(
            f"messages[{index}].content must be a string, a list of parts or null",
            param="messages",
        )
    for part_index, part in enumerate(content):
        where = f"messages[{index}].content[{part_index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise RequestError(f"{where} must be an object with a 'type'", param="messages")
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise RequestError(f"{where}.text must be a string", param="messages")
        elif kind in MEDIA_PLACEHOLDERS:
            if text_only_model is not None:
                raise RequestError(NOT_MULTIMODAL.format(model=text_only_model))
            media = part.get(kind)
            if not isinstance(media, dict) or not isinstance(media.get("url"), str):
                raise RequestError(f"{where}.{kind}.url must be a string", param="messages")
            # Decoded for real, as vLLM does before the model runs: corrupt input is
            # the client's error (400), not the server's.
            try:
                seen = perceive_part(kind, media["url"], index, check_declared_type=check_media_type)
            except UndecodableMedia as exc:
                raise MediaRequestError(f"{where}: {exc}", fault=exc.fault) from None
            if seen_media is not None:
                seen_media.append(seen)
        else:
            raise RequestError(f"Unknown part type: {kind}", param="messages")


def _validate_messages(messages: Any, seen_media: list[SeenMedia] | None = None,
                       text_only_model: str | None = None, check_media_type: bool = True) -> list[dict[str, Any]]:
    if messages is None:
        raise RequestError("Field required: 'messages'", param="messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list", param="messages")
    _check_media_limits(messages)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{index}] must be an object", param="messages")
        role = message.get("role")
        if role not in ROLE_MARKERS:
            raise RequestError(
                f"messages[{index}].role must be one of {', '.join(ROLE_MARKERS)}, got {role!r}",
                param="messages",
            )
        _validate_content(message.get("content"), index, seen_media, text_only_model, check_media_type)
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, list):
            raise RequestError(f"messages[{index}].tool_calls must be a list", param="messages")
        for key in HISTORY_REASONING_KEYS:
            if message.get(key) is not None and not isinstance(message[key], str):
                raise RequestError(f"messages[{index}].{key} must be a string or null", param="messages")
    _check_tool_results(messages)
    return messages


def _media_counts(messages: list[Any]) -> dict[str, int]:
    """Media parts by kind (image, video) in the messages."""
    counts = {"image": 0, "video": 0}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("image_url", "video_url"):
                counts[kind.removesuffix("_url")] += 1
    return counts


def _check_media_limits(messages: list[Any]) -> None:
    """More media of a kind in one prompt than MEDIA_LIMITS allows is refused before any is decoded."""
    counts = _media_counts(messages)
    for kind, limit in MEDIA_LIMITS.items():
        if counts[kind] > limit:
            raise MediaRequestError(OVER_MEDIA_LIMIT.format(limit=limit, kind=kind), fault="over-limit", param=kind)


def _check_tool_results(messages: list[dict[str, Any]]) -> None:
    """Every ``role: tool`` message answers a call an earlier assistant message made (OpenAI's rule)."""
    called: set[str] = set()
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            called |= {call.get("id") for call in message.get("tool_calls") or [] if isinstance(call, dict)}
        elif message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in called:
                raise RequestError(
                    f"messages[{index}]: a message with role 'tool' must answer a tool call of an earlier"
                    f" assistant message, and its tool_call_id {call_id!r} matches none",
                    param="messages",
                )


# --- structured outputs ------------------------------------------------------------------

@dataclass(frozen=True)
class ResponseFormat:
    """``response_format`` of a chat request: ``json_object``, or ``json_schema`` with its schema."""

    kind: str
    schema: dict[str, Any] | None = None


def _response_format(body: Mapping[str, Any], *, refusal: str | None = None) -> ResponseFormat | None:
    """The request's response_format; `refusal` (the convention's words) refuses json_object/json_schema."""
    spec = _opt_dict(body, "response_format")
    if spec is None:
        return None
    kind = spec.get("type")
    if kind == "text":
        return None
    if refusal is not None and kind in ("json_object", "json_schema"):
        # --no-structured-outputs: the engine's own refusal (param None, as both engines send it).
        raise RequestError(refusal)
    if kind == "json_object":
        return ResponseFormat("json_object")
    if kind != "json_schema":
        raise RequestError(
            f"response_format.type must be one of text, json_object, json_schema, got {kind!r}",
            param="response_format",
        )
    wrapper = spec.get("json_schema")
    if not isinstance(wrapper, dict) or not isinstance(wrapper.get("schema"), dict):
        # vLLM answers this 400 (issue 35438 reported a 500 before): the schema sits under json_schema.schema.
        raise RequestError(
            "When response_format type is 'json_schema', 'json_schema' must be provided with a 'schema' object",
            param="response_format",
        )
    schema = wrapper["schema"]
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        # The structured-output backend cannot compile it: the client's error (vLLM issue 57725 is the 500).
        raise RequestError(
            f"Invalid JSON schema in response_format: {exc.message}", param="response_format"
        ) from None
    return ResponseFormat("json_schema", schema)


def _text_only_model(config: ReferenceEngineConfig) -> str | None:
    return config.model if config.text_only else None


def parse_chat_request(
    body: Mapping[str, Any], *, config: ReferenceEngineConfig, convention: Convention, check_media_type: bool = True
) -> ChatRequest:
    model = _check_model(body, config, convention)
    seen_media: list[SeenMedia] = []
    messages = _validate_messages(body.get("messages"), seen_media, _text_only_model(config), check_media_type)
    stream, include_usage = _stream_settings(body)
    max_tokens = _max_tokens(body, "max_tokens")
    # vLLM: max_completion_tokens wins when both are given.
    max_completion = _max_tokens(body, "max_completion_tokens")
    sampling = _sampling_checks(body)
    return ChatRequest(
        messages=messages,
        model=model,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_completion if max_completion is not None else max_tokens,
        temperature=sampling.temperature,
        chat_template_kwargs=_opt_dict(body, "chat_template_kwargs") or {},
        reasoning_effort=_opt_str(body, "reasoning_effort"),
        raw=dict(body),
        media=tuple(seen_media),
        sampling=sampling,
        response_format=_response_format(
            body, refusal=None if config.structured_outputs else convention.no_structured_outputs),
        continuous_usage=_continuous_usage(body),
        thinking_budget=_thinking_budget(body, convention, reasoning=config.reasoning),
    )


def _thinking_budget(body: Mapping[str, Any], convention: Convention, *, reasoning: bool) -> int | None:
    """The reasoning budget where the convention reads one (vLLM's SamplingParams wording), else None."""
    field = convention.thinking_budget_field
    if field is None or body.get(field) is None:
        return None
    value = body[field]
    if not isinstance(value, int) or isinstance(value, bool) or value < -1:
        raise RequestError(f"`{field}` must be a non-negative integer or -1 for unlimited. "
                           f"(parameter={field}, value={value})", param=field)
    if not reasoning:
        # A server with no reasoning parser has no reasoning to budget (vLLM's input processor).
        raise RequestError(NO_REASONING_CONFIG)
    return None if value == -1 else value


def _continuous_usage(body: Mapping[str, Any]) -> bool:
    """Whether a streamed request asks for usage in every chunk (vLLM: only together with include_usage)."""
    options = _opt_dict(body, "stream_options") or {}
    value = options.get("continuous_usage_stats")
    if value is not None and not isinstance(value, bool):
        raise _type_error("stream_options.continuous_usage_stats", "a boolean", value)
    return bool(value)


# --- completions -----------------------------------------------------------------------

@dataclass(frozen=True)
class PromptInput:
    """One completions prompt: its token ids, and its text when given as text."""

    ids: list[int]
    text: str | None


def _check_ids(ids: Sequence[Any], tokenizer: ReferenceTokenizer) -> list[int]:
    if not ids:
        raise RequestError("Prompt cannot be empty.", param="prompt")
    for token_id in ids:
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise RequestError("Token ids must be integers.", param="prompt")
    bad = tokenizer.invalid_ids(ids)
    if bad:
        raise RequestError(f"Token id {bad[0]} is out of vocabulary", param="prompt")
    return list(ids)


def _text_prompt(text: str, tokenizer: ReferenceTokenizer) -> PromptInput:
    if not text:
        raise RequestError("Prompt cannot be empty.", param="prompt")
    return PromptInput(ids=tokenizer.encode(text), text=text)


def _parse_prompts(prompt: Any, tokenizer: ReferenceTokenizer) -> list[PromptInput]:
    if isinstance(prompt, str):
        return [_text_prompt(prompt, tokenizer)]
    if not isinstance(prompt, list) or not prompt:
        raise RequestError(
            "'prompt' must be a string, a list of token ids, a list of strings"
            " or a list of token-id lists",
            param="prompt",
        )
    if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
        return [PromptInput(ids=_check_ids(prompt, tokenizer), text=None)]
    if all(isinstance(p, str) for p in prompt):
        return [_text_prompt(p, tokenizer) for p in prompt]
    if all(isinstance(p, list) for p in prompt):
        return [PromptInput(ids=_check_ids(p, tokenizer), text=None) for p in prompt]
    raise RequestError("'prompt' mixes strings, token ids and lists", param="prompt")


@dataclass(frozen=True)
class CompletionRequest:
    prompts: list[PromptInput]
    model: str
    stream: bool
    include_usage: bool
    max_tokens: int
    ignore_eos: bool
    temperature: float | None
    raw: dict[str, Any]


def parse_completion_request(
    body: Mapping[str, Any],
    *,
    config: ReferenceEngineConfig,
    convention: Convention,
    tokenizer: ReferenceTokenizer,
) -> CompletionRequest:
    model = _check_model(body, config, convention)
    if body.get("prompt") is None:
        raise RequestError("Field required: 'prompt'", param="prompt")
    stream, include_usage = _stream_settings(body)
    max_tokens = _max_tokens(body, "max_tokens")
    sampling = _sampling_checks(body)
    if sampling.n != 1:
        raise RequestError("The reference engine's completions take n=1 only.", param="n")
    return CompletionRequest(
        prompts=_parse_prompts(body["prompt"], tokenizer),
        model=model,
        stream=stream,
        include_usage=include_usage,
        max_tokens=DEFAULT_COMPLETION_MAX_TOKENS if max_tokens is None else max_tokens,
        ignore_eos=_opt_bool(body, "ignore_eos", False),
        temperature=sampling.temperature,
        raw=dict(body),
    )


def output_budget(prompt_tokens: int, max_tokens: int | None, max_model_len: int) -> int:
    """Tokens the reply may use; 400 like vLLM when the context cannot hold it."""
    if prompt_tokens >= max_model_len:
        raise RequestError(
            f"This model's maximum context length is {max_model_len} tokens. However, your"
            f" request has {prompt_tokens} input tokens. Please reduce the length of the"
            " input messages.",
            param="messages",
        )
    if max_tokens is None:
        return max_model_len - prompt_tokens
    if prompt_tokens + max_tokens > max_model_len:
        raise RequestError(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This"
            f" model's maximum context length is {max_model_len} tokens and your request"
            f" has {prompt_tokens} input tokens ({max_tokens} > {max_model_len} -"
            f" {prompt_tokens}).",
            param="max_tokens",
        )
    return max_tokens


# --- tokenize / detokenize ----------------------------------------------------------------

@dataclass(frozen=True)
class TokenizeRequest:
    prompt: str | None
    messages: list[dict[str, Any]] | None
    add_generation_prompt: bool
    return_token_strs: bool


def parse_tokenize_request(
    body: Mapping[str, Any], *, config: ReferenceEngineConfig, convention: Convention
) -> TokenizeRequest:
    _check_model(body, config, convention)
    has_prompt = body.get("prompt") is not None
    has_messages = body.get("messages") is not None
    if has_prompt == has_messages:
        raise RequestError("Either 'prompt' or 'messages' must be provided, not both.")
    return TokenizeRequest(
        prompt=_opt_str(body, "prompt"),
        messages=_validate_messages(body["messages"], None, _text_only_model(config)) if has_messages else None,
        add_generation_prompt=_opt_bool(body, "add_generation_prompt", True),
        return_token_strs=_opt_bool(body, "return_token_strs", False),
    )


@dataclass(frozen=True)
class DetokenizeRequest:
    tokens: list[int]


def parse_detokenize_request(
    body: Mapping[str, Any],
    *,
    config: ReferenceEngineConfig,
    convention: Convention,
    tokenizer: ReferenceTokenizer,
) -> DetokenizeRequest:
    _check_model(body, config, convention)
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise RequestError("'tokens' must be a list of token ids", param="tokens")
    if not tokens:
        return DetokenizeRequest(tokens=[])
    return DetokenizeRequest(tokens=_check_ids(tokens, tokenizer))
