"""How vLLM and SGLang differ on the wire, written down as data.

Every difference the reference engine imitates lives in one `Convention` record, so
the server code never asks which engine it is pretending to be. Sources checked:
vLLM `entrypoints/openai/engine/protocol.py` (nested `{"error": {...}}` body,
`ModelCard`, `reasoning` field), vLLM and SGLang API-key middlewares (both answer
401 `{"error": "Unauthorized"}`), SGLang `openai_api/protocol.py` (flat
`{"object": "error", ...}` body of the 0.4/0.5 releases, `reasoning_content`, null
fields kept in stream deltas) and SGLang `/get_server_info`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CONVENTIONS",
    "NO_REASONING_CONFIG",
    "REFERENCE_ENGINE_NAME",
    "REFERENCE_VERSION",
    "UNAUTHORIZED_BODY",
    "Convention",
    "get_convention",
]

# "+reference" makes any report that records the version say which engine answered.
REFERENCE_VERSION = "0.1.0+reference"
REFERENCE_ENGINE_NAME = "engine-acceptance reference engine"

# vLLM 0.32 (v1/engine/input_processor.py) for a thinking_token_budget sent to a server started without
# --reasoning-parser (answered 400): what the reference engine says when it serves a model that never reasons.
NO_REASONING_CONFIG = ("thinking_token_budget is set but reasoning_config is not configured. Please set "
                       "--reasoning-parser and/or --reasoning-config to use thinking_token_budget.")

# Both engines' API-key middlewares answer with this exact body, not the error model.
UNAUTHORIZED_BODY: dict[str, Any] = {"error": "Unauthorized"}

ErrorShape = Literal["nested", "flat"]
EffortSource = Literal["chat_template_kwargs", "top_level"]


@dataclass(frozen=True)
class Convention:
    """One engine's conventions, as the reference engine imitates them."""

    name: str
    owned_by: str
    # Field that carries reasoning in messages and stream deltas.
    reasoning_field: str
    # GET endpoints that report the engine version; they stay open without a key.
    version_paths: tuple[str, ...]
    # "nested": {"error": {message, type, param, code}} (vLLM >= 0.10);
    # "flat": {"object": "error", message, type, param, code} (SGLang 0.4/0.5).
    error_shape: ErrorShape
    # Where `reasoning_effort` is read from; the other place is ignored, as the
    # real engine would, so a profile that sends it to the wrong place is caught.
    reasoning_effort_source: EffortSource
    # vLLM answers 404 for a model it does not serve; SGLang ignores the name.
    rejects_unknown_model: bool
    # SGLang serialises every delta field, with nulls; vLLM drops unset ones.
    delta_explicit_nulls: bool
    # SGLang chunks carry "usage": null until the usage chunk; vLLM omits it.
    chunk_usage_null: bool
    # Value of message.tool_calls when there are none.
    empty_tool_calls: list[Any] | None
    # Response field of POST /detokenize.
    detokenize_field: str
    # Prefix of tool-call ids: vLLM "chatcmpl-tool-<hex>", SGLang "call_<hex>".
    tool_call_id_prefix: str = "call_"
    # Which chunks stream_options.continuous_usage_stats gives usage: vLLM "every_chunk" (the role
    # chunk, each output chunk, each finish chunk); SGLang "output_chunks" (reasoning, content, tool calls).
    continuous_usage: str = "every_chunk"
    # --no-structured-outputs: the engine's own 400 for response_format when it has no grammar backend
    # (each text is in that engine's profile under refusals.structured_outputs).
    no_structured_outputs: str = ""
    # The request field that caps the reasoning's tokens (vLLM's top-level thinking_token_budget); None: the
    # engine has none and ignores the field, as SGLang's request model ignores fields it does not know.
    thinking_budget_field: str | None = None

    def error_body(
        self, message: str, *, err_type: str, status: int, param: str | None = None
    ) -> dict[str, Any]:
        """The JSON error body this engine sends with HTTP `status`."""
        info = {"message": message, "type": err_type, "param": param, "code": status}
        if self.error_shape == "nested":
            return {"error": info}
        return {"object": "error", **info}

    def version_body(self, *, model: str, max_model_len: int, tokenizer_path: str) -> dict[str, Any]:
        """Body of the version endpoint(s)."""
        if self.name == "sglang":
            # /get_server_info is server_args plus "version"; keep the fields a
            # report reads, and say plainly which engine this is.
            return {
                "version": REFERENCE_VERSION,
                "model_path": model,
                "served_model_name": model,
                "tokenizer_path": tokenizer_path,
                "context_length": max_model_len,
                "engine": REFERENCE_ENGINE_NAME,
            }
        return {"version": REFERENCE_VERSION}


CONVENTIONS: dict[str, Convention] = {
    "vllm": Convention(
        name="vllm",
        owned_by="vllm",
        reasoning_field="reasoning",
        version_paths=("/version",),
        error_shape="nested",
        reasoning_effort_source="chat_template_kwargs",
        rejects_unknown_model=True,
        delta_explicit_nulls=False,
        chunk_usage_null=False,
        empty_tool_calls=[],
        detokenize_field="prompt",
        tool_call_id_prefix="chatcmpl-tool-",
        # vLLM 0.32 cannot be started without a structured-output backend, so it has no such refusal:
        # this 400 is no vLLM refusal, and discovery calls it broken (state it: --not-served).
        no_structured_outputs=("response_format 'json_schema' is not supported: this server has no "
                               "structured-output backend"),
        thinking_budget_field="thinking_token_budget",
    ),
    "sglang": Convention(
        name="sglang",
        owned_by="sglang",
        reasoning_field="reasoning_content",
        version_paths=("/get_server_info", "/server_info"),
        error_shape="flat",
        reasoning_effort_source="top_level",
        rejects_unknown_model=False,
        delta_explicit_nulls=True,
        chunk_usage_null=True,
        empty_tool_calls=None,
        detokenize_field="text",
        continuous_usage="output_chunks",
        # SGLang's scheduler when launched with --grammar-backend none (answered 400 BadRequestError).
        no_structured_outputs=("Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported "
                               "when the server is launched with --grammar-backend none"),
    ),
}


def get_convention(name: str) -> Convention:
    """The convention called `name`; ValueError listing the valid names otherwise."""
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown convention {name!r}; valid: {', '.join(sorted(CONVENTIONS))}"
        ) from None
