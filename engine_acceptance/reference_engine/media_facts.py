"""What the reference model takes from a media part: the facts of an image or a video, as data.

Kept apart from :mod:`.vision` (which decodes and answers) and :mod:`.pixels` (which reads
the pixels): both produce or read these facts, and so does the conversation the rules
answer. Here they import nothing of the engine, so no import circle runs through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ImageFacts", "MediaFault", "SeenMedia", "UndecodableMedia", "VideoFacts"]

# What is wrong with refused media: bytes no decoder accepts, bytes of another kind than the part
# (an image sent as a video), a data URL whose declared type is not the part's kind.
MediaFault = Literal["undecodable", "mismatched", "declared-type"]


class UndecodableMedia(ValueError):
    """Media the engine refuses; the message says why, never quoting the payload; `fault` says what kind."""

    def __init__(self, message: str, *, fault: MediaFault = "undecodable") -> None:
        super().__init__(message)
        self.fault = fault


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
