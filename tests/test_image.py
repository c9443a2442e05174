"""Image understanding (TEST-PLAN §5): a bar chart, colours of the largest area, two images.

Media comes from ``media/`` (deterministic, sha256-checked) and is sent as base64
data URIs in ``image_url`` parts. Answers are read tolerantly: Chinese or English
colour words, numbers with or without units. Each check attaches a thumbnail of
what it sent next to the model's reply, and runs streamed and not, as a trial of kind
``image`` (K samples sent together, at least READ_SHARE of them right). Where discovery found
image input broken (answered 200 but not counted in prompt_tokens: dropped), each failure
message leads with that finding, so a wrong colour is not mistaken for the model's; a record
is matched without that lead (docs/profiles-and-records.md), in the words of the problem. One check
needs no reading at all: the image is counted in usage and the reply, streamed or not, completes
(it holds for a model that cannot see, and fails for an engine that drops the part).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine_acceptance.media import library as media
from engine_acceptance.assertions import assert_no_problems, no_answer, reply_of, short
from engine_acceptance.media.counted import media_count_problems
from engine_acceptance.media.messages import (
    COLOR_WORDS,
    attach_media,
    colors_named,
    drop_clause,
    numbers_in,
    values_in_order,
)
from engine_acceptance.wire.media_parts import image_part, user_turn
from engine_acceptance.resources import load_prompts
from engine_acceptance.session import AcceptanceSession

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio, pytest.mark.image, pytest.mark.requires("image")]

CASES: dict[str, Any] = load_prompts("image")
# Reading a picture is the model's perception, which a batched vision encoder can tip one way
# or the other even at temperature 0: at least this share of the K samples must read it right.
# The engine defects seen (an image dropped, a cache keyed by size, one colour seen black) fail
# every sample, so the share does not let them through.
READ_SHARE = 0.6


def _case_id(case: dict[str, Any]) -> str:
    return case["file"].removesuffix(".png")


@pytest.fixture
def why(acceptance: AcceptanceSession) -> str:
    """Leads each failure message when discovery found image input broken (a part dropped, say); else empty."""
    return acceptance.broken_reason("image")


def _words(color: str) -> str:
    return "/".join(COLOR_WORDS[color][:3])


@pytest.fixture
def max_tokens(model_profile) -> int:
    """Room for a reasoning model to think and answer, capped by the model profile as every long reply is."""
    return model_profile.output_budget(CASES["max_tokens"])


def _shown(files: list[str]) -> list[str]:
    """Attach a thumbnail of each image once, before the samples that send them."""
    for name in files:
        attach_media(name)
    return files


async def _ask(chat, prompt: str, files: list[str], *, stream: bool, why: str, max_tokens: int) -> str:
    body = {
        "messages": user_turn(prompt, [image_part(media.data_uri(name)) for name in files]),
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    reply = reply_of(await chat(body, stream=stream, label=" + ".join(files)))
    assert reply.content.strip(), why + no_answer(reply, f"content is empty (reasoning={short(reply.reasoning)!r})")
    return reply.content


@pytest.mark.trials("image", at_least=READ_SHARE)
async def test_chart_values_are_read_and_the_dropping_quarter_is_named(chat, stream, why: str, max_tokens: int,
                                                                       trials) -> None:
    case = CASES["chart"]
    files = _shown([case["file"]])

    async def sample() -> None:
        answer = await _ask(chat, case["prompt"], files, stream=stream, why=why, max_tokens=max_tokens)
        values = case["values"]
        # Two readings of one answer: each judged, so a record of one leaves the other judged.
        problems = []
        if not values_in_order(answer, list(values.values())):
            problems.append(f"{why}expected the values {', '.join(f'{q}={v}' for q, v in values.items())} in this "
                            f"order; the answer has the numbers {numbers_in(answer)}: {short(answer)!r}")
        if not drop_clause(answer, case["dropped"]):
            problems.append(f"{why}expected {case['dropped']} named as the quarter that dropped from the one before; "
                            f"no sentence names it with a word for a drop: {short(answer)!r}")
        assert_no_problems(problems)

    await trials(sample)


@pytest.mark.trials("image", at_least=READ_SHARE)
@pytest.mark.parametrize("case", CASES["largest_color"]["cases"], ids=_case_id)
async def test_color_of_the_largest_area_is_named(chat, stream, why: str, max_tokens: int,
                                                  case: dict[str, Any], trials) -> None:
    files = _shown([case["file"]])

    async def sample() -> None:
        answer = await _ask(chat, CASES["largest_color"]["prompt"], files, stream=stream, why=why,
                            max_tokens=max_tokens)
        named = colors_named(answer)
        # The border is white and the marks black: naming them too is fine, another hue is not.
        others = [color for color in named if color not in (case["color"], "white", "black")]
        assert case["color"] in named and not others, (
            f"{why}expected the largest area of {case['file']} named {case['color']} ({_words(case['color'])}); "
            f"the answer names {named or 'no colour'}: {short(answer)!r}")

    await trials(sample)


@pytest.mark.trials("image", at_least=READ_SHARE)
@pytest.mark.parametrize("case", CASES["pure_color"]["cases"], ids=_case_id)
async def test_pure_color_image_is_named_by_its_color(chat, stream, why: str, max_tokens: int,
                                                      case: dict[str, Any], trials) -> None:
    files = _shown([case["file"]])

    async def sample() -> None:
        answer = await _ask(chat, CASES["pure_color"]["prompt"], files, stream=stream, why=why,
                            max_tokens=max_tokens)
        named = colors_named(answer)
        assert named[:1] == [case["color"]], (
            f"{why}{case['file']} is one single colour, {case['color']} ({_words(case['color'])}); "
            f"the answer names {named or 'no colour'}: {short(answer)!r}")

    await trials(sample)


@pytest.mark.trials("image", at_least=READ_SHARE)
async def test_two_images_in_one_request_are_read_in_order(chat, stream, why: str, max_tokens: int,
                                                           trials) -> None:
    case = CASES["two_images"]
    files = _shown(case["files"])

    async def sample() -> None:
        answer = await _ask(chat, case["prompt"], files, stream=stream, why=why, max_tokens=max_tokens)
        hues = [color for color in colors_named(answer) if color not in ("white", "black")]
        assert hues == case["colors"], (
            f"{why}expected the images' main colours in order, {' then '.join(case['colors'])}; "
            f"the answer names {hues or 'no colour'} (white and black ignored): {short(answer)!r}")

    await trials(sample)


async def test_the_image_is_counted_in_prompt_tokens_and_the_reply_completes(chat, stream, why: str,
                                                                          max_tokens: int) -> None:
    case = CASES["largest_color"]
    name = _shown([case["cases"][0]["file"]])[0]
    problems = await media_count_problems(chat, case["prompt"], image_part(media.data_uri(name)), what=name,
                                          stream=stream, max_tokens=max_tokens)
    assert_no_problems(problems, header=f"{why}the engine's handling of {name}")
