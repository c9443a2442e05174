"""Self-tests of capability discovery (engine_acceptance/capabilities/discovery.py and probes/).

Against the reference engine started with the launcher, as the suite starts it:
everything served under a model name no profile matches, then each option that
takes a capability away (--text-only, --no-tool-parser, --no-tokenize,
--no-reasoning) and faults and defects that break it (media-ignored: an image answered 200
but never read). The classification of single replies and
the thinking-switch logic are also tested on crafted exchanges, where the engine
cannot be made to answer that way.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.capabilities.discovery import Discovery, discover
from engine_acceptance.capabilities.probes.base import Probe, classify_exchange
from engine_acceptance.capabilities.probes.chat_features import THINKING_SWITCHES, SwitchTrial, judge_reasoning
from engine_acceptance.capabilities.probes.media import classify_media
from engine_acceptance.capabilities.probes.responses import classify_responses
from engine_acceptance.capabilities.probes.structured import classify_structured
from engine_acceptance.capabilities.probes.tokenize import classify_tokenize
from engine_acceptance.wire.tokenize_api import TokenizeApi
from engine_acceptance.capabilities.registry import probed_capabilities
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget, Exchange
from engine_acceptance.media.library import MEDIA_DIR
from engine_acceptance.profiles.profile import choose_model_profile, load_engine_profile
from engine_acceptance.profiles.refusals import Refusal, RefusalRules
from engine_acceptance.wire.reassembly import reply_from_body
from engine_acceptance.reference_engine import RunningReferenceEngine, start_reference_engine

UNPROFILED = "acme-chat-7b"
TIMEOUTS = ClientTimeouts(connect=5.0, idle=10.0, total=20.0)
AUTO_TOOLS_REFUSAL = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
# The refusals the classification tests recognize: the vLLM engine profile's, as shipped.
VLLM = load_engine_profile("vllm").refusal_rules


class Engines:
    """Reference engines started on first use, one per set of options, stopped at the end."""

    def __init__(self) -> None:
        self._running: dict[str, RunningReferenceEngine] = {}

    def get(self, **options: Any) -> RunningReferenceEngine:
        key = json.dumps(options, sort_keys=True)
        if key not in self._running:
            self._running[key] = start_reference_engine(model=UNPROFILED, **options)
        return self._running[key]

    def stop_all(self) -> None:
        for engine in self._running.values():
            engine.stop()


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    registry = Engines()
    yield registry
    registry.stop_all()


def run_discovery(engines: Engines, *, engine_profile: str = "vllm", **options: Any) -> Discovery:
    engine = engines.get(**options)
    target = EngineTarget(base_url=engine.url, model=UNPROFILED, timeouts=TIMEOUTS)
    return asyncio.run(discover(target, load_engine_profile(engine_profile), advertised_context=32768,
                                media_dir=MEDIA_DIR))


def states(discovery: Discovery) -> dict[str, str]:
    return {name: state for name, state, _ in discovery.table_rows()}


# --- against the reference engine -----------------------------------------------------------

def test_everything_is_served_under_a_model_name_no_profile_matches(engines: Engines) -> None:
    assert choose_model_profile(UNPROFILED, None).name == "generic"
    discovery = run_discovery(engines)
    assert states(discovery) == {entry.name: "served" for entry in probed_capabilities()}, discovery.table_rows()
    thinking = discovery.settings("thinking_modes")
    switch = next(s for s in THINKING_SWITCHES if s.name == thinking["switch"])
    assert thinking["modes"] == {"enabled": switch.enabled, "disabled": switch.disabled}
    assert discovery.settings("reasoning")["default_on"] is True
    assert discovery.settings("tokenize") == {"endpoint": "/tokenize", "body": "prompt"}
    assert discovery.settings("video") == {"content_type": "video_url"}
    assert discovery.advertised_context == 32768
    assert discovery.elapsed_s < 2.0, f"discovery took {discovery.elapsed_s:.2f}s on the reference engine"


def test_text_only_engine_refuses_image_and_video_in_vllms_words(engines: Engines) -> None:
    discovery = run_discovery(engines, text_only=True)
    found = states(discovery)
    assert found["image"] == found["video"] == "not_served"
    for capability in ("image", "video"):
        evidence = discovery.probes[capability].evidence
        assert f"HTTP 400: {UNPROFILED} is not a multimodal model" in evidence, evidence
    assert {found[c] for c in ("tools", "reasoning", "thinking_modes", "tokenize")} == {"served"}


def test_engine_without_tool_parser_refuses_tools_in_vllms_words(engines: Engines) -> None:
    discovery = run_discovery(engines, tool_parser=False)
    assert discovery.probes["tools"] == Probe("tools", "not_served", f"HTTP 400: {AUTO_TOOLS_REFUSAL}")
    assert states(discovery)["image"] == "served"


def test_engine_without_tokenize_endpoint_is_not_served_with_its_404(engines: Engines) -> None:
    discovery = run_discovery(engines, tokenize=False)
    assert discovery.probes["tokenize"] == Probe("tokenize", "not_served", "POST /tokenize: HTTP 404: Not Found")
    assert states(discovery)["tools"] == "served"


def test_model_that_never_reasons_has_neither_reasoning_nor_thinking_modes(engines: Engines) -> None:
    discovery = run_discovery(engines, reasoning=False)
    assert discovery.probes["reasoning"] == Probe("reasoning", "not_served", "no reasoning in the reply")
    assert discovery.state("thinking_modes") == "not_served"
    assert discovery.settings("thinking_modes") == {}
    assert states(discovery)["image"] == "served"


def test_sglang_convention_reasoning_content_and_flat_error_bodies(engines: Engines) -> None:
    discovery = run_discovery(engines, engine_profile="sglang", convention="sglang", text_only=True)
    assert discovery.settings("reasoning")["fields"] == ["reasoning_content"]
    assert f"HTTP 400: {UNPROFILED} is not a multimodal model" in discovery.probes["image"].evidence


def test_generic_engine_profile_probes_video_as_video_url_and_still_finds_tokenize(engines: Engines) -> None:
    # vLLM's and SGLang's video_url: an unknown server that is one of them takes it, and the probe can tell.
    discovery = run_discovery(engines, engine_profile="generic")
    assert discovery.state("video") == "served" and discovery.settings("video") == {"content_type": "video_url"}
    assert discovery.settings("tokenize") == {"endpoint": "/tokenize", "body": "prompt"}


def test_an_engine_profile_naming_no_video_content_type_says_why_video_is_not_probed(engines: Engines) -> None:
    discovery = run_discovery(engines, engine_profile="llamacpp")
    assert discovery.probes["video"] == Probe(
        "video", "not_probed", "engine profile 'llamacpp' names no video content type: set "
        "features.video_content_type (e.g. video_url) in an engine profile of your own (--profiles-dir) to probe "
        "and test video")


def test_503_storm_makes_every_chat_capability_broken_not_skipped(engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["503-storm"])
    for capability in ("tools", "image", "video", "reasoning", "thinking_modes"):
        probe = discovery.probes[capability]
        assert probe.state == "broken" and "HTTP 503" in probe.evidence, probe
        assert discovery.served(capability)
    # Transport faults touch chat completions only.
    assert discovery.state("tokenize") == "served"


@pytest.mark.parametrize(("convention", "engine_profile"), [("vllm", "vllm"), ("sglang", "sglang")])
def test_image_and_video_are_served_when_they_cost_prompt_tokens(engines: Engines, convention: str,
                                                                 engine_profile: str) -> None:
    discovery = run_discovery(engines, engine_profile=engine_profile, convention=convention)
    for capability, name in (("image", "pure-red-512.png"), ("video", "video-rgb-16f.webm")):
        probe = discovery.probes[capability]
        # The reference template renders a placeholder token per image or video: one more than the text alone.
        assert probe.state == "served", probe
        assert re.match(rf"{name}: prompt_tokens (\d+) with the {capability}, (\d+) without; HTTP 200",
                        probe.evidence), probe


def test_media_answered_but_dropped_is_broken_with_the_token_counts(engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["media-ignored"])
    for capability, part in (("image", "image_url"), ("video", "video_url")):
        probe = discovery.probes[capability]
        assert probe.state == "broken" and discovery.served(capability), probe
        assert re.fullmatch(rf".*: {part} part dropped: prompt_tokens (\d+) with the {capability}, \1 without "
                            rf"\(the engine answered 200 but did not read the {capability}\)", probe.evidence), probe
    assert states(discovery)["tools"] == "served"


def test_error_body_under_200_is_broken(engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["error-body-200"])
    probe = discovery.probes["tools"]
    assert probe.state == "broken" and "error body instead of a reply" in probe.evidence, probe


def test_engine_without_structured_outputs_refuses_response_format_in_sglangs_words(engines: Engines) -> None:
    words = ("Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the "
             "server is launched with --grammar-backend none")
    discovery = run_discovery(engines, engine_profile="sglang", convention="sglang", structured_outputs=False)
    assert discovery.probes["structured_outputs"] == Probe("structured_outputs", "not_served", f"HTTP 400: {words}")
    assert states(discovery)["tools"] == "served"


def test_a_vllm_refusing_response_format_is_broken_since_vllm_has_no_such_refusal(engines: Engines) -> None:
    # vLLM 0.32 always has a structured-output backend: a 400 to the probe is a fault, not a refusal.
    probe = run_discovery(engines, structured_outputs=False).probes["structured_outputs"]
    assert probe.state == "broken", probe
    assert probe.evidence.startswith("HTTP 400: response_format 'json_schema' is not supported"), probe
    assert probe.evidence.endswith("run with --not-served structured_outputs (or not_served: [structured_outputs] "
                                   "in the model profile)"), probe


def test_engine_without_the_responses_api_answers_404_in_its_words(engines: Engines) -> None:
    discovery = run_discovery(engines, responses=False)
    assert discovery.probes["responses"] == Probe("responses", "not_served", "POST /v1/responses: HTTP 404: Not Found")
    assert states(discovery)["tools"] == "served"


def test_the_responses_probe_reads_the_reference_engines_response(engines: Engines) -> None:
    probe = run_discovery(engines).probes["responses"]
    # The reference model reasons first; 32 tokens cut it: incomplete, still a response object.
    assert probe.state == "served" and probe.evidence.startswith("POST /v1/responses: HTTP 200: status "), probe


def test_a_response_format_answered_with_free_text_is_broken_structured_outputs(engines: Engines) -> None:
    # A model that does not reason answers within the probe's tokens, so the free text shows.
    probe = run_discovery(engines, defects=["ignore-response-format"], reasoning=False).probes["structured_outputs"]
    assert probe.state == "broken" and "the content is not JSON" in probe.evidence, probe


def test_a_switch_that_does_not_turn_thinking_off_leaves_thinking_modes_not_served(engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["ignore-thinking-off"])
    assert discovery.state("reasoning") == "served"
    assert discovery.probes["thinking_modes"].state == "not_served"
    assert discovery.probes["thinking_modes"].evidence.startswith("no known switch turned reasoning off")


def test_a_prefix_cache_that_reports_hits_is_served_one_that_reports_nothing_is_not(engines: Engines) -> None:
    served = run_discovery(engines).probes["prefix_cache"]
    assert served.state == "served" and "usage.prompt_tokens_details.cached_tokens" in served.evidence, served
    silent = run_discovery(engines, prefix_cache=False).probes["prefix_cache"]
    assert silent.state == "not_served", silent
    assert silent.evidence.startswith("the engine reports no cached tokens: usage has no "
                                      "prompt_tokens_details.cached_tokens, and no prefix-cache hit counter"), silent


def test_a_prefix_cache_that_never_hits_is_broken_and_names_the_stated_intent(engines: Engines) -> None:
    probe = run_discovery(engines, defects=["prefix-cache-never-hits"]).probes["prefix_cache"]
    assert probe.state == "broken", probe
    assert "cached_tokens 0 of" in probe.evidence and "--not-served prefix_cache" in probe.evidence, probe


def test_a_thinking_budget_is_served_refused_without_reasoning_and_broken_when_ignored(engines: Engines) -> None:
    served = run_discovery(engines).probes["thinking_budget"]
    assert served.state == "served" and "thinking_token_budget=32: reasoning of" in served.evidence, served
    refused = run_discovery(engines, reasoning=False).probes["thinking_budget"]
    assert refused == Probe("thinking_budget", "not_served", "HTTP 400: thinking_token_budget is set but "
                            "reasoning_config is not configured. Please set --reasoning-parser and/or "
                            "--reasoning-config to use thinking_token_budget."), refused
    ignored = run_discovery(engines, defects=["thinking-budget-ignored"]).probes["thinking_budget"]
    assert ignored.state == "broken" and "the thinking budget is not applied" in ignored.evidence, ignored
    assert "--not-served thinking_budget" in ignored.evidence, ignored
    sglang = run_discovery(engines, engine_profile="sglang", convention="sglang").probes["thinking_budget"]
    assert sglang.state == "not_probed" and "names no thinking_budget_field" in sglang.evidence, sglang


def test_a_chat_template_that_crashes_on_every_switch_makes_thinking_modes_broken_in_vllms_words(
        engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["thinking-switch-template-400"])
    assert discovery.state("reasoning") == "served"
    thinking = discovery.probes["thinking_modes"]
    assert thinking.state == "broken" and not thinking.settings
    assert thinking.evidence.startswith("chat_template_kwargs.enable_thinking=false: HTTP 400: 'thinking_budget' is "
                                        "undefined (2 more switches failed too): not a refusal engine profile 'vllm' "
                                        "recognizes for thinking_modes")


def test_a_model_that_does_not_reason_by_default_and_fails_when_turned_on_is_broken_not_unserved(
        engines: Engines) -> None:
    discovery = run_discovery(engines, defects=["thinking-on-500"])
    assert states(discovery)["reasoning"] == "broken" and states(discovery)["thinking_modes"] == "broken"
    assert discovery.probes["thinking_modes"].evidence.startswith(
        "chat_template_kwargs.enable_thinking=true: HTTP 500: Internal server error (2 more switches failed too); if "
        "the deployment does not offer thinking_modes on purpose, run with --not-served thinking_modes")
    assert discovery.probes["reasoning"].settings["default_on"] is False


def test_reference_engine_refusals_have_vllms_error_body(engines: Engines) -> None:
    url = engines.get(text_only=True, tool_parser=False, tokenize=False).url
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    status, body = post(url + "/v1/chat/completions",
                        {"model": UNPROFILED, "messages": [{"role": "user", "content": [image]}]})
    assert (status, body) == (400, {"error": {"message": f"{UNPROFILED} is not a multimodal model",
                                              "type": "BadRequestError", "param": None, "code": 400}})
    tool = json.loads((Path(__file__).parents[2] / "fixtures/schemas/get_weather.tool.json").read_text())
    status, body = post(url + "/v1/chat/completions",
                        {"model": UNPROFILED, "messages": [{"role": "user", "content": "hi"}], "tools": [tool]})
    assert (status, body["error"]["message"]) == (400, AUTO_TOOLS_REFUSAL)
    status, body = post(url + "/v1/chat/completions",
                        {"model": UNPROFILED, "messages": [{"role": "user", "content": "hi"}], "tools": [tool],
                         "tool_choice": "required"})
    assert (status, body["error"]["message"]) == (400, 'tool_choice="required" requires --tool-call-parser to be set')
    # tool_choice none needs no parser.
    status, _ = post(url + "/v1/chat/completions",
                     {"model": UNPROFILED, "messages": [{"role": "user", "content": "hi"}], "tools": [tool],
                      "tool_choice": "none"})
    assert status == 200
    assert post(url + "/tokenize", {"model": UNPROFILED, "prompt": "hello"}) == (404, {"detail": "Not Found"})


def post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# --- classification of crafted exchanges ---------------------------------------------------

def exchange(status: int | None = 200, body: Any = None, *, error_kind: str | None = None,
             error: str | None = None) -> Exchange:
    made = Exchange("POST", "http://engine/v1/chat/completions", {}, False, status=status, body=body,
                    error_kind=error_kind, error=error)
    if status is not None and 200 <= status < 300 and isinstance(body, dict) and "choices" in body:
        made.reply = reply_from_body(body)
    return made


def chat_body(content: str = "42", reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


@pytest.mark.parametrize(
    ("made", "state", "evidence"),
    [
        pytest.param(exchange(400, {"error": {"message": "m is not a multimodal model", "type": "BadRequestError",
                                              "param": None, "code": 400}}),
                     "not_served", "HTTP 400: m is not a multimodal model", id="400-vllm-body"),
        pytest.param(exchange(400, {"object": "error", "message": "gemma is not a multimodal model",
                                    "type": "BadRequestError"}),
                     "not_served", "HTTP 400: gemma is not a multimodal model", id="400-flat-body"),
        # Any 4xx the engine profile does not list is broken: the checks run (issue 26).
        pytest.param(exchange(400, {"object": "error", "message": "no images", "type": "BadRequestError"}),
                     "broken", "HTTP 400: no images: not a refusal engine profile 'vllm' recognizes for image; if the "
                     "deployment does not offer image on purpose, run with --not-served image (or not_served: "
                     "[image] in the model profile)", id="400-unknown-words"),
        pytest.param(exchange(422, "Unprocessable"), "broken", "HTTP 422: Unprocessable: not a refusal engine "
                     "profile 'vllm' recognizes for image; if the deployment does not offer image on purpose, run "
                     "with --not-served image (or not_served: [image] in the model profile)", id="422-text"),
        pytest.param(exchange(403, "Forbidden"), "broken", "HTTP 403: Forbidden: not a refusal engine profile "
                     "'vllm' recognizes for image; if the deployment does not offer image on purpose, run with "
                     "--not-served image (or not_served: [image] in the model profile)", id="403-proxy"),
        pytest.param(exchange(404, {"detail": "Not Found"}), "broken", "HTTP 404: Not Found: not a refusal engine "
                     "profile 'vllm' recognizes for image; if the deployment does not offer image on purpose, run "
                     "with --not-served image (or not_served: [image] in the model profile)", id="404-on-chat"),
        pytest.param(exchange(401, {"error": "Unauthorized"}), "broken", "HTTP 401: Unauthorized", id="401-auth"),
        pytest.param(exchange(429, {"error": {"message": "slow down"}}), "broken", "HTTP 429: slow down",
                     id="429-rate-limit"),
        pytest.param(exchange(500, {"error": {"message": "Internal server error"}}), "broken",
                     "HTTP 500: Internal server error", id="500"),
        pytest.param(exchange(None, error_kind="timeout", error="idle timeout: never answered"), "broken",
                     "timeout: idle timeout: never answered", id="timeout"),
        pytest.param(exchange(None, error_kind="connection", error="refused"), "broken", "connection: refused",
                     id="connection"),
        pytest.param(exchange(200, chat_body("")), "broken",
                     "HTTP 200 with nothing in content, reasoning or tool calls (finish_reason 'stop')",
                     id="200-empty-reply"),
        pytest.param(exchange(200, {"unexpected": True}), "broken",
                     'HTTP 200 without a usable reply: {"unexpected": true}', id="200-not-a-reply"),
        pytest.param(exchange(200, chat_body("42")), "served", "HTTP 200: content '42'", id="200-reply"),
    ],
)
def test_classify_exchange(made: Exchange, state: str, evidence: str) -> None:
    assert classify_exchange(made, "image", VLLM) == (state, evidence)


@pytest.mark.parametrize(("capability", "message", "state"), [
    ("tools", AUTO_TOOLS_REFUSAL, "not_served"),
    ("tools", 'tool_choice=function "get_weather" requires --tool-call-parser to be set', "not_served"),
    # A tool parser that crashes is no refusal, even in vLLM's own error shape.
    ("tools", "Error in extracting tool call from response: JSONDecodeError: Expecting ','", "broken"),
    # The same words for another capability are not its refusal.
    ("image", AUTO_TOOLS_REFUSAL, "broken"),
    ("image", "Failed to load image: cannot identify image file <_io.BytesIO object>", "broken"),
    ("tools", "gemma-3-270m is not a multimodal model", "broken"),
])
def test_only_the_engine_profiles_refusal_for_that_capability_is_not_served(capability: str, message: str,
                                                                            state: str) -> None:
    made = exchange(400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}})
    found, evidence = classify_exchange(made, capability, VLLM)
    assert found == state, evidence
    assert evidence.startswith(f"HTTP 400: {message}"[:150])
    if state == "broken":
        assert evidence.endswith(f"run with --not-served {capability} (or not_served: [{capability}] in the model "
                                 "profile)"), evidence


def test_the_generic_profile_recognizes_the_known_engines_refusals_and_nothing_else() -> None:
    generic = load_engine_profile("generic").refusal_rules
    assert generic.recognizes("tools", 400, AUTO_TOOLS_REFUSAL)
    assert generic.recognizes("image", 400, "qwen3-8b is not a multimodal model")
    assert generic.recognizes("structured_outputs", 400, "Grammar-based generation (json_schema, regex, ebnf, "
                              "structural_tag) is not supported when the server is launched with --grammar-backend "
                              "none")
    assert generic.recognizes("tokenize", 404, "Not Found") and generic.recognizes("responses", 404, "Not Found")
    assert not generic.recognizes("tools", 400, "Error in extracting tool call from response: JSONDecodeError")
    assert not generic.recognizes("image", 400, "Failed to load image: cannot identify image file")
    assert not generic.recognizes("responses", 403, "Forbidden")
    # A 404 on a chat feature is no absent route: the chat route answered.
    assert not generic.recognizes("tools", 404, "Not Found")
    # llama-server's answer to a part type it does not take (video_url) refuses video; an image it does take.
    assert generic.recognizes("video", 400, "unsupported content[].type")
    assert not generic.recognizes("image", 400, "unsupported content[].type")
    assert not generic.recognizes("video", 400, "unsupported content[].type: video_url is odd")


def _counted(prompt_tokens: int | None, content: str = "Red") -> Exchange:
    body = chat_body(content)
    if prompt_tokens is None:
        del body["usage"]
    else:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 2, "total_tokens": prompt_tokens + 2}
    return exchange(200, body)


@pytest.mark.parametrize(
    ("with_media", "without", "state", "evidence"),
    [
        pytest.param(_counted(263), _counted(7), "served",
                     "prompt_tokens 263 with the image, 7 without; HTTP 200: content 'Red'", id="counted"),
        # llama.cpp's server 0.3.36 with a text-only GGUF, measured.
        pytest.param(_counted(7), _counted(7), "broken",
                     "image_url part dropped: prompt_tokens 7 with the image, 7 without (the engine answered 200 "
                     "but did not read the image)", id="llamacpp-dropped"),
        pytest.param(_counted(6), _counted(7), "broken",
                     "image_url part dropped: prompt_tokens 6 with the image, 7 without (the engine answered 200 "
                     "but did not read the image)", id="fewer"),
        pytest.param(_counted(None), _counted(7), "served",
                     "not checked that the image was read (no usage in the reply with the image); HTTP 200: "
                     "content 'Red'", id="no-usage-with"),
        pytest.param(_counted(263), _counted(None), "served",
                     "not checked that the image was read (no usage in the reply without it); HTTP 200: "
                     "content 'Red'", id="no-usage-without"),
        pytest.param(_counted(263), exchange(500, {"error": {"message": "boom"}}), "served",
                     "not checked that the image was read (no usage in the reply without it); HTTP 200: "
                     "content 'Red'", id="text-only-failed"),
        pytest.param(_counted(None), _counted(None), "served",
                     "not checked that the image was read (no usage in either reply); HTTP 200: content 'Red'",
                     id="no-usage-either"),
        # The media request's own refusal or fault decides; the counts are not looked at.
        pytest.param(exchange(400, {"error": {"message": "m is not a multimodal model"}}), _counted(7),
                     "not_served", "HTTP 400: m is not a multimodal model", id="400"),
        # A decoder that fails on valid media is no refusal (media-decode-400).
        pytest.param(exchange(400, {"error": {"message": "Failed to load image: cannot identify image file"}}),
                     _counted(7), "broken", "HTTP 400: Failed to load image: cannot identify image file: not a "
                     "refusal engine profile 'vllm' recognizes for image; if the deployment does not offer image on "
                     "purpose, run with --not-served image (or not_served: [image] in the model profile)",
                     id="400-decoder"),
        pytest.param(_counted(7, content=""), _counted(7), "broken",
                     "HTTP 200 with nothing in content, reasoning or tool calls (finish_reason 'stop')",
                     id="empty-reply"),
    ],
)
def test_classify_media(with_media: Exchange, without: Exchange, state: str, evidence: str) -> None:
    assert classify_media(with_media, without, content_type="image_url", noun="image", rules=VLLM) == (state,
                                                                                                      evidence)


def test_evidence_is_capped_for_a_table_cell() -> None:
    state, evidence = classify_exchange(exchange(400, {"error": {"message": "x" * 1000 + " is not a multimodal "
                                                                            "model"}}), "image", VLLM)
    assert state == "not_served" and len(evidence) <= 200 and evidence.endswith("…")
    # Broken: the engine's words are capped, the note naming the command is kept whole.
    state, evidence = classify_exchange(exchange(400, {"error": {"message": "x" * 1000}}), "image", VLLM)
    assert state == "broken" and evidence.endswith("--not-served image (or not_served: [image] in the model profile)")
    assert "…: not a refusal engine profile 'vllm' recognizes for image" in evidence


@pytest.mark.parametrize(
    ("made", "state", "evidence"),
    [
        pytest.param(exchange(200, {"count": 1, "tokens": [9906], "max_model_len": 8}), "served",
                     "POST /tokenize: 1 token(s) for 'hello'", id="tokens"),
        pytest.param(exchange(200, {"count": 2}), "served", "POST /tokenize: count 2 for 'hello'", id="count"),
        pytest.param(exchange(405, {"detail": "Method Not Allowed"}), "not_served",
                     "POST /tokenize: HTTP 405: Method Not Allowed", id="405"),
        pytest.param(exchange(200, {"ok": True}), "broken",
                     'POST /tokenize: HTTP 200 without a token list or count (sent vLLM\'s and SGLang\'s '
                     '{"prompt"}): {"ok": true}', id="200-no-tokens"),
        # What llama.cpp's llama-server answers a body it does not read: the evidence says which body it may want.
        pytest.param(exchange(200, {"tokens": []}), "broken",
                     "POST /tokenize: HTTP 200 with an empty token list for 'hello' (sent vLLM's and SGLang's "
                     "{\"prompt\"}): the engine may take another body (features.tokenize_body: 'content', "
                     "llama-server's {\"content\"})", id="200-empty-tokens"),
        pytest.param(exchange(502, "Bad Gateway"), "broken", "POST /tokenize: HTTP 502: Bad Gateway", id="502"),
        pytest.param(exchange(403, "Forbidden"), "broken", "POST /tokenize: HTTP 403: Forbidden: not a refusal engine "
                     "profile 'vllm' recognizes for tokenize; if the deployment has no tokenize endpoint on purpose, "
                     "count locally with --tokenizer FILE (the served model's tokenizer.json) or add the refusal to "
                     "the engine profile's refusals.tokenize", id="403-proxy"),
    ],
)
def test_classify_tokenize(made: Exchange, state: str, evidence: str) -> None:
    assert classify_tokenize(made, TokenizeApi("/tokenize"), VLLM) == (state, evidence)


def _cut(content: str) -> dict[str, Any]:
    body = chat_body(content)
    body["choices"][0]["finish_reason"] = "length"
    return body


@pytest.mark.parametrize(
    ("made", "state", "evidence"),
    [
        pytest.param(exchange(200, chat_body('{"ok": true}')), "served", "HTTP 200: content '{\"ok\": true}'",
                     id="fits"),
        pytest.param(exchange(200, _cut('{"ok":   ')), "served",
                     "HTTP 200: JSON begun, cut at 32 tokens: '{\"ok\":'", id="cut-json"),
        pytest.param(exchange(200, chat_body("Yes, it is.")), "broken",
                     "HTTP 200: response_format json_schema accepted, but the content is not JSON (the constraint "
                     "was ignored?): 'Yes, it is.'", id="free-text"),
        pytest.param(exchange(200, chat_body('{"answer": 1}')), "broken",
                     'HTTP 200: the content is JSON that does not fit the schema {"type": "object", "properties": '
                     '{"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}: '
                     '\'{"answer": 1}\'', id="wrong-json"),
        pytest.param(exchange(200, chat_body("", reasoning="Let me think")), "served",
                     "HTTP 200: accepted; reasoning only within 32 tokens, the JSON is judged by the checks",
                     id="reasoning-only"),
        pytest.param(exchange(400, {"error": {"message": "response_format is not supported"}}), "broken",
                     "HTTP 400: response_format is not supported: not a refusal engine profile 'vllm' recognizes "
                     "for structured_outputs; if the deployment does not offer structured_outputs on purpose, run "
                     "with --not-served structured_outputs (or not_served: [structured_outputs] in the model "
                     "profile)", id="400-unknown"),
        pytest.param(exchange(500, {"error": {"message": ""}}), "broken", 'HTTP 500: {"error": {"message": ""}}',
                     id="500"),
    ],
)
def test_classify_structured(made: Exchange, state: str, evidence: str) -> None:
    assert classify_structured(made, VLLM) == (state, evidence)


def _trials(answer: Any) -> list[SwitchTrial]:
    """One trial per known switch; `answer(switch, form)` gives each form's exchange."""
    return [SwitchTrial(s, answer(s, "off"), answer(s, "on")) for s in THINKING_SWITCHES]


def _error(status: int, message: str) -> Exchange:
    return exchange(status, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}})


REASONS = exchange(200, chat_body("42", "17 + 25 is 42."))
SILENT = exchange(200, chat_body("42"))
# A gateway's refusal of a field it strips, as a team would list it in its engine profile.
GATEWAY_REFUSAL = "chat_template_kwargs is not allowed by this gateway"


def _rules(**refusals: str) -> RefusalRules:
    """The vLLM engine profile's refusals, plus a 400 with `message` for each capability named."""
    listed = dict(VLLM.by_capability)
    listed.update({name: (Refusal(400, re.compile(re.escape(message))),) for name, message in refusals.items()})
    return RefusalRules("team-vllm", listed)


def _intent(capability: str) -> str:
    return (f"if the deployment does not offer {capability} on purpose, run with --not-served {capability} "
            f"(or not_served: [{capability}] in the model profile)")


def test_model_that_reasons_only_when_asked_finds_its_switch() -> None:
    # DeepSeek-V3.1: no reasoning by default; thinking=true turns it on.
    def answer(switch: Any, form: str) -> Exchange:
        return REASONS if switch.name == "thinking" and form == "on" else SILENT

    reasoning, thinking = judge_reasoning(SILENT, _trials(answer), VLLM)
    assert reasoning.state == "served" and reasoning.settings["default_on"] is False
    assert "chat_template_kwargs.thinking=true turns it on" in reasoning.evidence
    assert thinking.state == "served" and thinking.settings["switch"] == "thinking"
    assert thinking.settings["modes"]["disabled"] == {"chat_template_kwargs": {"thinking": False}}


def test_model_that_reasons_by_default_finds_the_first_switch_that_turns_it_off() -> None:
    reasoning, thinking = judge_reasoning(REASONS, _trials(lambda s, f: SILENT if f == "off" else REASONS), VLLM)
    assert reasoning.state == "served" and reasoning.settings == {"default_on": True, "fields": ["reasoning"]}
    assert thinking.state == "served" and thinking.settings["switch"] == "enable_thinking"
    assert thinking.evidence == ("chat_template_kwargs.enable_thinking=false turns reasoning off, "
                                 "chat_template_kwargs.enable_thinking=true on (also: thinking, thinking_mode)")


def test_reasoning_markers_in_content_are_broken_not_absent() -> None:
    plain = exchange(200, chat_body("<think>\nThe user asks for 17 + 25"))
    reasoning, thinking = judge_reasoning(plain, _trials(lambda s, f: exchange(200, chat_body("<think>\nhm"))), VLLM)
    assert reasoning.state == "broken" and "no reasoning parser" in reasoning.evidence
    assert thinking.state == "not_served"


def test_a_model_that_never_reasons_serves_neither_whatever_the_switches() -> None:
    # vLLM 0.32 with Gemma 3 270M: its template reads none of the switches, vLLM drops them, 200 each.
    reasoning, thinking = judge_reasoning(SILENT, _trials(lambda s, f: SILENT), VLLM)
    assert reasoning == Probe("reasoning", "not_served", "no reasoning in the reply")
    assert thinking == Probe("thinking_modes", "not_served",
                             "no reasoning in the reply, with or without a known switch")


def test_a_switch_that_does_not_turn_reasoning_off_is_not_served_naming_the_switches_tried() -> None:
    _, thinking = judge_reasoning(REASONS, _trials(lambda s, f: REASONS), VLLM)
    assert thinking == Probe("thinking_modes", "not_served", "no known switch turned reasoning off (tried "
                             "enable_thinking, thinking, thinking_mode)")


# A switch form's 4xx is a refusal only when the engine profile lists it (issue 39).

@pytest.mark.parametrize("listed_under", ["thinking_modes", "reasoning"])
def test_switches_refused_as_the_engine_profile_lists_are_not_served_saying_what_each_got(listed_under: str) -> None:
    rules = _rules(**{listed_under: GATEWAY_REFUSAL})
    refused = _error(400, GATEWAY_REFUSAL)
    reasoning, thinking = judge_reasoning(REASONS, _trials(lambda s, f: refused), rules)
    assert reasoning.state == "served"
    assert thinking.state == "not_served" and not thinking.settings
    assert thinking.evidence == (
        "no known switch turned reasoning off (tried "
        f"chat_template_kwargs.enable_thinking=false: HTTP 400: {GATEWAY_REFUSAL}; "
        f"chat_template_kwargs.thinking=false: HTTP 400: {GATEWAY_REFUSAL}; "
        f'chat_template_kwargs.thinking_mode="disabled": HTTP 400: {GATEWAY_REFUSAL})')


def test_switches_refused_on_a_model_that_does_not_reason_say_so_beside_no_reasoning() -> None:
    rules = _rules(thinking_modes=GATEWAY_REFUSAL)
    refused = _error(400, GATEWAY_REFUSAL)
    reasoning, thinking = judge_reasoning(SILENT, _trials(lambda s, f: refused if s.name == "thinking" else SILENT),
                                          rules)
    assert reasoning == Probe("reasoning", "not_served", "no reasoning in the reply")
    assert thinking.state == "not_served"
    assert thinking.evidence == ("no reasoning in the reply, with or without a known switch (tried "
                                 "enable_thinking: answered; chat_template_kwargs.thinking=false: HTTP 400: "
                                 f"{GATEWAY_REFUSAL}; thinking_mode: answered)")


def test_one_switch_refused_and_another_working_is_served() -> None:
    rules = _rules(thinking_modes=GATEWAY_REFUSAL)

    def answer(switch: Any, form: str) -> Exchange:
        if switch.name == "enable_thinking":
            return _error(400, GATEWAY_REFUSAL)
        return SILENT if form == "off" else REASONS

    _, thinking = judge_reasoning(REASONS, _trials(answer), rules)
    assert thinking.state == "served" and thinking.settings["switch"] == "thinking"


def test_a_4xx_the_engine_profile_does_not_list_is_broken_quoting_the_engine_whatever_the_default() -> None:
    # thinking-switch-template-400: vLLM's 400 for a chat template that crashes on the switch.
    crash = _error(400, "'thinking_budget' is undefined")
    for plain in (REASONS, SILENT):
        _, thinking = judge_reasoning(plain, _trials(lambda s, f: crash), VLLM)
        assert thinking.state == "broken" and not thinking.settings
        assert thinking.evidence == (
            "chat_template_kwargs.enable_thinking=false: HTTP 400: 'thinking_budget' is undefined (2 more switches "
            "failed too): not a refusal engine profile 'vllm' recognizes for thinking_modes; "
            + _intent("thinking_modes"))


def test_a_refusal_listed_for_another_capability_does_not_excuse_a_switch() -> None:
    _, thinking = judge_reasoning(REASONS, _trials(lambda s, f: _error(400, GATEWAY_REFUSAL)),
                                  _rules(tools=GATEWAY_REFUSAL))
    assert thinking.state == "broken" and "not a refusal engine profile 'team-vllm' recognizes" in thinking.evidence


def test_a_model_that_does_not_reason_by_default_and_whose_on_switch_fails_is_broken_twice() -> None:
    # thinking-on-500: turning thinking off works, turning it on is answered 500.
    failed = _error(500, "Internal server error")
    reasoning, thinking = judge_reasoning(SILENT, _trials(lambda s, f: SILENT if f == "off" else failed), VLLM)
    assert reasoning.state == "broken" and reasoning.settings == {"default_on": False, "fields": []}
    assert reasoning.evidence == ("no reasoning by default, and the switch that would turn it on failed: "
                                  "chat_template_kwargs.enable_thinking=true: HTTP 500: Internal server error; "
                                  f"{_intent('reasoning')}")
    assert thinking.state == "broken" and not thinking.settings
    assert thinking.evidence == ("chat_template_kwargs.enable_thinking=true: HTTP 500: Internal server error (2 more "
                                 f"switches failed too); {_intent('thinking_modes')}")


def test_an_off_switch_that_fails_on_a_model_that_reasons_by_default_is_broken_in_the_engines_words() -> None:
    def answer(switch: Any, form: str) -> Exchange:
        if switch.name == "thinking_mode":
            return _error(500, "template error")
        return REASONS  # the other switches are not read: reasoning stays

    reasoning, thinking = judge_reasoning(REASONS, _trials(answer), VLLM)
    assert reasoning.state == "served"
    assert thinking == Probe("thinking_modes", "broken", 'chat_template_kwargs.thinking_mode="disabled": HTTP 500: '
                             f"template error; {_intent('thinking_modes')}")


def test_a_switch_that_fails_fails_thinking_modes_even_when_another_switch_works() -> None:
    def answer(switch: Any, form: str) -> Exchange:
        if switch.name == "thinking_mode" and form == "on":
            return _error(502, "Bad Gateway")
        return SILENT if form == "off" else REASONS

    reasoning, thinking = judge_reasoning(REASONS, _trials(answer), VLLM)
    assert reasoning.state == "served"
    assert thinking.state == "broken" and thinking.evidence.startswith(
        'chat_template_kwargs.thinking_mode="enabled": HTTP 502: Bad Gateway; ')


@pytest.mark.parametrize(("lost", "said"), [
    (exchange(None, error_kind="timeout", error="idle timeout: never answered"),
     "timeout: idle timeout: never answered"),
    (exchange(None, error_kind="connection", error="reset by peer"), "connection: reset by peer"),
    (exchange(401, {"error": "Unauthorized"}), "HTTP 401: Unauthorized"),
    (exchange(200, chat_body("")), "HTTP 200 with nothing in content, reasoning or tool calls (finish_reason 'stop')"),
], ids=["timeout", "connection", "401", "200-empty"])
def test_a_switch_answer_lost_or_unusable_is_a_fault_not_a_refusal(lost: Exchange, said: str) -> None:
    for plain in (REASONS, SILENT):
        reasoning, thinking = judge_reasoning(plain, _trials(lambda s, f: lost if f == "on" else SILENT), VLLM)
        assert thinking == Probe("thinking_modes", "broken", f"chat_template_kwargs.enable_thinking=true: {said} "
                                 f"(2 more switches failed too); {_intent('thinking_modes')}")
        assert reasoning.state == ("served" if plain is REASONS else "broken"), reasoning


def test_a_refused_plain_request_breaks_reasoning_and_thinking() -> None:
    refused = exchange(400, {"error": {"message": "bad"}})
    reasoning, thinking = judge_reasoning(refused, _trials(lambda s, f: refused), VLLM)
    why = "a plain chat request failed: HTTP 400: bad"
    assert (reasoning, thinking) == (Probe("reasoning", "broken", why), Probe("thinking_modes", "broken", why))


def test_the_shipped_engine_profiles_list_no_refusal_of_a_thinking_switch() -> None:
    # vLLM, SGLang and llama-cpp-python answer a switch the template does not read 200 (dropped or ignored), and
    # one the template crashes on with the template's own words: a fault (fixtures/profiles/engines/*.yaml).
    for name in ("vllm", "sglang", "llamacpp", "generic"):
        listed = load_engine_profile(name).refusal_rules.by_capability
        assert not listed.get("thinking_modes") and not listed.get("reasoning"), name


# --- the result itself ---------------------------------------------------------------------

def test_discovery_round_trips_through_json_for_xdist_workers(engines: Engines) -> None:
    discovery = run_discovery(engines, text_only=True)
    again = Discovery.from_dict(json.loads(json.dumps(discovery.to_dict())))
    assert again == discovery
    assert again.table_rows() == discovery.table_rows()


def test_probe_rejects_an_unknown_state() -> None:
    with pytest.raises(ValueError, match="not one of served, not_served, broken, not_probed"):
        Probe("image", "maybe", "")


def test_unprobed_capability_reads_as_not_probed() -> None:
    discovery = Discovery(probes={}, advertised_context=None, elapsed_s=0.0)
    assert discovery.state("image") == "not_probed" and not discovery.served("image")
    assert discovery.settings("image") == {}


@pytest.mark.parametrize(
    ("made", "state", "evidence"),
    [
        pytest.param(exchange(200, {"object": "response", "status": "incomplete", "output": [
            {"type": "reasoning"}, {"type": "message"}]}), "served",
            "POST /v1/responses: HTTP 200: status 'incomplete', output reasoning, message", id="response"),
        pytest.param(exchange(200, {"object": "response", "status": "completed", "output": []}), "served",
                     "POST /v1/responses: HTTP 200: status 'completed', output no items", id="no-items"),
        pytest.param(exchange(404, {"detail": "Not Found"}), "not_served", "POST /v1/responses: HTTP 404: Not Found",
                     id="404"),
        pytest.param(exchange(405, {"detail": "Method Not Allowed"}), "not_served",
                     "POST /v1/responses: HTTP 405: Method Not Allowed", id="405"),
        pytest.param(exchange(200, {"choices": []}), "broken",
                     'POST /v1/responses: HTTP 200 without a response object: {"choices": []}', id="not-a-response"),
        pytest.param(exchange(500, {"error": {"message": "boom"}}), "broken", "POST /v1/responses: HTTP 500: boom",
                     id="500"),
        pytest.param(exchange(403, "Forbidden"), "broken", "POST /v1/responses: HTTP 403: Forbidden: not a refusal "
                     "engine profile 'vllm' recognizes for responses; if the deployment does not offer responses on "
                     "purpose, run with --not-served responses (or not_served: [responses] in the model profile)",
                     id="403-firewall"),
    ],
)
def test_classify_responses(made: Exchange, state: str, evidence: str) -> None:
    assert classify_responses(made, VLLM) == (state, evidence)
