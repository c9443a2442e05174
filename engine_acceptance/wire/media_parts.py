"""The request parts that carry media: a content part holding a URL, and the user turn around it.

The wire format of a multimodal chat message, apart from the media themselves (the
committed files and their data URIs are :mod:`engine_acceptance.media.library`): discovery's
probes, the image, video and corrupt-media checks and the media load all build their
messages here, so the layout is written once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["image_part", "media_part", "user_turn"]


def media_part(content_type: str, url: str) -> dict[str, Any]:
    """A content part of type `content_type` (``image_url``, ``video_url``, ...) holding `url`."""
    return {"type": content_type, content_type: {"url": url}}


def image_part(url: str) -> dict[str, Any]:
    return media_part("image_url", url)


def user_turn(prompt: str, parts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One user message: the media parts first, then the question (the usual VLM layout)."""
    return [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]
