"""Probes of media input: an image, and a video where the engine profile says how one is sent.

Each sends the smallest committed file of its kind (``media/manifest.json``, checked
against its sha256) with a short question, and the same question without it, together:
a reply to the media request that counts no more prompt tokens than the plain one did
not read the media (:func:`classify_media`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine_acceptance.capabilities.probes.base import Probe, ProbeContext, cap, chat_body, classify_exchange
from engine_acceptance.profiles.refusals import RefusalRules
from engine_acceptance.wire.media_parts import media_part, user_turn
from engine_acceptance.wire.types import Exchange

__all__ = ["DEFAULT_VIDEO_CONTAINERS", "classify_media", "probe_image", "probe_video"]

# Containers sent when the engine profile lists none (as tests/test_video.py does).
DEFAULT_VIDEO_CONTAINERS = ("mp4",)
_IMAGE_PROMPT = "What colour is this image? Answer in one word."
_VIDEO_PROMPT = "Which background colours does this video show, in order? Answer in one line."


def _prompt_tokens(exchange: Exchange) -> int | None:
    """usage.prompt_tokens of a readable reply, when it is a count."""
    usage = exchange.reply.usage if exchange.reply is not None else None
    count = usage.prompt_tokens if usage is not None else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def classify_media(with_media: Exchange, without: Exchange, *, content_type: str, noun: str,
                   rules: RefusalRules) -> tuple[str, str]:
    """(state, evidence) of a media probe: the request with the media part, and the same without it.

    Every engine that reads an image or a video counts it in ``usage.prompt_tokens`` (vLLM:
    256 tokens per Gemma 3 image; SGLang likewise). A server without a vision model may
    answer 200 and drop the part in silence (llama.cpp's server with a text-only GGUF:
    prompt_tokens 7 with the image and without): a client gets an answer that pretends to
    have seen it, so that is broken, not served, and the checks run and say so. When
    either reply has no usage the count cannot be compared: the media reply is judged as
    any chat probe is, and the evidence says the check was not made.
    """
    state, evidence = classify_exchange(with_media, noun, rules)
    if state != "served":
        return state, evidence
    counted, baseline = _prompt_tokens(with_media), _prompt_tokens(without)
    if counted is None or baseline is None:
        which = ("either reply" if counted is None and baseline is None
                 else f"the reply with the {noun}" if counted is None else "the reply without it")
        return state, cap(f"not checked that the {noun} was read (no usage in {which}); {evidence}")
    if counted <= baseline:
        return "broken", cap(f"{content_type} part dropped: prompt_tokens {counted} with the {noun}, {baseline} "
                             f"without (the engine answered 200 but did not read the {noun})")
    return state, cap(f"prompt_tokens {counted} with the {noun}, {baseline} without; {evidence}")


@dataclass(frozen=True)
class _Media:
    name: str
    mime: str
    data: bytes

    def data_uri(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def _smallest_media(media_dir: Path, kind: str, extensions: Sequence[str] | None = None) -> _Media | str:
    """The smallest committed file of `kind` (with one of `extensions`), or why there is none."""
    manifest_path = media_dir / "manifest.json"
    try:
        entries = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"no readable media manifest at {manifest_path} ({exc})"
    candidates = [e for e in entries if e.get("kind") == kind
                  and (extensions is None or Path(e["name"]).suffix.lstrip(".") in extensions)]
    if not candidates:
        return f"no {kind} in {manifest_path}" + (f" in {', '.join(extensions)}" if extensions else "")
    entry = min(candidates, key=lambda e: (e["bytes"], e["name"]))
    path = media_dir / entry["name"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"{path} cannot be read ({exc})"
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return f"{path} does not match its manifest sha256"
    return _Media(entry["name"], entry["mime"], data)


async def _probe_media(context: ProbeContext, capability: str, content_type: str, media: _Media | str,
                       prompt: str) -> Probe:
    """The media request and the same question without the media, sent together (see :func:`classify_media`)."""
    if isinstance(media, str):
        return Probe(capability, "not_probed", cap(media))
    with_media = chat_body(user_turn(prompt, [media_part(content_type, media.data_uri())]), context.max_tokens)
    without = chat_body(user_turn(prompt, []), context.max_tokens)
    exchanges = await asyncio.gather(context.chat.chat(with_media, stream=False),
                                     context.chat.chat(without, stream=False))
    state, evidence = classify_media(*exchanges, content_type=content_type, noun=capability, rules=context.rules)
    settings = {"content_type": content_type} if state != "not_served" else {}
    # Not capped again: the evidence is, and a broken one ends with the command that states the intent.
    return Probe(capability, state, f"{media.name}: {evidence}", settings)


async def probe_image(context: ProbeContext) -> Probe:
    return await _probe_media(context, "image", "image_url", _smallest_media(context.media_dir, "image", ("png",)),
                              _IMAGE_PROMPT)


async def probe_video(context: ProbeContext) -> Probe:
    """Not probed when the engine profile does not say how a video is sent (no content type to send it as)."""
    profile = context.engine_profile
    video_type = profile.video_content_type
    if not video_type:
        return Probe("video", "not_probed", cap(profile.no_video_reason()))
    containers = profile.features.get("video_containers") or DEFAULT_VIDEO_CONTAINERS
    return await _probe_media(context, "video", video_type, _smallest_media(context.media_dir, "video", containers),
                              _VIDEO_PROMPT)
