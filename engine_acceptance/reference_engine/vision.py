"""The reference model's eyes: what it takes from a media part and what it answers about it.

Media parts arrive as base64 data URIs. Each is decoded for real, so input that no
decoder accepts (truncated files, random bytes, a broken PNG body, bad base64, an
empty file) raises :class:`UndecodableMedia`, which the protocol layer turns into a
400. So does media that is not what it says: a data URL declaring a type of another kind
than its part (a PNG labelled ``text/plain`` in an image part) and bytes of another kind
(a PNG in a video part), told by their signature before any decoder guesses. What the model "sees" is small and honest: the colour covering the largest
area of an image, the background colour of each video frame, and, for a bar chart,
the bar labels and values read from the glyphs of Pillow's bitmap font.
:func:`vision_rule` answers a question about the media of the latest user turn. The decoding
and the reading of pixels are in :mod:`.pixels`, loaded at the first media part.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from .conversation import Conversation
from .media_facts import ImageFacts, SeenMedia, UndecodableMedia, VideoFacts

__all__ = [
    "COLOR_NAMES_ZH",
    "decode_data_url",
    "has_media_parts",
    "perceive_part",
    "vision_rule",
]

# Fetching media from a URL: how long to wait, and how much to read.
FETCH_TIMEOUT_S = 10.0
MAX_FETCH_BYTES = 64 * 1024 * 1024

COLOR_NAMES_ZH: dict[str, str] = {
    "red": "红色", "orange": "橙色", "yellow": "黄色", "green": "绿色", "cyan": "青色", "blue": "蓝色",
    "purple": "紫色", "magenta": "品红色", "white": "白色", "gray": "灰色", "black": "黑色",
}
_DATA_URL = re.compile(r"data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<payload>.*)", re.DOTALL)


# --- decoding ---------------------------------------------------------------------------

def fetch_url(url: str) -> bytes:
    """The bytes at an http(s) URL, as vLLM's MediaConnector fetches them; UndecodableMedia when it cannot.

    Called off the event loop (media is decoded in a worker thread). A fetch that fails is the
    client's problem, answered 400 with the reason, never a 500.
    """
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 (http(s) only)
            data = response.read(MAX_FETCH_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise UndecodableMedia(f"cannot fetch the media from URL {url!r}: {reason}") from None
    if len(data) > MAX_FETCH_BYTES:
        raise UndecodableMedia(f"the media at URL {url!r} is larger than {MAX_FETCH_BYTES} bytes")
    return data


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(mime, bytes) of a base64 data URL, or of an http(s) URL fetched; UndecodableMedia for anything else."""
    if url.startswith(("http://", "https://")):
        return "", fetch_url(url)
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0] if ":" in url else "no scheme"
        raise UndecodableMedia(f"only data: and http(s) URLs are accepted, got a {scheme!r} URL")
    match = _DATA_URL.fullmatch(url)
    if match is None or ";base64" not in match.group("params"):
        raise UndecodableMedia("the data URL is not of the form data:<mime>;base64,<payload>")
    try:
        data = base64.b64decode(match.group("payload"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UndecodableMedia(f"invalid base64 in the data URL ({exc})") from None
    if not data:
        raise UndecodableMedia("the media is empty (0 bytes)")
    return match.group("mime"), data


def perceive_part(kind: str, url: str, message_index: int, *, check_declared_type: bool = True) -> SeenMedia:
    """Decode one ``image_url`` or ``video_url`` part (its data URL's declared type checked unless told not to)."""
    if kind not in _MEDIA_KINDS:
        raise UndecodableMedia(f"the reference model cannot take {kind!r} parts")
    if check_declared_type:
        _check_declared_type(kind, url)
    if url.startswith("data:"):
        facts = _perceive_data_url(kind, url)
    else:
        facts = _perceive(kind, decode_data_url(url)[1])
    return SeenMedia(_MEDIA_KINDS[kind], message_index, facts)


_MEDIA_KINDS: dict[str, Literal["image", "video"]] = {"image_url": "image", "video_url": "video"}


# The same data URL is decoded once, as vLLM's multimodal processor cache (keyed by the media's
# hash) serves a repeat: the media throughput cells send one picture or video in every request,
# and decoding each again made them the longest part of the default run. What failed to decode
# is not kept (an exception is never cached), and a fetched URL is fetched every time.
@lru_cache(maxsize=32)
def _perceive_data_url(kind: str, url: str) -> ImageFacts | VideoFacts:
    return _perceive(kind, decode_data_url(url)[1])


def _check_declared_type(kind: str, url: str) -> None:
    """A data URL must declare a type of its part's kind (image/* in an image part); http(s) URLs declare none."""
    match = _DATA_URL.fullmatch(url) if url.startswith("data:") else None
    if match is None:
        return  # not a data URL (fetched, or refused by decode_data_url with its own reason)
    declared, expected = match.group("mime").strip().lower(), _MEDIA_KINDS[kind]
    if not declared.startswith(f"{expected}/"):
        raise UndecodableMedia(f"the data URL declares {declared or 'no type'!r}, which is no {expected}/* type, "
                               f"for the {kind} part", fault="declared-type")


# File signatures: (leading bytes, offset, format, kind). A PNG in a video part is told by its first bytes.
_SIGNATURES: tuple[tuple[bytes, int, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "PNG", "image"), (b"\xff\xd8\xff", 0, "JPEG", "image"),
    (b"GIF8", 0, "GIF", "image"), (b"ftyp", 4, "MP4", "video"), (b"\x1a\x45\xdf\xa3", 0, "WebM", "video"),
)


def _check_kind(kind: str, data: bytes) -> None:
    """Bytes whose signature says they are of another kind than the part are refused before decoding."""
    expected = _MEDIA_KINDS[kind]
    for signature, offset, name, found in _SIGNATURES:
        if data[offset:offset + len(signature)] == signature and found != expected:
            raise UndecodableMedia(f"the bytes are {name} ({found}), not the {expected} that {kind} parts take",
                                   fault="mismatched")


def _perceive(kind: str, data: bytes) -> ImageFacts | VideoFacts:
    _check_kind(kind, data)
    # Pillow, PyAV and numpy load at the first media part, not at the engine's start: most
    # engines the self-tests start never see one, and the three took most of the start's import.
    from .pixels import perceive_image, perceive_video

    return perceive_image(data) if kind == "image_url" else perceive_video(data)


def _color(name: str, zh: bool) -> str:
    return COLOR_NAMES_ZH.get(name, name) if zh else name


def _describe_chart(chart: Sequence[tuple[str, int]], zh: bool) -> tuple[str, str]:
    drops = [(chart[i - 1], chart[i]) for i in range(1, len(chart)) if chart[i][1] < chart[i - 1][1]]
    if zh:
        values = "，".join(f"{label}={value}" for label, value in chart)
        change = "；".join(f"{cur[0]} 比上季度下降（从 {prev[1]} 降到 {cur[1]}）" for prev, cur in drops) \
            or "没有比上季度下降的季度"
        return f"这是柱状图，读出柱顶的数值：{values}。逐个与前一个比较。", f"{values}。{change}。"
    values = ", ".join(f"{label}={value}" for label, value in chart)
    change = "; ".join(f"{cur[0]} dropped from the previous quarter ({prev[1]} to {cur[1]})"
                       for prev, cur in drops) or "no quarter dropped"
    return f"A bar chart; the values above the bars are {values}. Compare each with the one before.", \
        f"{values}. {change}."


def vision_rule(conv: Conversation, zh: bool) -> tuple[str, str] | None:
    """Answer about the media of the latest user turn: chart values, colours, video colours."""
    seen = [m for m in conv.media if m.message_index == conv.latest_user_index]
    if not seen:
        return None
    videos = [m.facts for m in seen if isinstance(m.facts, VideoFacts)]
    images = [m.facts for m in seen if isinstance(m.facts, ImageFacts)]
    if videos:
        sequence = videos[0].color_sequence
        if zh:
            named = "、".join(_color(c, zh) for c in sequence)
            return f"逐帧看背景颜色，按出现顺序是 {named}。", f"视频背景颜色按出现顺序依次为：{named}。"
        named = ", ".join(sequence)
        return f"Frame by frame the background is {named}.", f"The background colors in order: {named}."
    charts = [image.chart for image in images if image.chart]
    if charts:
        return _describe_chart(charts[0], zh)
    dominant = [_color(image.dominant, zh) for image in images]
    if len(dominant) == 1:
        if zh:
            return f"图中面积最大的颜色是{dominant[0]}。", dominant[0]
        return f"The largest area of the image is {dominant[0]}.", dominant[0]
    if zh:
        listed = "；".join(f"第{i}张图：{color}" for i, color in enumerate(dominant, 1))
        return f"共 {len(dominant)} 张图，逐张看面积最大的颜色。", listed
    listed = "; ".join(f"image {i}: {color}" for i, color in enumerate(dominant, 1))
    return f"{len(dominant)} images; the largest area of each, in order.", listed


def has_media_parts(body: Mapping[str, Any]) -> bool:
    """Whether a chat request body has any image or video part (before validation)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    return any(
        isinstance(part, Mapping) and part.get("type") in ("image_url", "video_url")
        for message in messages if isinstance(message, Mapping) and isinstance(message.get("content"), list)
        for part in message["content"]
    )
