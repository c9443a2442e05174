"""End to end: the image, video and corrupt-media checks against the reference engine.

A clean engine passes them all; each media defect fails exactly the checks that
exist for it, for the reason they exist; a text-only profile skips image and video
with the reason; an engine that answers media 200 and drops it is discovered broken,
and its image and video checks fail saying so. Runs go through ``pytester`` (suite_runner.run_suite).

Every run sends one sample per image check (``--trials=1``, ``FAST``): the reference model reads a
picture the same way every time and each media defect fails every sample, so K=3 only tripled
the image requests (issue 27). Discovery on a profile that declares no media is proven in the
runs that need such a profile anyway: with every media check on vLLM's convention, with the
image and corrupt-media checks on SGLang's.
"""

from __future__ import annotations

import base64
import json

import pytest
from suite_runner import ENGINE_WITHOUT_VIDEO, NO_LATENCY, engine_without_video, failed, run_suite

from engine_acceptance.media import library as media

pytestmark = pytest.mark.e2e

MEDIA_MARKERS = "image or video or corrupt_media"
# The engine's latency model is waiting here, and one sample per check proves what three do.
FAST = (*NO_LATENCY, "--trials=1")
CORRUPT = "test_corrupt_media.py::test_corrupt_media_is_rejected_with_4xx_and_an_error_body"
CORRUPT_STATUS_CHECKS = {f"{CORRUPT}[{sample}]" for sample in media.CORRUPT_SAMPLES}
RECOVERY = "test_corrupt_media.py::test_engine_keeps_serving_after_corrupt_media"
TEXT_ONLY_REFUSAL = "test_corrupt_media.py::test_media_a_text_only_model_cannot_take_is_refused_with_4xx"
MANY = "test_corrupt_media.py::test_more_media_than_the_engine_takes_is_refused_with_4xx_not_a_5xx"
MANY_CHECKS = {f"{MANY}[many-images]", f"{MANY}[many-videos]"}
PURE_COLOR = {
    f"test_image.py::test_pure_color_image_is_named_by_its_color[{mode}-pure-{color}-512]"
    for mode in ("non-streamed", "streamed") for color in ("red", "blue")
}


def _report_text(pytester: pytest.Pytester, result: pytest.RunResult) -> str:
    files = (pytester.path / "allure-results").iterdir()
    return "\n".join(path.read_text(errors="replace") for path in files if path.suffix in (".json", ".txt")) \
        + result.stdout.str() + result.stderr.str()


def test_clean_engine_passes_every_media_check_and_keeps_base64_out_of_the_report(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS)
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    skipped = {test_id for test_id, outcome in outcomes.items() if outcome == "skipped"}
    # The only skips: the text-only checks, since the reference model takes images and video.
    assert skipped == {f"{TEXT_ONLY_REFUSAL}[valid-image]", f"{TEXT_ONLY_REFUSAL}[valid-video]"}
    # mp4, webm x 2 modes, and the usage check x 2 modes
    assert sum(1 for test_id in outcomes if test_id.startswith("test_video.py")) == 6
    report = _report_text(pytester, result)
    for name in ("chart-q1-q3.png", "bordered-red-1024.png", "video-rgb-16f.mp4"):
        payload = base64.b64encode(media.load(name)).decode("ascii")
        assert payload[200:264] not in report, f"base64 of {name} found in the report"
    thumbnails = list((pytester.path / "allure-results").glob("*-attachment.png"))
    assert thumbnails, "no media thumbnail attached"


def test_sglang_convention_refuses_corrupt_media_with_its_flat_error_body_and_discovers_image_served(
        pytester: pytest.Pytester) -> None:
    # A profile without media (generic) on SGLang's convention: discovery finds the image served by its
    # prompt tokens, and the image checks run and pass on that finding alone.
    result, outcomes = run_suite(pytester, *FAST, "-m", "corrupt_media or image", "--profile", "generic",
                                 "--convention", "sglang")
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    assert {outcomes[t] for t in CORRUPT_STATUS_CHECKS} == {"passed"} and outcomes[RECOVERY] == "passed"
    _assert_image_discovered_served(pytester, outcomes)


def test_media_500_fails_exactly_the_corrupt_media_status_checks(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS, "--inject", "media-500")
    # Every media it cannot decode is a 500: the corrupt and mislabelled samples'. More images or videos than
    # the engine takes is another refusal (media-limit-500 makes it a 500), still a 400 here.
    assert failed(outcomes) == CORRUPT_STATUS_CHECKS, result.stdout.str()[-3000:]
    assert outcomes[RECOVERY] == "passed"
    result.stdout.fnmatch_lines(["*corrupt sample truncated-png*server error on client data: HTTP 500*"])
    assert result.ret == 1


def test_mislabelled_media_and_media_over_the_limit_each_fail_their_own_check(pytester: pytest.Pytester) -> None:
    # What issue 40 found on vLLM 0.32, one defect each: PNG bytes in a video/mp4 part answered 500
    # (media-mismatch-500), a PNG labelled text/plain taken (media-type-ignored); and a 500 for more
    # media than the engine takes (media-limit-500). Other corrupt media is still refused with 400.
    result, outcomes = run_suite(pytester, *FAST, "-m", "corrupt_media", "--inject", "media-mismatch-500",
                                 "--inject", "media-type-ignored", "--inject", "media-limit-500")
    assert failed(outcomes) == {f"{CORRUPT}[png-bytes-as-mp4]", f"{CORRUPT}[png-labelled-text-plain]"} | MANY_CHECKS, \
        result.stdout.str()[-3000:]
    assert outcomes[RECOVERY] == "passed"
    result.stdout.fnmatch_lines_random([
        "*mislabelled sample png-bytes-as-mp4 (*), sent as video_url: server error on client data: HTTP 500*"
        "upper bound and lower bound inconsistent with step sign*",
        "*mislabelled sample png-labelled-text-plain (*declares text/plain*), sent as image_url: the engine "
        "accepted it: HTTP 200*",
        "*16 images of media/pure-red-512.png in one prompt: server error on client data: HTTP 500*At most 8 "
        "image(s) may be provided in one prompt*",
        "*4 videos of media/video-rgb-16f.mp4 in one prompt: server error on client data: HTTP 500*At most 2 "
        "video(s)*",
    ])
    assert result.ret == 1


def test_media_crash_fails_the_recovery_check_and_the_run_still_ends(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *FAST, "-m", f"{MEDIA_MARKERS} or text", "--inject", "media-crash",
                                 "--idle-timeout", "10", "--request-timeout", "20")
    assert result.ret == 1, result.stdout.str()[-3000:]
    assert outcomes[RECOVERY] == "failed"
    result.stdout.fnmatch_lines(["*the engine stopped serving: after the corrupt sample truncated-png*"])
    # The session ended with a summary that accounts for every check: after the crash the
    # other checks failed on a refused connection, none hung the run.
    counted = result.parseoutcomes()
    assert sum(counted.get(kind, 0) for kind in ("passed", "failed", "skipped", "error", "errors")) == len(outcomes)
    assert counted["failed"] > 1


def test_black_pure_color_fails_only_the_pure_color_check(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS, "--inject", "black-pure-color")
    assert failed(outcomes) == PURE_COLOR, result.stdout.str()[-3000:]
    # fnmatch reads [...] as a character class: ? stands for the brackets.
    result.stdout.fnmatch_lines(["*pure-red-512.png is one single colour, red*the answer names ?'black'?*"])


def test_text_only_profile_skips_image_and_video_with_the_reason(pytester: pytest.Pytester) -> None:
    # A deployment that refuses media (vLLM's "not a multimodal model"), with a profile that declares none.
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS, "--profile", "generic",
                                 "--reference-serves=text-only", "-rs")
    image_and_video = {t: o for t, o in outcomes.items() if t.startswith(("test_image.py", "test_video.py"))}
    assert image_and_video and set(image_and_video.values()) == {"skipped"}
    result.stdout.fnmatch_lines(["*not served by the engine: *HTTP 400*is not a multimodal model*"])
    # Corrupt media is still refused: input validation does not depend on the model.
    assert {outcomes[t] for t in CORRUPT_STATUS_CHECKS} == {"passed"} and outcomes[RECOVERY] == "passed"
    assert not failed(outcomes), result.stdout.str()[-3000:]


def test_a_profile_without_media_on_an_engine_that_reads_them_gets_them_tested(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS, "--profile", "generic")
    image_and_video = {t: o for t, o in outcomes.items() if t.startswith(("test_image.py", "test_video.py"))}
    assert image_and_video and set(image_and_video.values()) == {"passed"}, result.stdout.str()[-3000:]
    assert result.ret == 0 and not failed(outcomes), result.stdout.str()[-3000:]
    # On vLLM's convention (the default) discovery found the image served by its prompt tokens.
    _assert_image_discovered_served(pytester, outcomes)


def _discovered(pytester: pytest.Pytester, capability: str) -> dict[str, str]:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))["discovery"]["probes"][capability]


def _image_and_video(outcomes: dict[str, str]) -> dict[str, str]:
    return {t: o for t, o in outcomes.items() if t.startswith(("test_image.py", "test_video.py"))}


def _assert_image_discovered_served(pytester: pytest.Pytester, outcomes: dict[str, str]) -> None:
    """Every image check ran and passed, and discovery found the image served by its prompt tokens."""
    images = {t: o for t, o in outcomes.items() if t.startswith("test_image.py")}
    assert images and set(images.values()) == {"passed"}, images
    probe = _discovered(pytester, "image")
    assert probe["state"] == "served" and " with the image, " in probe["evidence"], probe


def test_media_answered_but_dropped_is_discovered_broken_and_fails_every_image_and_video_check(
        pytester: pytest.Pytester) -> None:
    # As llama.cpp's server with a text-only GGUF: 200, the part dropped. No profile declares
    # media, so the checks run only because discovery found them broken, not "served".
    result, outcomes = run_suite(pytester, *FAST, "-m", MEDIA_MARKERS, "--profile", "generic",
                                 "--inject", "media-ignored")
    dropped = _image_and_video(outcomes)
    assert len(dropped) == 24 and failed(outcomes) == set(dropped), result.stdout.str()[-3000:]
    # Corrupt media is still refused: the parts are dropped after they are decoded.
    assert {outcomes[t] for t in CORRUPT_STATUS_CHECKS} == {"passed"} and outcomes[RECOVERY] == "passed"
    for capability, part in (("image", "image_url"), ("video", "video_url")):
        probe = _discovered(pytester, capability)
        assert probe["state"] == "broken", probe
        assert f"{part} part dropped: prompt_tokens " in probe["evidence"], probe
        assert probe["evidence"].endswith(f"(the engine answered 200 but did not read the {capability})"), probe
    # The checks that need no reading find the drop themselves: the media cost no prompt tokens.
    result.stdout.fnmatch_lines_random([
        "*the engine's handling of bordered-red-512.png*usage.prompt_tokens is * with bordered-red-512.png and * "
        "without: the engine did not count the bordered-red-512.png*",
        "*the engine's handling of video-rgb-16f.mp4*the engine did not count the video-rgb-16f.mp4*",
    ])
    # Each failure leads with the finding, not only the colour the model could not see.
    result.stdout.fnmatch_lines([
        "*image found broken by capability discovery (pure-red-512.png: image_url part dropped: prompt_tokens * "
        "with the image, * without (the engine answered 200 but did not read the image)); expected the largest "
        "area of bordered-red-512.png named red*",
        "*video found broken by capability discovery (video-rgb-16f.webm: video_url part dropped: *); expected the "
        "background colours in order*",
    ])
    assert result.ret == 1




def test_the_generic_engine_profile_probes_video_and_one_naming_no_way_to_send_it_says_why(
        pytester: pytest.Pytester) -> None:
    # generic sends vLLM's and SGLang's video_url: the built-in engine reads it, so video is served and tested.
    result, outcomes = run_suite(pytester, *FAST, "-m", "video", "--engine", "generic", "--profile", "generic")
    videos = _image_and_video(outcomes)
    assert result.ret == 0 and "passed" in set(videos.values()) and not failed(outcomes), result.stdout.str()[-3000:]
    probe = _discovered(pytester, "video")
    assert probe["state"] == "served" and " with the video, " in probe["evidence"], probe
    result.stdout.fnmatch_lines(["video * served * passed*"])

    # An engine profile naming no video content type: the row says why video was not probed, and the way out.
    result, outcomes = run_suite(pytester, *FAST, "-m", "video or text", "-k", "video or arithmetic", "--profiles-dir",
                                 engine_without_video(pytester.path / "team"), "--engine", ENGINE_WITHOUT_VIDEO,
                                 "--profile", "generic")
    assert result.ret == 0 and set(_image_and_video(outcomes).values()) == {"skipped"}, result.stdout.str()[-3000:]
    why = ("not probed: engine profile 'plain-serve' names no video content type: set features.video_content_type "
           "(e.g. video_url) in an engine profile of your own (--profiles-dir) to probe and test video")
    [row] = [row for row in json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))["capabilities"]
             if row["name"] == "video"]
    assert (row["discovered"], row["result"]) == ("not_probed", f"not tested: {why}"), row
    result.stdout.fnmatch_lines(["video * not probed * not tested: not probed: engine profile 'plain-serve' names no "
                                 "video content type*", "GATE: PASS"])


def test_corrupt_video_cases_skip_in_the_profiles_words_where_no_video_can_be_sent(pytester: pytest.Pytester) -> None:
    # An engine profile naming no video content type (llama-cpp-python's): each video case says why it is not sent.
    result, outcomes = run_suite(pytester, *FAST, "-m", "corrupt_media", "--engine", ENGINE_WITHOUT_VIDEO,
                                 "--profiles-dir", engine_without_video(pytester.path / "team"))
    assert not failed(outcomes), result.stdout.str()[-3000:]
    video_cases = {test for test in outcomes if "many-videos" in test or "mp4" in test}
    assert video_cases and {outcomes[test] for test in video_cases} == {"skipped"}, outcomes
    result.stdout.fnmatch_lines([f"*engine profile '{ENGINE_WITHOUT_VIDEO}' names no video content type*"])
