"""Self-tests of the built-in reference engine, run for real over HTTP.

Each engine is a subprocess started with the launcher, exactly as the suite starts
it; requests go through plain urllib (and aiohttp for concurrency), and streams are
parsed by hand here so these tests do not depend on the suite's own SSE client.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from tokenizers import Tokenizer

from engine_acceptance.reference_engine import launcher
from engine_acceptance.reference_engine import (
    DEFECTS,
    REFERENCE_VERSION,
    RunningReferenceEngine,
    get_tokenizer,
    start_reference_engine,
)

MODEL = "reference-model"
API_KEY = "sk-selftest-0123456789"


# --- engines -------------------------------------------------------------------------

class Engines:
    """Engines started on first use and stopped when the module ends."""

    def __init__(self) -> None:
        self._running: dict[tuple[Any, ...], RunningReferenceEngine] = {}

    def get(self, convention: str = "vllm", *, api_key: str | None = None, defect: str | None = None) -> str:
        key = (convention, api_key, defect)
        if key not in self._running:
            self._running[key] = start_reference_engine(
                convention=convention, api_key=api_key, defects=[defect] if defect else ()
            )
        return self._running[key].url

    def stop_all(self) -> None:
        for engine in self._running.values():
            engine.stop()


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    registry = Engines()
    yield registry
    registry.stop_all()


@pytest.fixture(scope="module")
def vllm(engines: Engines) -> str:
    return engines.get("vllm")


@pytest.fixture(scope="module")
def sglang(engines: Engines) -> str:
    return engines.get("sglang")


# --- plain HTTP helpers ------------------------------------------------------------------

@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(method: str, url: str, body: Any = None, *, headers: dict[str, str] | None = None, raw: bytes | None = None) -> Reply:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Reply(resp.status, dict(resp.headers), resp.read())
    except urllib.error.HTTPError as err:
        return Reply(err.code, dict(err.headers), err.read())


def chat(base: str, content: str | list[dict[str, Any]], **extra: Any) -> Reply:
    messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
    return request("POST", f"{base}/v1/chat/completions", {"model": MODEL, "messages": messages, **extra})


def sse_events(body: bytes) -> list[str]:
    """The `data:` payloads of an event stream, in order, parsed by hand."""
    text = body.decode("utf-8")
    assert text.endswith("\n\n"), "every event must end with a blank line"
    events = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        events.append(block[len("data: "):])
    return events


@dataclass
class Stream:
    chunks: list[dict[str, Any]]
    done: bool
    content: str
    reasoning: str
    finish_reason: str | None
    usage: dict[str, Any] | None


def stream_chat(base: str, content: str | list[dict[str, Any]], *, reasoning_field: str = "reasoning", **extra: Any) -> Stream:
    reply = chat(base, content, stream=True, **extra)
    assert reply.status == 200, reply.body
    assert reply.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(reply.body)
    done = events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in (events[:-1] if done else events)]
    assert "[DONE]" not in events[:-1], "[DONE] must be the last event"
    parts: dict[str, list[str]] = {"content": [], "reasoning": []}
    finish, usage = None, None
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        if chunk.get("usage"):
            assert chunk["choices"] == []
            usage = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            parts["content"].append(delta.get("content") or "")
            parts["reasoning"].append(delta.get(reasoning_field) or "")
            finish = choice["finish_reason"] or finish
    return Stream(chunks, done, "".join(parts["content"]), "".join(parts["reasoning"]), finish, usage)


# --- readiness and identity ------------------------------------------------------------------

def test_health_answers_200_with_empty_body(vllm: str) -> None:
    reply = request("GET", f"{vllm}/health")
    assert (reply.status, reply.body) == (200, b"")


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_models_lists_the_served_model_owned_by_the_imitated_engine(engines: Engines, convention: str) -> None:
    body = request("GET", f"{engines.get(convention)}/v1/models").json()
    assert body["object"] == "list"
    [card] = body["data"]
    assert card["id"] == MODEL and card["root"] == MODEL and card["object"] == "model"
    assert card["owned_by"] == convention
    assert card["max_model_len"] == 32768 and isinstance(card["created"], int)


def test_vllm_version_endpoint_names_the_reference_engine(vllm: str) -> None:
    assert request("GET", f"{vllm}/version").json() == {"version": REFERENCE_VERSION}
    assert "+reference" in REFERENCE_VERSION
    assert request("GET", f"{vllm}/get_server_info").status == 404


@pytest.mark.parametrize("path", ["/get_server_info", "/server_info"])
def test_sglang_server_info_reports_version_and_model(sglang: str, path: str) -> None:
    body = request("GET", f"{sglang}{path}").json()
    assert body["version"] == REFERENCE_VERSION
    assert body["model_path"] == MODEL
    assert request("GET", f"{sglang}/version").status == 404


# --- chat ------------------------------------------------------------------------------------

def test_non_streamed_chat_has_vllm_shape_and_consistent_usage(vllm: str) -> None:
    reply = chat(vllm, "你好，请介绍一下你自己。")
    assert reply.status == 200
    body = reply.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == MODEL
    [choice] = body["choices"]
    message = choice["message"]
    assert message["role"] == "assistant" and message["tool_calls"] == []
    assert message["content"] == "我是 engine-acceptance 参考引擎。"
    assert message["reasoning"] and "<think>" not in message["content"]
    assert choice["finish_reason"] == "stop" and choice["logprobs"] is None
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_streamed_chat_events_reassemble_to_the_non_streamed_reply(vllm: str) -> None:
    question = "计算 19×37，只输出结果。"
    plain = chat(vllm, question).json()
    stream = stream_chat(vllm, question, stream_options={"include_usage": True})
    assert stream.done
    first = stream.chunks[0]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""}
    assert len({c["id"] for c in stream.chunks}) == 1
    finish_chunk, usage_chunk = stream.chunks[-2], stream.chunks[-1]
    assert finish_chunk["choices"][0]["delta"] == {} and finish_chunk["choices"][0]["finish_reason"] == "stop"
    # The same prompt a second time: all as before, but its prefix is now cached.
    assert usage_chunk["choices"] == []
    assert {**stream.usage, "prompt_tokens_details": None} == {**plain["usage"], "prompt_tokens_details": None}
    assert stream.usage["prompt_tokens_details"]["cached_tokens"] > 0
    # Reasoning comes in several small deltas, all before the content.
    kinds = [next(iter(c["choices"][0]["delta"])) for c in stream.chunks[1:-2]]
    assert kinds.count("reasoning") > 3
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")
    message = plain["choices"][0]["message"]
    assert (stream.content, stream.reasoning) == (message["content"], message["reasoning"]) == ("703", message["reasoning"])


def test_stream_without_include_usage_sends_no_usage_chunk(vllm: str) -> None:
    stream = stream_chat(vllm, "17+28")
    assert stream.done and stream.usage is None and stream.content == "45"


def test_stream_options_without_stream_is_rejected(vllm: str) -> None:
    assert chat(vllm, "hi", stream_options={"include_usage": True}).status == 400


def test_sglang_stream_uses_reasoning_content_and_explicit_nulls(sglang: str) -> None:
    stream = stream_chat(sglang, "17+28", reasoning_field="reasoning_content", stream_options={"include_usage": True})
    assert stream.done and stream.content == "45" and stream.reasoning
    deltas = [c["choices"][0]["delta"] for c in stream.chunks if c["choices"]]
    assert all(set(d) == {"role", "content", "reasoning_content", "tool_calls"} for d in deltas)
    assert all("usage" in c for c in stream.chunks)
    message = chat(sglang, "17+28").json()["choices"][0]["message"]
    assert message["reasoning_content"] and "reasoning" not in message and message["tool_calls"] is None


@pytest.mark.parametrize(
    ("question", "answer"),
    [("计算 19×37，只输出结果。", "703"), ("17+28", "45"), ("What is (2 + 3) * 4?", "20"), ("7 ÷ 2 = ?", "3.5")],
    ids=["chinese-times", "plus", "parentheses", "division"],
)
def test_arithmetic_rule_answers_the_number(vllm: str, question: str, answer: str) -> None:
    assert chat(vllm, question).json()["choices"][0]["message"]["content"] == answer


def test_codename_is_acknowledged_then_recalled_from_earlier_turns(vllm: str) -> None:
    turn1 = [{"role": "user", "content": "请记住代号 jade-628。"}]
    ack = chat(vllm, turn1).json()["choices"][0]["message"]["content"]
    assert ack == "好的"
    turn2 = turn1 + [{"role": "assistant", "content": ack}, {"role": "user", "content": "刚才的代号是什么？只输出代号。"}]
    assert chat(vllm, turn2).json()["choices"][0]["message"]["content"] == "jade-628"
    assert stream_chat(vllm, turn2).content == "jade-628"
    assert chat(vllm, "What was the codename?").json()["choices"][0]["message"]["content"] == "No codename was given."


@pytest.mark.parametrize(
    "kwargs",
    [{"thinking_mode": "disabled"}, {"enable_thinking": False}, {"thinking": False}],
    ids=["thinking_mode", "enable_thinking", "thinking"],
)
def test_thinking_disabled_gives_no_reasoning(vllm: str, kwargs: dict[str, Any]) -> None:
    message = chat(vllm, "17+28", chat_template_kwargs=kwargs).json()["choices"][0]["message"]
    assert message["reasoning"] is None and message["content"] == "45"
    stream = stream_chat(vllm, "17+28", chat_template_kwargs=kwargs)
    assert stream.reasoning == "" and stream.content == "45"


def test_max_tokens_caps_reasoning_plus_content_with_finish_length(vllm: str) -> None:
    body = chat(vllm, "17+28", max_tokens=10).json()
    assert body["usage"]["completion_tokens"] == 10
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["content"] == ""
    stream = stream_chat(vllm, "17+28", max_completion_tokens=10)
    assert stream.finish_reason == "length"


# --- completions ------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_completions_with_token_ids_and_ignore_eos_give_exactly_max_tokens(vllm: str, stream: bool) -> None:
    body: dict[str, Any] = {"model": MODEL, "prompt": list(range(100, 228)), "max_tokens": 64, "ignore_eos": True, "temperature": 0}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    reply = request("POST", f"{vllm}/v1/completions", body)
    assert reply.status == 200
    if stream:
        events = sse_events(reply.body)
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
        usage = chunks[-1]["usage"]
    else:
        choice = reply.json()["choices"][0]
        text, finish, usage = choice["text"], choice["finish_reason"], reply.json()["usage"]
    assert get_tokenizer().count(text) == 64 == usage["completion_tokens"]
    assert usage["prompt_tokens"] == 128 and finish == "length"


def test_completions_batch_gives_one_choice_per_prompt(vllm: str) -> None:
    body = request("POST", f"{vllm}/v1/completions", {"prompt": ["hello", "world!"], "max_tokens": 200}).json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert all(c["finish_reason"] == "stop" for c in body["choices"])
    assert body["usage"]["prompt_tokens"] == 11


def test_out_of_vocabulary_token_id_is_rejected(vllm: str) -> None:
    reply = request("POST", f"{vllm}/v1/completions", {"prompt": [1, 2, 10**6], "max_tokens": 4})
    assert reply.status == 400 and "out of vocabulary" in reply.json()["error"]["message"]


# --- tokenizer -----------------------------------------------------------------------------------

def test_tokenize_messages_count_equals_chat_prompt_tokens(vllm: str) -> None:
    messages = [{"role": "system", "content": "你是助手。"}, {"role": "user", "content": "17+28 等于多少？"}]
    counted = request("POST", f"{vllm}/tokenize", {"model": MODEL, "messages": messages}).json()
    usage = chat(vllm, messages).json()["usage"]
    assert counted["count"] == usage["prompt_tokens"] == len(counted["tokens"])
    assert counted["max_model_len"] == 32768
    plain = request("POST", f"{vllm}/tokenize", {"prompt": "abc 你", "return_token_strs": True}).json()
    assert plain["count"] == 7 and len(plain["token_strs"]) == 7  # 3 ASCII + space + 3 UTF-8 bytes
    assert request("POST", f"{vllm}/detokenize", {"tokens": plain["tokens"]}).json() == {"prompt": "abc 你"}


def test_exported_tokenizer_json_counts_like_the_server() -> None:
    local = Tokenizer.from_str(get_tokenizer().to_json())
    text = "<|user|>\n计算 19×37\n<|assistant|>\n"
    assert local.encode(text, add_special_tokens=False).ids == get_tokenizer().encode(text)


@pytest.mark.parametrize("text", [
    "", "hello", "<|user|>\n计算 19×37\n<|assistant|>\n<think>a</think>b", "<think><think></think>", "<|endoftext|>" * 3,
    "<|image|><|video|> emoji 🙂 and <|tool|> <|system|>", "<|user", "</think>>", "<<|user|>|>",
], ids=["empty", "ascii", "chat", "markers", "eos", "mixed", "partial", "close-marker", "nested-brackets"])
def test_count_without_encoding_equals_the_encoded_length(text: str) -> None:
    assert get_tokenizer().count(text) == len(get_tokenizer().encode(text))


# --- validation and errors -----------------------------------------------------------------------

def test_errors_use_each_conventions_body(vllm: str, sglang: str) -> None:
    bad = request("POST", f"{vllm}/v1/chat/completions", raw=b"{not json")
    assert bad.status == 400 and bad.json()["error"]["code"] == 400
    missing = request("POST", f"{sglang}/v1/chat/completions", {"model": MODEL})
    body = missing.json()
    assert missing.status == 400 and body["object"] == "error" and body["code"] == 400 and body["message"]
    wrong_type = request("POST", f"{vllm}/v1/chat/completions", {"messages": "hi"})
    assert wrong_type.status == 400


def test_unknown_model_is_404_on_vllm_and_ignored_on_sglang(vllm: str, sglang: str) -> None:
    body = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
    reply = request("POST", f"{vllm}/v1/chat/completions", body)
    assert reply.status == 404
    assert reply.json()["error"]["message"] == "The model `nope` does not exist."
    assert request("POST", f"{sglang}/v1/chat/completions", body).status == 200


def test_prompt_longer_than_context_is_rejected(vllm: str) -> None:
    reply = chat(vllm, "x" * 40000)
    assert reply.status == 400 and "maximum context length" in reply.json()["error"]["message"]


def test_api_key_guards_v1_and_tokenize_but_not_health_or_version(engines: Engines) -> None:
    base = engines.get(api_key=API_KEY)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert request("POST", f"{base}/v1/chat/completions", body).status == 401
    wrong = request("POST", f"{base}/v1/chat/completions", body, headers={"Authorization": "Bearer wrong"})
    assert (wrong.status, wrong.json()) == (401, {"error": "Unauthorized"})
    assert request("GET", f"{base}/v1/models").status == 401
    assert request("POST", f"{base}/tokenize", {"prompt": "a"}).status == 401
    good = {"Authorization": f"Bearer {API_KEY}"}
    assert request("POST", f"{base}/v1/chat/completions", body, headers=good).status == 200
    assert request("GET", f"{base}/health").status == 200
    assert request("GET", f"{base}/version").status == 200


# --- defects ---------------------------------------------------------------------------------------

def test_reasoning_leak_puts_think_markers_in_streamed_content_only(engines: Engines) -> None:
    base = engines.get(defect="reasoning-leak")
    stream = stream_chat(base, "17+28")
    assert stream.reasoning == ""
    assert stream.content.startswith("<think>") and "</think>" in stream.content and stream.content.endswith("45")
    message = chat(base, "17+28").json()["choices"][0]["message"]
    assert message["content"] == "45" and message["reasoning"]


def test_no_done_ends_the_stream_without_done_after_the_finish_chunk(engines: Engines) -> None:
    stream = stream_chat(engines.get(defect="no-done"), "17+28", stream_options={"include_usage": True})
    assert not stream.done and stream.finish_reason == "stop" and stream.usage is not None


def test_bad_usage_adds_one_to_total_tokens_streamed_and_not(engines: Engines) -> None:
    base = engines.get(defect="bad-usage")
    usage = chat(base, "17+28").json()["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] + 1
    streamed = stream_chat(base, "17+28", stream_options={"include_usage": True}).usage
    assert streamed is not None and streamed["total_tokens"] == streamed["prompt_tokens"] + streamed["completion_tokens"] + 1


def test_empty_content_blanks_content_but_keeps_reasoning(engines: Engines) -> None:
    base = engines.get(defect="empty-content")
    message = chat(base, "17+28").json()["choices"][0]["message"]
    assert message["content"] == "" and message["reasoning"]
    stream = stream_chat(base, "17+28")
    assert stream.content == "" and stream.reasoning and stream.done


def test_unknown_defect_name_exits_2_listing_valid_names() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "engine_acceptance.reference_engine", "--port", "0", "--inject", "no-such-defect"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "no-such-defect" in result.stderr and all(name in result.stderr for name in DEFECTS)
    with pytest.raises(ValueError, match="no-such-defect"):
        start_reference_engine(defects=["no-such-defect"])


@pytest.mark.parametrize("started_by", ["command", "forkserver"])
def test_both_ways_of_starting_give_the_same_engine(started_by: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The self-tests fork their engines from a forkserver (selftest/conftest.py); a run starts the command.
    if started_by == "command":
        monkeypatch.setattr(launcher, "_forkserver", None)
    else:
        launcher.start_from_a_forkserver()
    engine = start_reference_engine(api_key=API_KEY)
    try:
        assert os.getpgid(engine.pid) == engine.pid, "not in a process group of its own"
        assert request("GET", f"{engine.url}/v1/models").status == 401
        assert request("GET", f"{engine.url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}).status == 200
        assert API_KEY not in engine.read_log()
    finally:
        code = engine.stop()
    assert code == 0, engine.read_log()
    assert "listening on" in engine.read_log()


# --- robustness ------------------------------------------------------------------------------------

def test_client_leaving_mid_stream_does_not_hurt_the_server(vllm: str) -> None:
    parts = urlsplit(vllm)
    for _ in range(3):
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        body = json.dumps({"messages": [{"role": "user", "content": "hello " * 10}], "stream": True})
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.read(64)
        conn.close()  # leave while the engine is still generating
    assert stream_chat(vllm, "17+28").done


def test_many_concurrent_streams_all_complete(vllm: str) -> None:
    async def one(session: aiohttp.ClientSession, index: int) -> bytes:
        payload = {"messages": [{"role": "user", "content": f"{index}+1"}], "stream": True}
        async with session.post(f"{vllm}/v1/chat/completions", json=payload) as resp:
            assert resp.status == 200
            return await resp.read()

    async def run() -> list[bytes]:
        async with aiohttp.ClientSession() as session:
            return await asyncio.gather(*(one(session, i) for i in range(64)))

    bodies = asyncio.run(run())
    for index, body in enumerate(bodies):
        events = sse_events(body)
        assert events[-1] == "[DONE]"
        content = "".join(
            (json.loads(e)["choices"][0]["delta"].get("content") or "") for e in events[:-1]
        )
        assert content == str(index + 1)
