"""Prompt-token accounting (TEST-PLAN §1 usage, §8 accounting): ``usage.prompt_tokens`` is the prompt, exactly.

The recall checks compare ``usage.prompt_tokens`` with the engine's own count for a
long prompt; these do it for ordinary requests, with the same code
(:mod:`engine_acceptance.wire.token_count`): a chat conversation (a system message and
two user turns), streamed (``stream_options.include_usage``) and not, and a plain
``/v1/completions`` prompt. Any difference fails, naming both numbers: an engine
that bills one token too many per request is off by millions a day.

What each count is, and why it is the engine's own (vLLM's protocol and
``serving_tokenization.py``; SGLang's ``/tokenize`` takes the same forms):

* Chat: ``POST /tokenize`` with ``messages`` and ``add_generation_prompt: true``
  renders the conversation with the model's chat template exactly as
  ``/v1/chat/completions`` does (both default to ``add_generation_prompt`` true and
  ``add_special_tokens`` false: the template adds the BOS itself), so its count is
  what ``prompt_tokens`` must be, template and generation prompt included
  (:meth:`ServerTokenCounter.count_conversation`). llama.cpp's ``llama-server`` counts
  it at ``POST /v1/chat/completions/input_tokens`` instead (the engine profile's
  ``features.tokenize_body``, :mod:`engine_acceptance.wire.tokenize_api`). The chat
  request sends no ``tools`` or ``chat_template_kwargs``, which would change the rendering.
  The conversation must count at least its messages' text: fewer tokens mean the chat
  template or the prompt is broken (it dropped the message), whatever usage says.
* Completions: ``POST /tokenize`` with ``prompt`` and ``add_special_tokens`` left at
  its default (true) tokenizes as ``/v1/completions`` does (its default is true as
  well): a BOS, for tokenizers that add one, is counted by both (llama-server's
  ``{"content", "add_special": true}``).

Without a working ``/tokenize`` (absent, or broken: the skip says which, in its probe's words),
``--tokenizer`` (the model's ``tokenizer.json``) counts the
completions prompt exactly (special tokens added, as the engine adds them); it has no
chat template, so the chat check is skipped with that reason. With neither, both are
skipped with the reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, reply_of
from engine_acceptance.pytest_plugin.public import AcceptanceOptions
from engine_acceptance.wire.reassembly import Reply
from engine_acceptance.report_attachments import attach_exchange, attach_json
from engine_acceptance.session import AcceptanceSession
from engine_acceptance.wire.token_count import (
    LocalTokenCounter,
    PromptAccounting,
    ServerTokenCounter,
    TokenCountError,
    uncounted,
)

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.text]

# Enough to get a usage object back; what the model says is not judged here.
MAX_TOKENS = 16
SYSTEM = "You are a careful assistant. Answer briefly."


@dataclass
class PromptCounting:
    """How this run can count a prompt exactly: the engine's /tokenize, a local tokenizer.json, or neither."""

    server: ServerTokenCounter | None
    local: LocalTokenCounter | None
    # Why the engine cannot count, in its tokenize probe's words: absent, or broken (never "absent" then).
    no_tokenize: str = "no tokenize endpoint"

    def none_reason(self) -> str:
        return (f"{uncounted(self.no_tokenize)}: nothing can count the prompt's tokens (--tokenizer PATH takes the "
                "model's tokenizer.json)")

    def for_chat(self) -> ServerTokenCounter:
        """The engine's /tokenize: only it can render the model's chat template."""
        if self.server is not None:
            return self.server
        if self.local is None:
            pytest.skip(self.none_reason())
        pytest.skip(f"only the local tokenizer.json {self.local.source} counts here ({self.no_tokenize}), "
                    "and it has no chat template: the tokens the engine's template adds to a conversation cannot be "
                    "known exactly (the /v1/completions check counts a plain prompt exactly)")

    def for_completions(self) -> None:
        """Skips the check when nothing can count a plain prompt."""
        if self.server is None and self.local is None:
            pytest.skip(self.none_reason())

    def count_completion_prompt(self, text: str) -> tuple[int, str]:
        """The prompt's tokens as /v1/completions counts them (special tokens added), and by whom."""
        if self.server is not None:
            count = self.server.count_completion_prompt(text)
            return count, (f"the engine's own {self.server.endpoint} "
                           "(special tokens added, as /v1/completions adds them)")
        if self.local is not None:
            # The tokenizer.json's post-processor adds the BOS the engine's tokenizer adds.
            count = len(self.local._tok.encode(text, add_special_tokens=True).ids)
            return count, (f"the local tokenizer.json {self.local.source} "
                           "(special tokens added, as the engine adds them)")
        raise AssertionError("for_completions() skips a run that cannot count")


@pytest.fixture(scope="module")
def prompt_counting(suite_options: AcceptanceOptions, acceptance: AcceptanceSession) -> PromptCounting:
    api = acceptance.tokenize_api
    server = ServerTokenCounter(acceptance.target, api) if api is not None else None
    return PromptCounting(server, suite_options.tokenizer, acceptance.no_tokenize_reason)


def _conversation(prompts: dict[str, Any]) -> list[dict[str, str]]:
    """A system message and two user turns, the assistant's answer to the first between them."""
    case = prompts["text"]["codename"]
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": case["remember"]},
            {"role": "assistant", "content": "好的"},
            {"role": "user", "content": case["ask"]}]


def _usage_prompt_tokens(reply: Reply, stream: bool) -> int | None:
    assert reply.usage is not None, "no usage in the reply" + (
        " (stream_options.include_usage was set)" if stream else "")
    value = reply.usage.prompt_tokens
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _record(request: pytest.FixtureRequest, accounting: PromptAccounting, acceptance: AcceptanceSession) -> None:
    request.node.user_properties.append(("prompt_token_difference", accounting.difference))
    attach_json("prompt token accounting", accounting.summary(), acceptance.redactor)


async def test_chat_prompt_tokens_match_the_engines_count(chat, prompts, prompt_counting, acceptance, stream,
                                                          request) -> None:
    counter = prompt_counting.for_chat()
    messages = _conversation(prompts)
    body: dict[str, Any] = {"messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    if stream:
        body["stream_options"] = {"include_usage": True}
    reply = reply_of(await chat(body, stream=stream))
    usage = _usage_prompt_tokens(reply, stream)
    try:
        conversation = await asyncio.to_thread(counter.count_conversation, messages)
        text = sum(await asyncio.to_thread(counter.count_many, [m["content"] for m in messages]))
    except TokenCountError as exc:
        pytest.fail(f"the engine's tokenize endpoint could not count the conversation: {exc}")
    accounting = PromptAccounting(text_tokens=text, text_counted_with=counter.describe(), usage_prompt_tokens=usage,
                                  tolerance=0, template_tokens_max=0, conversation_tokens=conversation)
    _record(request, accounting, acceptance)
    problems = accounting.problems()
    assert_no_problems(problems, detail=f" [{accounting.describe()}]")


async def test_completion_prompt_tokens_match_the_engines_count(raw_client, prompts, prompt_counting, acceptance,
                                                                stream, request) -> None:
    prompt_counting.for_completions()
    prompt = prompts["text"]["basic"]["prompt"]
    try:
        expected, counted_with = await asyncio.to_thread(prompt_counting.count_completion_prompt, prompt)
    except TokenCountError as exc:
        pytest.fail(f"the engine's tokenize endpoint could not count the prompt: {exc}")
    body: dict[str, Any] = {"model": acceptance.target.model, "prompt": prompt, "temperature": 0,
                            "max_tokens": MAX_TOKENS, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    mode = "streamed" if stream else "non-streamed"
    with allure.step(f"POST /v1/completions ({mode})"):
        exchange = await raw_client.post("/v1/completions", body)
        attach_exchange(exchange, acceptance.redactor)
    usage = _usage_prompt_tokens(reply_of(exchange), stream)
    accounting = PromptAccounting(text_tokens=expected, text_counted_with=counted_with, usage_prompt_tokens=usage,
                                  tolerance=0, template_tokens_max=0)
    _record(request, accounting, acceptance)
    assert usage is not None, f"the reply has no usage.prompt_tokens to compare (the prompt counts {expected})"
    assert accounting.difference == 0, (
        f"usage.prompt_tokens is {usage} but {counted_with} counts {expected} for the same prompt: "
        f"{accounting.difference:+d} tokens (tolerance 0)")
