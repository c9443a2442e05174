"""Deterministic test media (TEST-PLAN §5–6): generate, check, load and show it.

Every image, video and corrupt sample the media checks send is generated here with
Pillow and PyAV from fixed parameters, and committed under ``media/`` with a
manifest of sha256 sums. Regenerating gives the same bytes (a self-test proves
it), so a report can name a file by its hash and a reader can rebuild it:

    python -m engine_acceptance.media --regenerate     # rewrite media/ and its manifest
    python -m engine_acceptance.media --check          # committed files match the manifest

Byte-identical output needs the same encoder builds: PNG bytes depend on the zlib
inside the Pillow wheel, the videos on the libx264/libvpx inside the PyAV wheel.
Both are pinned in ``pyproject.toml``; the manifest records the versions used.

Checks read media through :func:`load` (which verifies the sha256), send it as a
base64 data URI (:func:`data_uri`) and attach a small PNG :func:`thumbnail`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import random
import struct
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np
import PIL
from PIL import Image, ImageDraw, ImageFont
from engine_acceptance.errors import UsageError
from engine_acceptance.resources import suite_path

__all__ = [
    "CHART_VALUES",
    "CORRUPT_SAMPLES",
    "MANIFEST_NAME",
    "MEDIA",
    "MEDIA_DIR",
    "VIDEO_COLORS",
    "CorruptSample",
    "MediaError",
    "MediaSpec",
    "check_dir",
    "corrupt_sample",
    "data_uri",
    "generate_all",
    "load",
    "main",
    "manifest",
    "mime_of",
    "thumbnail",
    "tool_versions",
    "write_media",
]

MEDIA_DIR = suite_path("media")
MANIFEST_NAME = "manifest.json"
REGENERATE_COMMAND = "python -m engine_acceptance.media --regenerate"

# TEST-PLAN §5: bars Q1=120, Q2=90, Q3=150; Q2 is the quarter that drops.
CHART_VALUES: tuple[tuple[str, int], ...] = (("Q1", 120), ("Q2", 90), ("Q3", 150))
# Background of the 16-frame video, in order (TEST-PLAN §5).
VIDEO_COLORS: tuple[str, ...] = ("red", "green", "blue")
VIDEO_FRAMES = 16
VIDEO_FPS = 8
VIDEO_SIZE = 256

RGB: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "white": (255, 255, 255),
    "black": (0, 0, 0),
}
BAR_RGB = (70, 110, 180)

Kind = Literal["image", "video", "corrupt"]
PartType = Literal["image", "video"]


class MediaError(UsageError):
    """A committed media file is missing or does not match its manifest."""


@dataclass(frozen=True)
class MediaSpec:
    """One committed file: where it lives, what it is, and how it is made."""

    name: str
    kind: Kind
    mime: str
    description: str
    make: Callable[[], bytes]


# --- drawing helpers --------------------------------------------------------------------

def _png(image: Image.Image) -> bytes:
    # Fixed options and no ancillary chunks (no tIME, no pHYs): the bytes depend
    # only on the pixels and the zlib build.
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=9)
    return buffer.getvalue()


@lru_cache(maxsize=1)
def _font() -> ImageFont.ImageFont:
    # Pillow's built-in bitmap font: no FreeType rendering, so no anti-aliasing
    # that could change with the FreeType version.
    return ImageFont.load_default_imagefont()


def _draw_label(image: Image.Image, xy: tuple[int, int], text: str, *, scale: int = 3,
               fill: tuple[int, int, int] = RGB["black"], center: bool = False) -> None:
    """Draw `text` in the bitmap font, enlarged `scale` times, one glyph cell at a time.

    Glyphs are drawn 2 px apart (before scaling): in the bitmap font neighbouring
    digits touch, which is harder to read for people and models alike.
    """
    font = _font()
    cells = []
    for char in text:
        right = font.getbbox(char)[2]
        cells.append((char, max(right, 1)))
    width = sum(w for _, w in cells) + 2 * (len(cells) - 1)
    mask = Image.new("1", (max(width, 1), 12), 0)
    draw = ImageDraw.Draw(mask)
    x = 0
    for char, cell_width in cells:
        draw.text((x, 0), char, font=font, fill=1)
        x += cell_width + 2
    mask = mask.crop(mask.getbbox() or (0, 0, 1, 1))
    big = mask.resize((mask.width * scale, mask.height * scale), Image.Resampling.NEAREST)
    left, top = xy
    if center:
        left -= big.width // 2
    image.paste(Image.new("RGB", big.size, fill), (left, top), big)


def _chart() -> bytes:
    width, height = 480, 360
    left, base, right = 70, 300, 450
    unit = 1.5  # pixels per value unit: 150 -> 225 px
    image = Image.new("RGB", (width, height), RGB["white"])
    draw = ImageDraw.Draw(image)
    _draw_label(image, (width // 2, 10), "Q1-Q3", scale=2, center=True)
    # Axes with ticks every 50 units, labelled for human and model readers.
    draw.line([(left, 40), (left, base)], fill=RGB["black"], width=2)
    draw.line([(left, base), (right, base)], fill=RGB["black"], width=2)
    for value in (0, 50, 100, 150):
        y = base - round(value * unit)
        draw.line([(left - 6, y), (left, y)], fill=RGB["black"], width=2)
        _draw_label(image, (left - 10 - 12 * len(str(value)), y - 7), str(value), scale=2)
    _draw_label(image, (8, 22), "VALUE", scale=2)
    _draw_label(image, ((left + right) // 2, 340), "QUARTER", scale=2, center=True)
    for index, (quarter, value) in enumerate(CHART_VALUES):
        x0 = left + 40 + index * 125
        top = base - round(value * unit)
        draw.rectangle([(x0, top), (x0 + 70, base - 1)], fill=BAR_RGB)
        _draw_label(image, (x0 + 35, top - 30), str(value), center=True)
        _draw_label(image, (x0 + 35, base + 10), quarter, center=True)
    return _png(image)


def _pure(color: str, size: int) -> Callable[[], bytes]:
    def make() -> bytes:
        return _png(Image.new("RGB", (size, size), RGB[color]))
    return make


def _bordered(color: str, size: int) -> Callable[[], bytes]:
    """White border, a colored field, black marks; the field is the largest area."""
    def make() -> bytes:
        image = Image.new("RGB", (size, size), RGB["white"])
        draw = ImageDraw.Draw(image)
        border = size // 16
        draw.rectangle([(border, border), (size - border - 1, size - border - 1)], fill=RGB[color])
        mark = size // 16
        # A cross in the middle and a square in each corner of the field.
        mid = size // 2
        draw.rectangle([(mid - mark * 2, mid - mark // 4), (mid + mark * 2, mid + mark // 4)], fill=RGB["black"])
        draw.rectangle([(mid - mark // 4, mid - mark * 2), (mid + mark // 4, mid + mark * 2)], fill=RGB["black"])
        for cx in (border + mark, size - border - 2 * mark):
            for cy in (border + mark, size - border - 2 * mark):
                draw.rectangle([(cx, cy), (cx + mark, cy + mark)], fill=RGB["black"])
        return _png(image)
    return make


def _video_frames() -> list[np.ndarray]:
    frames = []
    for index in range(VIDEO_FRAMES):
        color = VIDEO_COLORS[index * len(VIDEO_COLORS) // VIDEO_FRAMES]
        frame = np.empty((VIDEO_SIZE, VIDEO_SIZE, 3), dtype=np.uint8)
        frame[:] = RGB[color]
        # A small black square crossing the frame: the colour is the background,
        # not the only thing in the picture.
        x = 8 + index * (VIDEO_SIZE - 56) // (VIDEO_FRAMES - 1)
        frame[100:140, x:x + 40] = RGB["black"]
        frames.append(frame)
    return frames


def _video(container: str, codec: str, options: dict[str, str]) -> Callable[[], bytes]:
    def make() -> bytes:
        buffer = io.BytesIO()
        # +bitexact keeps the muxer from writing its version string and random ids.
        with av.open(buffer, "w", format=container, options={"fflags": "+bitexact"}) as output:
            stream = output.add_stream(codec, rate=VIDEO_FPS, options=options)
            stream.width = stream.height = VIDEO_SIZE
            stream.pix_fmt = "yuv420p"
            # One encoder thread: multi-threaded encoders may split work differently per run.
            stream.codec_context.thread_count = 1
            stream.codec_context.flags |= av.codec.context.Flags.bitexact
            for index, pixels in enumerate(_video_frames()):
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = index
                for packet in stream.encode(frame):
                    output.mux(packet)
            for packet in stream.encode():
                output.mux(packet)
        return buffer.getvalue()
    return make


# --- corrupt samples -----------------------------------------------------------------------

def _truncated(name: str, fraction: float) -> Callable[[], bytes]:
    def make() -> bytes:
        whole = _generated(name)
        return whole[: int(len(whole) * fraction)]
    return make


def _random_bytes(seed: int, size: int) -> Callable[[], bytes]:
    def make() -> bytes:
        return random.Random(seed).randbytes(size)
    return make


def _broken_png_body() -> bytes:
    """PNG signature and IHDR intact, IDAT replaced by bytes that are not zlib data.

    Every chunk CRC is correct, so only decoding the pixels shows the damage.
    """
    whole = _generated("bordered-red-512.png")
    out, offset = bytearray(whole[:8]), 8
    garbage = random.Random(7).randbytes(256)
    while offset < len(whole):
        (length,) = struct.unpack(">I", whole[offset:offset + 4])
        chunk_type = whole[offset + 4:offset + 8]
        data = whole[offset + 8:offset + 8 + length]
        offset += 12 + length
        if chunk_type == b"IDAT":
            data = garbage
        out += struct.pack(">I", len(data)) + chunk_type + data
        out += struct.pack(">I", zlib.crc32(chunk_type + data) & 0xFFFFFFFF)
    return bytes(out)


def _invalid_base64() -> bytes:
    # The start of a real PNG's base64, then characters base64 does not have and a
    # length no padding can fix: invalid for strict and lenient decoders alike.
    head = base64.b64encode(_generated("bordered-red-512.png")[:24]).decode("ascii")
    return (head + "*not~base64!").encode("ascii")


MEDIA: tuple[MediaSpec, ...] = (
    MediaSpec("chart-q1-q3.png", "image", "image/png",
              "bar chart Q1=120, Q2=90, Q3=150 with labelled axes (480x360)", _chart),
    MediaSpec("pure-red-512.png", "image", "image/png", "raw pure red, 512x512", _pure("red", 512)),
    MediaSpec("pure-blue-512.png", "image", "image/png", "raw pure blue, 512x512", _pure("blue", 512)),
    MediaSpec("bordered-red-512.png", "image", "image/png",
              "red field, white border, black marks, 512x512", _bordered("red", 512)),
    MediaSpec("bordered-blue-512.png", "image", "image/png",
              "blue field, white border, black marks, 512x512", _bordered("blue", 512)),
    MediaSpec("bordered-red-1024.png", "image", "image/png",
              "red field, white border, black marks, 1024x1024", _bordered("red", 1024)),
    MediaSpec("bordered-blue-1024.png", "image", "image/png",
              "blue field, white border, black marks, 1024x1024", _bordered("blue", 1024)),
    MediaSpec("video-rgb-16f.mp4", "video", "video/mp4",
              "16 frames at 8 fps, 256x256, background red then green then blue; H.264 in MP4",
              _video("mp4", "libx264", {"preset": "medium", "crf": "23", "threads": "1"})),
    MediaSpec("video-rgb-16f.webm", "video", "video/webm",
              "the same 16 frames; VP9 in WebM",
              _video("webm", "libvpx-vp9", {"crf": "30", "b": "0", "threads": "1", "row-mt": "0",
                                            "deadline": "good", "cpu-used": "4"})),
    MediaSpec("corrupt/truncated.png", "corrupt", "image/png",
              "the first half of bordered-red-512.png", _truncated("bordered-red-512.png", 0.5)),
    MediaSpec("corrupt/random-bytes.png", "corrupt", "image/png",
              "2048 random bytes (seed 5) labelled image/png", _random_bytes(5, 2048)),
    MediaSpec("corrupt/broken-body.png", "corrupt", "image/png",
              "valid PNG signature and IHDR, IDAT replaced by non-zlib bytes (CRCs valid)", _broken_png_body),
    MediaSpec("corrupt/zero-byte.png", "corrupt", "image/png", "an empty file labelled image/png", lambda: b""),
    MediaSpec("corrupt/invalid-base64.txt", "corrupt", "text/plain",
              "a data-URI payload that is not base64 (sent as image/png as is)", _invalid_base64),
    MediaSpec("corrupt/truncated.mp4", "corrupt", "video/mp4",
              "the first half of video-rgb-16f.mp4 (the moov atom is cut off)",
              _truncated("video-rgb-16f.mp4", 0.5)),
    MediaSpec("corrupt/random-bytes.mp4", "corrupt", "video/mp4",
              "4096 random bytes (seed 11) labelled video/mp4", _random_bytes(11, 4096)),
)
_SPECS = {spec.name: spec for spec in MEDIA}


@lru_cache(maxsize=None)
def _generated(name: str) -> bytes:
    return _SPECS[name].make()


def generate_all() -> dict[str, bytes]:
    """Every media file's bytes, generated now (nothing is read from disk)."""
    _generated.cache_clear()
    return {spec.name: _generated(spec.name) for spec in MEDIA}


def tool_versions() -> dict[str, str]:
    """Versions of the encoders the bytes depend on, recorded in the manifest."""
    from PIL import features

    codecs = {name: av.codec.Codec(name, "w").long_name for name in ("libx264", "libvpx-vp9")}
    return {
        "pillow": PIL.__version__,
        "zlib (in Pillow)": str(features.version("zlib")),
        "av": av.__version__,
        "libavcodec": ".".join(map(str, av.library_versions["libavcodec"])),
        **{f"encoder {name}": long for name, long in codecs.items()},
    }


def manifest(files: dict[str, bytes]) -> dict[str, Any]:
    """The manifest for `files`: sha256, size and meaning of each, and the tools used."""
    return {
        "regenerate": REGENERATE_COMMAND,
        "tools": tool_versions(),
        "total_bytes": sum(len(data) for data in files.values()),
        "files": [
            {
                "name": spec.name,
                "kind": spec.kind,
                "mime": spec.mime,
                "bytes": len(files[spec.name]),
                "sha256": hashlib.sha256(files[spec.name]).hexdigest(),
                "description": spec.description,
            }
            for spec in MEDIA
        ],
    }


def _manifest_text(files: dict[str, bytes]) -> str:
    return json.dumps(manifest(files), indent=2, ensure_ascii=False) + "\n"


def write_media(directory: Path = MEDIA_DIR) -> dict[str, bytes]:
    """Generate every file into `directory` with its manifest; return the bytes."""
    files = generate_all()
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (directory / MANIFEST_NAME).write_text(_manifest_text(files), encoding="utf-8")
    return files


def check_dir(directory: Path = MEDIA_DIR) -> list[str]:
    """Problems with the files in `directory` against its manifest; empty when all match."""
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        return [f"{manifest_path} is missing; run {REGENERATE_COMMAND}"]
    recorded = json.loads(manifest_path.read_text(encoding="utf-8"))
    problems = []
    names = {entry["name"] for entry in recorded["files"]}
    if names != set(_SPECS):
        problems.append(f"manifest lists {sorted(names ^ set(_SPECS))} differently from the generators")
    for entry in recorded["files"]:
        path = directory / entry["name"]
        if not path.is_file():
            problems.append(f"{entry['name']}: missing")
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            problems.append(f"{entry['name']}: sha256 {digest[:12]} != manifest {entry['sha256'][:12]}")
    return problems


@lru_cache(maxsize=1)
def _committed_manifest() -> dict[str, dict[str, Any]]:
    path = MEDIA_DIR / MANIFEST_NAME
    if not path.is_file():
        raise MediaError(f"{path} is missing; run {REGENERATE_COMMAND}")
    return {entry["name"]: entry for entry in json.loads(path.read_text(encoding="utf-8"))["files"]}


@lru_cache(maxsize=None)
def load(name: str) -> bytes:
    """The committed bytes of media file `name`, verified against the manifest."""
    entry = _committed_manifest().get(name)
    if entry is None:
        raise MediaError(f"{name!r} is not in {MEDIA_DIR / MANIFEST_NAME}")
    path = MEDIA_DIR / name
    if not path.is_file():
        raise MediaError(f"{path} is missing; run {REGENERATE_COMMAND}")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise MediaError(f"{path} does not match its manifest sha256; run {REGENERATE_COMMAND}")
    return data


def mime_of(name: str) -> str:
    """The MIME type a committed file is sent with."""
    return _SPECS[name].mime


def data_uri(name: str, *, mime: str | None = None) -> str:
    """``data:<mime>;base64,<bytes>`` for a committed file."""
    return f"data:{mime or mime_of(name)};base64,{base64.b64encode(load(name)).decode('ascii')}"


@dataclass(frozen=True)
class CorruptSample:
    """Media a client might send that no engine should take: undecodable, or not what it says it is.

    `mislabelled` samples are valid files sent as what they are not (PNG bytes in a video part,
    a PNG whose data URL declares ``text/plain``): each decoder reads the bytes, and only the
    label says they are wrong.
    """

    id: str
    part: PartType
    url: str
    what: str
    mislabelled: bool = False


# (id, file, part type it is sent as, mime it is labelled with, file holds the base64 text itself)
_CORRUPT_TABLE: tuple[tuple[str, str, PartType, str, bool], ...] = (
    ("truncated-png", "corrupt/truncated.png", "image", "image/png", False),
    ("random-bytes-as-png", "corrupt/random-bytes.png", "image", "image/png", False),
    ("png-header-broken-body", "corrupt/broken-body.png", "image", "image/png", False),
    ("invalid-base64", "corrupt/invalid-base64.txt", "image", "image/png", True),
    ("zero-byte-png", "corrupt/zero-byte.png", "image", "image/png", False),
    ("truncated-mp4", "corrupt/truncated.mp4", "video", "video/mp4", False),
    ("random-bytes-as-mp4", "corrupt/random-bytes.mp4", "video", "video/mp4", False),
)
# Valid files sent as what they are not: (id, file, part type, declared mime, what it is).
_MISLABELLED_TABLE: tuple[tuple[str, str, PartType, str, str], ...] = (
    ("png-bytes-as-mp4", "bordered-red-512.png", "video", "video/mp4",
     "a valid PNG (bordered-red-512.png) sent as a video part labelled video/mp4: the bytes are no video"),
    ("png-labelled-text-plain", "bordered-red-512.png", "image", "text/plain",
     "a valid PNG (bordered-red-512.png) in an image part whose data URL declares text/plain, not an image type"),
)
CORRUPT_SAMPLES: tuple[str, ...] = tuple(row[0] for row in _CORRUPT_TABLE + _MISLABELLED_TABLE)


def corrupt_sample(sample_id: str) -> CorruptSample:
    """One corrupt or mislabelled sample of TEST-PLAN §6, with the part type it is sent as."""
    for row_id, name, part, mime, what in _MISLABELLED_TABLE:
        if row_id == sample_id:
            return CorruptSample(sample_id, part, data_uri(name, mime=mime), what, mislabelled=True)
    _, name, part, mime, raw_payload = next(row for row in _CORRUPT_TABLE if row[0] == sample_id)
    what = _SPECS[name].description
    if raw_payload:
        return CorruptSample(sample_id, part, f"data:{mime};base64,{load(name).decode('ascii')}", what)
    return CorruptSample(sample_id, part, data_uri(name, mime=mime), what)


# --- thumbnails ------------------------------------------------------------------------------

THUMBNAIL_SIZE = 96


def thumbnail(data: bytes, mime: str) -> bytes | None:
    """A small PNG of an image, or of four frames of a video side by side; None if undecodable."""
    try:
        if mime.startswith("image/"):
            with Image.open(io.BytesIO(data)) as image:
                picture = image.convert("RGB")
            picture.thumbnail((THUMBNAIL_SIZE, THUMBNAIL_SIZE))
            return _png(picture)
        if mime.startswith("video/"):
            with av.open(io.BytesIO(data)) as container:
                frames = [frame.to_image() for frame in container.decode(video=0)]
            if not frames:
                return None
            picks = [frames[round(i * (len(frames) - 1) / 3)] for i in range(4)]
            strip = Image.new("RGB", (THUMBNAIL_SIZE * 4 + 6, THUMBNAIL_SIZE), RGB["white"])
            for index, frame in enumerate(picks):
                strip.paste(frame.resize((THUMBNAIL_SIZE, THUMBNAIL_SIZE)), (index * (THUMBNAIL_SIZE + 2), 0))
            return _png(strip)
    except (OSError, ValueError, av.FFmpegError):
        return None
    return None


# --- command line --------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine_acceptance.media",
                                     description="Generate or check the committed test media")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--regenerate", action="store_true", help="Rewrite every file and the manifest")
    action.add_argument("--check", action="store_true", help="Check the files against the manifest")
    parser.add_argument("--dir", type=Path, default=MEDIA_DIR, help="Media directory (default: media/)")
    args = parser.parse_args(argv)
    if args.regenerate:
        files = write_media(args.dir)
        print(f"wrote {len(files)} files, {sum(map(len, files.values()))} bytes, to {args.dir}")
        return 0
    problems = check_dir(args.dir)
    for problem in problems:
        print(problem, file=sys.stderr)
    print("media matches its manifest" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0

