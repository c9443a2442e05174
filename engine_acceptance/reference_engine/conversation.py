"""What the reference model is asked: the conversation as plain text, and how it is to think.

The rules that answer (:mod:`.responder` and the families it draws on: tools, vision,
retrieval, code, word problems) all read a :class:`Conversation` and shape their reasoning
by a :class:`ThinkingMode`. Kept apart from :mod:`.responder`, which imports those families,
so that they can name these types without an import circle.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .chat_template import content_text
from .media_facts import SeenMedia

__all__ = ["Conversation", "ThinkingMode", "has_cjk", "shape_reasoning"]


@dataclass(frozen=True)
class ThinkingMode:
    """Whether the model reasons for this request, and how hard (if asked)."""

    enabled: bool = True
    effort: str | None = None
    # "adaptive": the model reasons only when the question needs it (see responder.THOUGHTFUL_RULES).
    adaptive: bool = False


@dataclass(frozen=True)
class Conversation:
    """The messages as plain text, with the latest user turn singled out."""

    texts: tuple[str, ...]
    latest_user_index: int | None
    # Decoded images and videos (see vision.py), each tagged with its message.
    media: tuple[SeenMedia, ...] = ()
    # Each message's role, aligned with `texts` (tool results are answered from).
    roles: tuple[str, ...] = ()

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]],
                      media: Sequence[SeenMedia] = ()) -> Conversation:
        texts = tuple(content_text(m.get("content")) for m in messages)
        latest = None
        for index, message in enumerate(messages):
            if message.get("role") == "user":
                latest = index
        return cls(texts=texts, latest_user_index=latest, media=tuple(media),
                   roles=tuple(str(m.get("role")) for m in messages))

    @property
    def question(self) -> str:
        return "" if self.latest_user_index is None else self.texts[self.latest_user_index]

    @property
    def earlier(self) -> tuple[str, ...]:
        end = len(self.texts) if self.latest_user_index is None else self.latest_user_index
        return self.texts[:end]


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


_SENTENCE_END = re.compile(r"(?<=[。.!！?？])\s*")


def shape_reasoning(reasoning: str, thinking: ThinkingMode, *, zh: bool, thoughtful: bool) -> str | None:
    """The reasoning as the thinking mode and effort leave it: none when off (or adaptive on an
    easy question), the first sentence at low effort, a second check at high effort."""
    if not thinking.enabled or (thinking.adaptive and not thoughtful):
        return None
    if thinking.effort == "low":
        return next((s for s in _SENTENCE_END.split(reasoning) if s), reasoning)
    if thinking.effort == "high":
        return reasoning + (" 再检查一遍：每一步都核对过，结论不变。" if zh else
                            " Checking once more: every step holds, the conclusion stands.")
    return reasoning
