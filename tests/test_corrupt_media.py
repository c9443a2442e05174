"""Corrupt media (TEST-PLAN §6): refused with a 4xx and an error body, and the engine keeps serving.

Each corrupt sample (``media/corrupt/``: truncated PNG, random bytes labelled as
PNG, a valid PNG header with a broken body, invalid base64, a zero-byte file, a
truncated MP4, random bytes labelled as MP4) must get a 4xx with an error body, and
so must valid media that is not what it says (PNG bytes sent as a video/mp4 part, a PNG
whose data URL declares text/plain: issue 40 found vLLM answering the first with 500 and
taking the second). A 5xx is "server error on client data" (SGLang in seed 001); a hang
fails at the idle timeout. Whether the engine still answers afterwards is a separate check,
so a crash is its own failure. More images or videos in one prompt than deployments take
must be refused with a 4xx or answered, never a 5xx (the deployment's limit is its own).

These checks run on every model, text-only ones included: they test the engine's
input validation, which a text-only deployment needs as much as a multimodal one
(clients send images to whatever is behind the URL). A text-only model is expected
to refuse any media with a 4xx (vLLM does), so the report shows what the engine
answers to media it cannot take; the last check sends it valid media to make that
explicit. Requests are not streamed: the status code is what is checked, and it
is decided before any stream starts.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.media import library as media
from engine_acceptance.wire.types import Exchange
from engine_acceptance.media.messages import attach_media
from engine_acceptance.wire.media_parts import media_part, user_turn
from engine_acceptance.wire.contract import refusal_problem
from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.report_attachments import attach_json
from engine_acceptance.resources import load_prompts

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.corrupt_media]

CASES: dict[str, Any] = load_prompts("image")["corrupt"]


def _content_type(part: str, engine_profile: EngineProfile) -> str | None:
    if part == "image":
        return "image_url"
    return engine_profile.video_content_type


def _part_type_or_skip(part: str, engine_profile: EngineProfile) -> str:
    """The content-part type `part` media is sent in; skips the check when the engine profile cannot say."""
    content_type = _content_type(part, engine_profile)
    if content_type is None:
        pytest.skip(engine_profile.no_video_reason())
    return content_type


def _media_request(content_type: str, url: str) -> dict[str, Any]:
    return {"messages": user_turn(CASES["prompt"], [media_part(content_type, url)]),
            "temperature": 0, "max_tokens": 64}


def _normal_request() -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": CASES["recovery_prompt"]}], "temperature": 0, "max_tokens": 16}


def _outcome(exchange: Exchange) -> str:
    if exchange.status is not None:
        return f"HTTP {exchange.status}"
    return f"no answer: {exchange.describe_failure()}"


# Defined first so that, run in file order, a crash on the first corrupt sample is
# reported here with the sample that caused it.
async def test_engine_keeps_serving_after_corrupt_media(chat, acceptance, engine_profile) -> None:
    before = await chat(_normal_request(), stream=False, label="normal request before corrupt media")
    assert before.ok, (
        "the engine did not answer a normal request before this check sent any corrupt media "
        f"({before.describe_failure()}); an earlier request may already have stopped it")
    sent: list[str] = []
    for sample_id in media.CORRUPT_SAMPLES:
        sample = media.corrupt_sample(sample_id)
        content_type = _content_type(sample.part, engine_profile)
        if content_type is None:
            continue  # the video samples, when the profile cannot say how to send them
        corrupt = await chat(_media_request(content_type, sample.url), stream=False, label=f"corrupt {sample_id}")
        sent.append(f"{sample_id}: {_outcome(corrupt)}")
        after = await chat(_normal_request(), stream=False, label=f"normal request after {sample_id}")
        assert after.ok, (
            f"the engine stopped serving: after the corrupt sample {sample_id} ({_outcome(corrupt)}) "
            f"a normal request failed: {after.describe_failure()}")
    attach_json("corrupt samples sent, each followed by a normal request", sent, acceptance.redactor)


@pytest.mark.parametrize("sample_id", media.CORRUPT_SAMPLES)
async def test_corrupt_media_is_rejected_with_4xx_and_an_error_body(chat, engine_profile, sample_id: str) -> None:
    sample = media.corrupt_sample(sample_id)
    content_type = _part_type_or_skip(sample.part, engine_profile)
    exchange = await chat(_media_request(content_type, sample.url), stream=False, label=f"corrupt {sample_id}")
    problem = refusal_problem(exchange)
    which = "mislabelled sample" if sample.mislabelled else "corrupt sample"
    assert problem is None, f"{which} {sample_id} ({sample.what}), sent as {content_type}: {problem}"


@pytest.mark.parametrize("capability", ["image", "video"], ids=["many-images", "many-videos"])
async def test_more_media_than_the_engine_takes_is_refused_with_4xx_not_a_5xx(chat, acceptance, model_profile,
                                                                             engine_profile, capability: str) -> None:
    if not model_profile.has(capability):
        pytest.skip(f"the deployment does not serve {capability!r}: any {capability} is refused "
                    "(test_media_a_text_only_model_cannot_take_is_refused_with_4xx)")
    content_type = _part_type_or_skip(capability, engine_profile)
    many = CASES["many"][capability]
    parts = [media_part(content_type, media.data_uri(many["file"]))] * many["count"]
    body = {"messages": user_turn(CASES["prompt"], parts), "temperature": 0, "max_tokens": 16}
    exchange = await chat(body, stream=False, label=f"{many['count']} x {many['file']}")
    # A deployment that takes them all answers; one with a lower limit (vLLM's --limit-mm-per-prompt)
    # refuses: either is the engine's to choose. A 5xx, a hang or a crash is not.
    problem = None if exchange.ok else refusal_problem(exchange)
    assert problem is None, f"{many['count']} {capability}s of media/{many['file']} in one prompt: {problem}"
    after = await chat(_normal_request(), stream=False, label=f"normal request after {many['count']} {capability}s")
    assert after.ok, (f"the engine stopped serving: after {many['count']} {capability}s in one prompt "
                      f"({_outcome(exchange)}) a normal request failed: {after.describe_failure()}")
    attach_json(f"{many['count']} {capability}s in one prompt", _outcome(exchange), acceptance.redactor)


# Ids are not the bare capability names: those are marker names, and a report groups by them.
@pytest.mark.parametrize("capability", ["image", "video"], ids=["valid-image", "valid-video"])
async def test_media_a_text_only_model_cannot_take_is_refused_with_4xx(chat, model_profile, engine_profile,
                                                                       capability: str) -> None:
    if model_profile.has(capability):
        pytest.skip(f"the deployment serves {capability!r} (declared or discovered): test_{capability}.py checks "
                    "what the model reads")
    content_type = _part_type_or_skip(capability, engine_profile)
    name = CASES["unsupported"][capability]
    attach_media(name)
    exchange = await chat(_media_request(content_type, media.data_uri(name)), stream=False,
                          label=f"valid {capability} to a model without {capability!r}")
    problem = refusal_problem(exchange)
    assert problem is None, (
        f"valid {capability} media/{name} sent to a model whose profile ({model_profile.name!r}) lacks "
        f"{capability!r}: {problem}. If the model does take {capability}, add it to the profile's capabilities; "
        "if not, the engine dropped the media and answered anyway")
