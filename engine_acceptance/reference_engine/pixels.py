"""Decoding media and reading its pixels: Pillow for images, PyAV for videos, numpy for both.

Split from :mod:`.vision` so that an engine loads these three (most of its start-up import)
only when the first media part arrives (``vision.perceive_part``).
"""

from __future__ import annotations

import io
from functools import lru_cache

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .media_facts import ImageFacts, UndecodableMedia, VideoFacts

__all__ = ["perceive_image", "perceive_video", "read_chart"]

# A decoded picture larger than this is refused (Pillow's own bomb limit is ~179M).
MAX_PIXELS = 64 * 1024 * 1024
MAX_FRAMES = 1024
# Colour statistics are taken on at most this many pixels per side.
SAMPLE_SIDE = 128
# Hue ranges in degrees, upper bound exclusive; red wraps around 0.
_HUES: tuple[tuple[float, str], ...] = (
    (20, "red"), (45, "orange"), (70, "yellow"), (170, "green"), (200, "cyan"), (260, "blue"),
    (290, "purple"), (335, "magenta"), (361, "red"),
)


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
