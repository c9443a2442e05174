"""Self-tests of the test media and of how media answers and refusals are read.

The committed ``media/`` must regenerate byte for byte (in a fresh process, through
the documented command), stay small, and be what its names say: every valid file
decodes to the intended content and every corrupt sample is refused by Pillow/PyAV
themselves, not only by the reference engine. The answer readers accept Chinese and
English wording and reject the seed's wrong answers.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import av
import pytest
from PIL import Image

from engine_acceptance.media import library as media
from engine_acceptance.wire.types import Exchange
from engine_acceptance.media.messages import colors_named, drop_clause, numbers_in, values_in_order
from engine_acceptance.wire.contract import error_message, refusal_problem
from engine_acceptance.wire.reassembly import reply_from_body
from engine_acceptance.wire.redaction import Redactor
from engine_acceptance.reference_engine.defects import DefectHooks
from engine_acceptance.reference_engine.pixels import perceive_image, perceive_video
from engine_acceptance.reference_engine.media_facts import ImageFacts, UndecodableMedia, VideoFacts
from engine_acceptance.reference_engine.vision import perceive_part

# The whole set is about 31 KB; this bound keeps it "kilobytes, not megabytes".
MAX_TOTAL_BYTES = 64 * 1024
MAX_FILE_BYTES = 8 * 1024


# --- the committed files ---------------------------------------------------------------

def test_regenerating_media_gives_byte_identical_files(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "engine_acceptance.media", "--regenerate", "--dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((media.MEDIA_DIR / media.MANIFEST_NAME).read_text(encoding="utf-8"))
    regenerated = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert regenerated == sorted([media.MANIFEST_NAME, *(entry["name"] for entry in manifest["files"])])
    different = [name for name in regenerated
                 if (tmp_path / name).read_bytes() != (media.MEDIA_DIR / name).read_bytes()]
    assert not different, (f"regenerated files differ from the committed ones: {different}; tools now "
                           f"{media.tool_versions()}, committed with {manifest['tools']}")


def test_committed_media_matches_its_manifest() -> None:
    assert media.check_dir() == []


def test_media_set_is_small() -> None:
    manifest = json.loads((media.MEDIA_DIR / media.MANIFEST_NAME).read_text(encoding="utf-8"))
    sizes = {entry["name"]: entry["bytes"] for entry in manifest["files"]}
    assert manifest["total_bytes"] == sum(sizes.values()) <= MAX_TOTAL_BYTES
    assert max(sizes.values()) <= MAX_FILE_BYTES, sizes


def test_load_refuses_a_file_that_does_not_match_the_manifest(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    media.write_media(tmp_path)
    (tmp_path / "pure-red-512.png").write_bytes(b"tampered")
    monkeypatch.setattr(media, "MEDIA_DIR", tmp_path)
    media.load.cache_clear()
    media._committed_manifest.cache_clear()
    try:
        with pytest.raises(media.MediaError, match="does not match its manifest"):
            media.load("pure-red-512.png")
        assert any("pure-red-512.png" in problem for problem in media.check_dir(tmp_path))
    finally:
        media.load.cache_clear()
        media._committed_manifest.cache_clear()


# --- the files are what they say -------------------------------------------------------------

@pytest.mark.parametrize(("name", "size", "color"), [
    ("pure-red-512.png", 512, "red"), ("pure-blue-512.png", 512, "blue"),
    ("bordered-red-512.png", 512, "red"), ("bordered-blue-512.png", 512, "blue"),
    ("bordered-red-1024.png", 1024, "red"), ("bordered-blue-1024.png", 1024, "blue"),
])
def test_color_images_have_their_size_and_largest_color(name: str, size: int, color: str) -> None:
    facts = perceive_image(media.load(name))
    assert (facts.width, facts.height) == (size, size)
    assert facts.dominant == color
    assert facts.pure == name.startswith("pure-")
    if not facts.pure:
        assert {c for c, _ in facts.colors} == {color, "white", "black"}


def test_chart_is_read_from_its_pixels() -> None:
    facts = perceive_image(media.load("chart-q1-q3.png"))
    assert facts.chart == media.CHART_VALUES


@pytest.mark.parametrize("name", ["video-rgb-16f.mp4", "video-rgb-16f.webm"])
def test_video_has_16_frames_going_red_green_blue(name: str) -> None:
    facts = perceive_video(media.load(name))
    assert len(facts.frame_colors) == media.VIDEO_FRAMES
    assert facts.color_sequence == media.VIDEO_COLORS


def _decodes_with_pillow(data: bytes) -> bool:
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
        return True
    except Exception:  # noqa: BLE001 - any decoder error means "corrupt"
        return False


def _decodes_with_pyav(data: bytes) -> bool:
    try:
        with av.open(io.BytesIO(data)) as container:
            return any(True for _ in container.decode(video=0))
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.parametrize("sample_id", [s for s in media.CORRUPT_SAMPLES if not media.corrupt_sample(s).mislabelled])
def test_corrupt_sample_is_refused_by_the_decoders_themselves(sample_id: str) -> None:
    sample = media.corrupt_sample(sample_id)
    payload = sample.url.split(",", 1)[1]
    try:
        data = base64.b64decode(payload, validate=True)
    except ValueError:
        assert sample_id == "invalid-base64"
        return
    decodes = _decodes_with_pillow if sample.part == "image" else _decodes_with_pyav
    assert not decodes(data), f"{sample_id} decodes fine: it is not corrupt"
    with pytest.raises(UndecodableMedia):
        perceive_part(f"{sample.part}_url", sample.url, 0)


@pytest.mark.parametrize("sample_id", [s for s in media.CORRUPT_SAMPLES if media.corrupt_sample(s).mislabelled])
def test_mislabelled_sample_decodes_and_only_its_label_is_wrong(sample_id: str) -> None:
    sample = media.corrupt_sample(sample_id)
    data = base64.b64decode(sample.url.split(",", 1)[1], validate=True)
    assert _decodes_with_pillow(data), f"{sample_id} is not a valid image: it would be a corrupt sample"
    with pytest.raises(UndecodableMedia) as refused:
        perceive_part(f"{sample.part}_url", sample.url, 0)
    assert refused.value.fault in ("mismatched", "declared-type")
    # The label alone: with its declared type not checked (media-type-ignored), the PNG labelled
    # text/plain is seen as the image it is; PNG bytes in a video part are still no video.
    if sample.part == "image":
        assert perceive_part("image_url", sample.url, 0, check_declared_type=False).kind == "image"


def test_invalid_base64_is_invalid_for_lenient_decoders_too() -> None:
    payload = media.corrupt_sample("invalid-base64").url.split(",", 1)[1]
    with pytest.raises(ValueError):
        base64.b64decode(payload)  # non-alphabet characters dropped, the length still cannot decode


def test_thumbnails_are_small_pngs_and_corrupt_media_has_none() -> None:
    for name in ("bordered-red-1024.png", "video-rgb-16f.mp4"):
        thumb = media.thumbnail(media.load(name), media.mime_of(name))
        assert thumb is not None and thumb.startswith(b"\x89PNG") and len(thumb) < 4096
    assert media.thumbnail(media.load("corrupt/truncated.mp4"), "video/mp4") is None


def test_data_uris_are_redacted_from_reports() -> None:
    uri = media.data_uri("bordered-red-1024.png")
    payload = uri.split(",", 1)[1]
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}}]}]}
    redacted = json.dumps(Redactor().value(body))
    assert payload[100:164] not in redacted
    assert "data:image/png;base64,<" in redacted


# --- reading answers ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "colors"), [
    ("红色", ["red"]),
    ("1. 黑色", ["black"]),
    ("按顺序：红、绿、藍", ["red", "green", "blue"]),
    ("Red first, then green, finally BLUE.", ["red", "green", "blue"]),
    ("The covered area is a hundred pixels", []),
    ("粉红色，不是红色", ["pink", "red"]),
], ids=["zh", "zh-black", "zh-traditional", "en", "en-no-false-hits", "pink-is-not-red"])
def test_colors_named_in_order(text: str, colors: list[str]) -> None:
    assert colors_named(text) == colors


def test_numbers_with_or_without_units_and_without_quarter_labels() -> None:
    assert numbers_in("Q1=120万元，Q2：９０ units，Q3 150.") == [120, 90, 150]
    assert values_in_order("Q1、Q2、Q3 分别是 120、90、150", [120, 90, 150])
    assert not values_in_order("Q1=90, Q2=120, Q3=150", [120, 90, 150])


@pytest.mark.parametrize(("text", "found"), [
    ("Q1=120，Q2=90，Q3=150。Q2 比上季度下降。", True),
    ("第二季度的数值比第一季度低，下降了 30。", True),
    ("Values: 120, 90, 150. The second quarter dropped.", True),
    ("Q1=120，Q2=90，Q3=150。Q3 比 Q2 上升。", False),
], ids=["zh-q2", "zh-ordinal", "en", "no-drop-named"])
def test_drop_clause(text: str, found: bool) -> None:
    assert (drop_clause(text, "Q2") is not None) is found


@pytest.mark.parametrize(("body", "message"), [
    ({"error": {"message": "bad image", "type": "BadRequestError", "code": 400}}, "bad image"),
    ({"object": "error", "message": "bad image", "code": 400}, "bad image"),
    ({"error": "Unauthorized"}, "Unauthorized"),
    ({"error": {"message": ""}}, None),
    ("plain text", None),
], ids=["vllm-nested", "sglang-flat", "string", "empty", "not-json"])
def test_error_message_of_each_body_shape(body: object, message: str | None) -> None:
    assert error_message(body) == message


def _exchange(status: int | None, body: object = None, **kwargs: object) -> Exchange:
    exchange = Exchange("POST", "http://engine/v1/chat/completions", {}, False, status=status, body=body)
    for key, value in kwargs.items():
        setattr(exchange, key, value)
    return exchange


def test_refusal_problem_names_each_failure() -> None:
    assert refusal_problem(_exchange(400, {"error": {"message": "cannot identify image"}})) is None
    assert "server error on client data: HTTP 500" in refusal_problem(
        _exchange(500, {"object": "error", "message": "RuntimeError"}))
    assert "no error body" in refusal_problem(_exchange(400, "Bad Request"))
    assert "idle timeout" in refusal_problem(_exchange(None, error_kind="timeout", error="ReadTimeout"))
    assert "crashed" in refusal_problem(_exchange(None, error_kind="connection", error="refused"))
    accepted = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "红色"},
                             "finish_reason": "stop"}]}
    assert "accepted it: HTTP 200, content '红色'" in refusal_problem(
        _exchange(200, accepted, reply=reply_from_body(accepted)))


# --- defect hooks ----------------------------------------------------------------------------

def test_black_pure_color_changes_only_pure_images() -> None:
    pure = perceive_part("image_url", media.data_uri("pure-red-512.png"), 0)
    bordered = perceive_part("image_url", media.data_uri("bordered-red-512.png"), 0)
    video = perceive_part("video_url", media.data_uri("video-rgb-16f.mp4"), 0)
    seen = DefectHooks(frozenset({"black-pure-color"})).seen_media([pure, bordered, video])
    assert isinstance(seen[0].facts, ImageFacts) and seen[0].facts.dominant == "black"
    assert seen[1] == bordered and seen[2] == video
    assert isinstance(video.facts, VideoFacts)
    assert DefectHooks().seen_media([pure]) == (pure,)
