"""The reference model's eyes: decode images (Pillow) and videos (PyAV) and read the pixels.

Media parts arrive as base64 data URIs. Each is decoded for real, so input that no
decoder accepts (truncated files, random bytes, a broken PNG body, bad base64, an
empty file) raises :class:`UndecodableMedia`, which the protocol layer turns into a
400. What the model "sees" is small and honest: the colour covering the largest
area of an image, the background colour of each video frame, and, for a bar chart,
the bar labels and values read from the glyphs of Pillow's bitmap font.
:func:`vision_rule` answers a question about the media of the latest user turn.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

if TYPE_CHECKING:
    from .responder import Conversation

__all__ = [
    "COLOR_NAMES_ZH",
    "ImageFacts",
    "SeenMedia",
    "UndecodableMedia",
    "VideoFacts",
    "decode_data_url",
    "has_media_parts",
    "perceive_image",
    "perceive_part",
    "perceive_video",
    "read_chart",
    "vision_rule",
]

# A decoded picture larger than this is refused (Pillow's own bomb limit is ~179M).
MAX_PIXELS = 64 * 1024 * 1024
MAX_FRAMES = 1024
# Fetching media from a URL: how long to wait, and how much to read.
FETCH_TIMEOUT_S = 10.0
MAX_FETCH_BYTES = 64 * 1024 * 1024
# Colour statistics are taken on at most this many pixels per side.
SAMPLE_SIDE = 128

COLOR_NAMES_ZH: dict[str, str] = {
    "red": "红色", "orange": "橙色", "yellow": "黄色", "green": "绿色", "cyan": "青色", "blue": "蓝色",
    "purple": "紫色", "magenta": "品红色", "white": "白色", "gray": "灰色", "black": "黑色",
}
# Hue ranges in degrees, upper bound exclusive; red wraps around 0.
_HUES: tuple[tuple[float, str], ...] = (
    (20, "red"), (45, "orange"), (70, "yellow"), (170, "green"), (200, "cyan"), (260, "blue"),
    (290, "purple"), (335, "magenta"), (361, "red"),
)
_DATA_URL = re.compile(r"data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<payload>.*)", re.DOTALL)


class UndecodableMedia(ValueError):
    """Media that no decoder accepts; the message says why, never quoting the payload."""


@dataclass(frozen=True)
class ImageFacts:
    width: int
    height: int
    # (colour name, share of the area), largest first.
    colors: tuple[tuple[str, float], ...]
    # Every pixel has the same value.
    pure: bool
    # (label, value) per bar, left to right, when the image is a bar chart it can read.
    chart: tuple[tuple[str, int], ...] | None = None

    @property
    def dominant(self) -> str:
        return self.colors[0][0]


@dataclass(frozen=True)
class VideoFacts:
    # The background colour of every decoded frame, in order.
    frame_colors: tuple[str, ...]

    @property
    def color_sequence(self) -> tuple[str, ...]:
        """Frame colours with repeats collapsed: red, red, green -> red, green."""
        sequence: list[str] = []
        for color in self.frame_colors:
            if not sequence or sequence[-1] != color:
                sequence.append(color)
        return tuple(sequence)


@dataclass(frozen=True)
class SeenMedia:
    """One decoded media part, and the message it came with."""

    kind: Literal["image", "video"]
    message_index: int
    facts: ImageFacts | VideoFacts


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


def _color_names(rgb: np.ndarray) -> np.ndarray:
    """A colour name per pixel of an (N, 3) uint8 array."""
    values = rgb.astype(np.float32) / 255.0
    high, low = values.max(axis=1), values.min(axis=1)
    chroma = high - low
    saturation = np.where(high > 0, chroma / np.maximum(high, 1e-6), 0.0)
    r, g, b = values[:, 0], values[:, 1], values[:, 2]
    safe = np.maximum(chroma, 1e-6)
    hue = np.select(
        [high == r, high == g],
        [((g - b) / safe) % 6.0, (b - r) / safe + 2.0],
        (r - g) / safe + 4.0,
    ) * 60.0
    names = np.full(len(rgb), "gray", dtype=object)
    for bound, name in reversed(_HUES):
        names[hue < bound] = name
    names[(saturation < 0.25) & (high >= 0.8)] = "white"
    names[(saturation < 0.25) & (high < 0.8)] = "gray"
    names[high < 0.25] = "black"
    return names


def _color_shares(pixels: np.ndarray) -> tuple[tuple[str, float], ...]:
    names = _color_names(pixels.reshape(-1, 3))
    unique, counts = np.unique(names, return_counts=True)
    order = sorted(zip(counts.tolist(), unique.tolist()), key=lambda item: (-item[0], item[1]))
    total = float(len(names))
    return tuple((str(name), count / total) for count, name in order)


def _sample(image: Image.Image) -> np.ndarray:
    # NEAREST keeps flat colours exact, so a pure image stays one colour.
    if max(image.size) > SAMPLE_SIDE:
        scale = SAMPLE_SIDE / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.Resampling.NEAREST)
    return np.asarray(image, dtype=np.uint8)


def perceive_image(data: bytes) -> ImageFacts:
    """Decode an image fully and describe it; UndecodableMedia if it cannot be decoded."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > MAX_PIXELS:
                raise UndecodableMedia(f"the image is too large ({image.width}x{image.height} pixels)")
            # load() decodes every pixel: Image.open only reads the header, so a PNG
            # with a broken body would otherwise pass as valid.
            image.load()
            rgb = image.convert("RGB")
    except UndecodableMedia:
        raise
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise UndecodableMedia(f"cannot decode the image: {type(exc).__name__}: {exc}") from None
    pixels = np.asarray(rgb, dtype=np.uint8)
    pure = bool((pixels == pixels[0, 0]).all())
    colors = _color_shares(_sample(rgb))
    # Charts are drawn on a light background; other pictures skip the (slower) chart reader.
    chart = read_chart(pixels) if not pure and colors[0][0] == "white" else None
    return ImageFacts(width=rgb.width, height=rgb.height, colors=colors, pure=pure, chart=chart)


def perceive_video(data: bytes) -> VideoFacts:
    """Decode every frame of a video and name each frame's background colour."""
    colors: list[str] = []
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.video:
                raise UndecodableMedia("the file has no video stream")
            for frame in container.decode(video=0):
                small = frame.reformat(width=32, height=32, format="rgb24").to_ndarray()
                colors.append(_color_shares(small)[0][0])
                if len(colors) > MAX_FRAMES:
                    raise UndecodableMedia(f"the video has more than {MAX_FRAMES} frames")
    except UndecodableMedia:
        raise
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise UndecodableMedia(f"cannot decode the video: {type(exc).__name__}: {exc}") from None
    if not colors:
        raise UndecodableMedia("the video has no decodable frame")
    return VideoFacts(frame_colors=tuple(colors))


def perceive_part(kind: str, url: str, message_index: int) -> SeenMedia:
    """Decode one ``image_url`` or ``video_url`` part."""
    _mime, data = decode_data_url(url)
    if kind == "image_url":
        return SeenMedia("image", message_index, perceive_image(data))
    if kind == "video_url":
        return SeenMedia("video", message_index, perceive_video(data))
    raise UndecodableMedia(f"the reference model cannot take {kind!r} parts")


# --- reading a bar chart ----------------------------------------------------------------

@lru_cache(maxsize=1)
def _glyphs() -> dict[str, np.ndarray]:
    """Pillow's bitmap-font glyphs the chart reader knows, as trimmed boolean masks."""
    font = ImageFont.load_default_imagefont()
    glyphs = {}
    for char in "0123456789Q":
        mask = Image.new("1", (16, 16), 0)
        ImageDraw.Draw(mask).text((2, 2), char, font=font, fill=1)
        glyphs[char] = np.asarray(mask.crop(mask.getbbox()), dtype=bool)
    return glyphs


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True values."""
    padded = np.concatenate(([False], flags, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _read_glyph(mask: np.ndarray) -> str | None:
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    glyph = mask[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
    for char, template in _glyphs().items():
        scale = glyph.shape[0] // template.shape[0]
        if scale >= 1 and glyph.shape == (template.shape[0] * scale, template.shape[1] * scale):
            if np.array_equal(glyph[scale // 2::scale, scale // 2::scale], template):
                return char
    return None


def _read_text(dark: np.ndarray) -> str | None:
    """The glyphs in a region holding one line of text, left to right."""
    columns = _runs(dark.any(axis=0))
    if not columns:
        return None
    chars = [_read_glyph(dark[:, start:end]) for start, end in columns]
    return None if None in chars else "".join(chars)  # type: ignore[arg-type]


def _text_line(dark: np.ndarray, *, nearest_bottom: bool) -> np.ndarray | None:
    rows = _runs(dark.any(axis=1))
    if not rows:
        return None
    start, end = rows[-1] if nearest_bottom else rows[0]
    return dark[start:end]


def read_chart(pixels: np.ndarray) -> tuple[tuple[str, int], ...] | None:
    """(label, value) of each bar when `pixels` show a labelled bar chart, else None.

    Bars are wide columns of one saturated colour; the value is the number written
    just above a bar, the label the text just below it.
    """
    high, low = pixels.max(axis=2), pixels.min(axis=2)
    # uint8 throughout: high >= low, so the difference cannot wrap.
    colored = (high - low > 60) & (high > 64)
    dark = high < 80
    bars = [(x0, x1) for x0, x1 in _runs(colored.sum(axis=0) >= 20) if x1 - x0 >= 10]
    if len(bars) < 2:
        return None
    reading = []
    for x0, x1 in bars:
        rows = np.flatnonzero(colored[:, x0:x1].any(axis=1))
        top, bottom = int(rows[0]), int(rows[-1])
        left, right = max(0, x0 - 20), min(pixels.shape[1], x1 + 20)
        above = _text_line(dark[max(0, top - 60):top, left:right], nearest_bottom=True)
        # Skip the axis line right under the bars.
        below_region = dark[bottom + 1:bottom + 60, left:right]
        axis_rows = 0
        while axis_rows < len(below_region) and below_region[axis_rows].sum() > 0.8 * (right - left):
            axis_rows += 1
        below = _text_line(below_region[axis_rows:], nearest_bottom=False)
        value = _read_text(above) if above is not None else None
        label = _read_text(below) if below is not None else None
        if value is None or label is None or not value.isdigit():
            return None
        reading.append((label, int(value)))
    return tuple(reading)


# --- answering ------------------------------------------------------------------------

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
