"""Video understanding (TEST-PLAN §5): the background colours of a 16-frame video, in order.

The video is sent as a base64 data URI in the content part the engine profile names
(``features.video_content_type``, e.g. ``video_url``), in each container the profile
lists (``features.video_containers``; MP4 alone when absent). Colour words are
matched in Chinese or English. One check needs no reading: the video is counted in usage
and the reply, streamed or not, completes.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.media import library as media
from engine_acceptance.assertions import assert_no_problems, reply_of, short
from engine_acceptance.media.counted import media_count_problems
from engine_acceptance.media.messages import attach_media, colors_named
from engine_acceptance.wire.media_parts import media_part, user_turn
from engine_acceptance.profiles.profile import EngineProfile
from engine_acceptance.resources import load_prompts
from engine_acceptance.session import AcceptanceSession

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.video, pytest.mark.requires("video")]

CASES: dict[str, Any] = load_prompts("video")
DEFAULT_CONTAINERS = ("mp4",)
# As for images (tests/test_image.py): reading the frames is the model's perception, so at
# least this share of the K samples (kind ``image``) must name the colours in order.
READ_SHARE = 0.6


def video_content_type(engine_profile: EngineProfile) -> str:
    """The content-part type the engine takes video in; skips the check when the profile has none."""
    content_type = engine_profile.video_content_type
    if not content_type:
        pytest.skip(engine_profile.no_video_reason())
    return content_type


@pytest.mark.trials("image", at_least=READ_SHARE)
@pytest.mark.parametrize("container", sorted(CASES["colors_in_order"]["files"]))
async def test_video_background_colors_are_listed_in_order(chat, stream, engine_profile, model_profile,
                                                           acceptance: AcceptanceSession, container: str,
                                                           trials) -> None:
    content_type = video_content_type(engine_profile)
    containers = engine_profile.features.get("video_containers") or DEFAULT_CONTAINERS
    if container not in containers:
        pytest.skip(f"engine profile {engine_profile.name!r} does not list {container!r} in "
                    f"features.video_containers ({', '.join(containers)})")
    case = CASES["colors_in_order"]
    name = case["files"][container]
    attach_media(name)
    body = {
        "messages": user_turn(case["prompt"], [media_part(content_type, media.data_uri(name))]),
        "temperature": 0,
        # Room for a reasoning model to think and answer, capped by the model profile as every long reply is.
        "max_tokens": model_profile.output_budget(CASES["max_tokens"]),
    }
    expected = case["colors"]

    async def sample() -> None:
        reply = reply_of(await chat(body, stream=stream, label=name))
        named = [color for color in colors_named(reply.content) if color in expected]
        # Discovery's finding leads the message: a video dropped in silence fails on the colours alone.
        assert named == expected, (
            f"{acceptance.broken_reason('video')}expected the background colours in order, "
            f"{' then '.join(expected)}; the answer names {named or 'none of them'} in that order: "
            f"{short(reply.content)!r}")

    await trials(sample)


async def test_the_video_is_counted_in_prompt_tokens_and_the_reply_completes(chat, stream, engine_profile,
                                                                          model_profile,
                                                                          acceptance: AcceptanceSession) -> None:
    content_type = video_content_type(engine_profile)
    case = CASES["colors_in_order"]
    name = case["files"]["mp4"]
    attach_media(name)
    problems = await media_count_problems(chat, case["prompt"], media_part(content_type, media.data_uri(name)),
                                          what=name, stream=stream,
                                          max_tokens=model_profile.output_budget(CASES["max_tokens"]))
    assert_no_problems(problems, header=f"{acceptance.broken_reason('video')}the engine's handling of {name}")
