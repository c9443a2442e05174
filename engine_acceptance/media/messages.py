"""What the image and video checks need besides the media itself: reading answers, and the report.

Tolerant reading of answers (Chinese or English colour words, numbers with or without
units) and a thumbnail attached next to the model's reply. The request parts that carry
the media are wire format (:mod:`engine_acceptance.wire.media_parts`), and reading a
refusal's error body is the API contract (:mod:`engine_acceptance.wire.contract`). Plain
functions, tested without an engine in ``selftest/media/test_media.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence

import allure

from engine_acceptance.media import library as media

__all__ = [
    "COLOR_WORDS",
    "attach_media",
    "colors_named",
    "drop_clause",
    "numbers_in",
    "values_in_order",
]

# Words that name each colour, Chinese (simplified and traditional) and English.
# Longer words come first in matching, so 粉红 (pink) is not read as 红 (red).
COLOR_WORDS: dict[str, tuple[str, ...]] = {
    "red": ("红", "紅", "red", "crimson", "scarlet"),
    "green": ("绿", "綠", "green"),
    "blue": ("蓝", "藍", "blue", "navy"),
    "black": ("黑", "black"),
    "white": ("白", "white"),
    "gray": ("灰", "gray", "grey"),
    "yellow": ("黄", "黃", "yellow"),
    "orange": ("橙", "橘", "orange"),
    "purple": ("紫", "purple", "violet"),
    "pink": ("粉红", "粉紅", "粉色", "pink"),
    "cyan": ("青", "cyan", "teal"),
    "brown": ("棕", "褐", "brown"),
}


def _color_pattern() -> tuple[re.Pattern[str], list[str]]:
    """One regex with a group per colour word, longest words first, and each group's colour."""
    words = sorted(((w, c) for c, ws in COLOR_WORDS.items() for w in ws), key=lambda item: -len(item[0]))
    # English words need word boundaries ("covered" holds "red"); CJK characters have none.
    alternatives = [rf"\b{re.escape(w)}\b" if w.isascii() else re.escape(w) for w, _ in words]
    return re.compile("|".join(f"({alt})" for alt in alternatives), re.IGNORECASE), [c for _, c in words]


_COLOR_RE, _COLOR_OF_GROUP = _color_pattern()


def colors_named(text: str) -> list[str]:
    """The colours `text` names, each once, in the order they are first named."""
    named: list[str] = []
    for match in _COLOR_RE.finditer(unicodedata.normalize("NFKC", text)):
        color = _COLOR_OF_GROUP[match.lastindex - 1]  # type: ignore[operator]
        if color not in named:
            named.append(color)
    return named


# A number not glued to a letter before it, so the 1 of "Q1" is a label, not a value.
_NUMBER = re.compile(r"(?<![A-Za-z0-9.])\d+(?:,\d{3})*(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    """Numbers in `text`, units or not ("120", "120万", "1,200", "９０" all count); labels like Q1 do not."""
    return [float(m.group().replace(",", "")) for m in _NUMBER.finditer(unicodedata.normalize("NFKC", text))]


def values_in_order(text: str, expected: Sequence[float]) -> bool:
    """Whether every expected value appears in `text`, in the given order (other numbers may sit between)."""
    found = iter(numbers_in(text))
    return all(any(value == wanted for value in found) for wanted in expected)


_DROP_WORDS = re.compile(
    r"下降|下跌|减少|減少|降低|回落|下滑|降到|降至|decreas|declin|drop|fell|fall|lower|down", re.IGNORECASE)
_CLAUSES = re.compile(r"[。；;!！?？\n]|\.(?=\s|$)")


def _quarter_pattern(quarter: str) -> re.Pattern[str]:
    number = quarter.lstrip("Qq")
    ordinal = {"1": ("一", "first"), "2": ("二", "second"), "3": ("三", "third"), "4": ("四", "fourth")}[number]
    # Lookarounds, not \b: in "Q2比上季度" the CJK character counts as a word character.
    return re.compile(rf"(?<![A-Za-z0-9])Q{number}(?![0-9])|第?{ordinal[0]}季度|第{number}季度|{ordinal[1]} quarter",
                      re.IGNORECASE)


def drop_clause(text: str, quarter: str) -> str | None:
    """The first clause of `text` that names `quarter` (Q2, 第二季度, second quarter) with a word for a drop."""
    pattern = _quarter_pattern(quarter)
    for clause in _CLAUSES.split(unicodedata.normalize("NFKC", text)):
        if _DROP_WORDS.search(clause) and pattern.search(clause):
            return clause.strip()
    return None


# --- report ------------------------------------------------------------------------------

def attach_media(name: str) -> None:
    """Attach a committed file's thumbnail and identity (never its bytes) to the report."""
    data = media.load(name)
    mime = media.mime_of(name)
    picture = media.thumbnail(data, mime)
    if picture is not None:
        allure.attach(picture, name=f"media {name} (thumbnail)", attachment_type=allure.attachment_type.PNG)
    allure.attach(
        json.dumps({"file": f"media/{name}", "mime": mime, "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()}, indent=2),
        name=f"media {name}", attachment_type=allure.attachment_type.JSON,
    )
