"""Reading a recall answer and saying, in words, what is wrong with it.

The recall checks compare codes character for character. A failure message names
the code that is missing, and for a near miss (same shape, a character or two off)
the position and the characters, so a report reader sees ``jade-50-1-259921``
against ``jade-50-1-259920`` without opening attachments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from engine_acceptance.recall.haystack import CODE_PATTERN, PlacedNeedle

__all__ = ["character_differences", "code_problems", "codes_in", "json_codes"]

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
# A near miss differs in at most this many characters; anything else is "another code".
NEAR_MISS_CHARS = 2


def codes_in(text: str) -> list[str]:
    """Every code-shaped string in ``text``, in order."""
    return CODE_PATTERN.findall(text)


def json_codes(content: str) -> tuple[list[str] | None, str | None]:
    """The codes in the JSON object an answer gives, or None and why it could not be read.

    Code fences and text around one JSON object are tolerated (models add them); the
    object must parse, and every code-shaped string anywhere in it counts.
    """
    candidates = [match.group(1) for match in _FENCE.finditer(content)] + [content]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start >= 0:
            try:
                value, _end = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                start = candidate.find("{", start + 1)
                continue
            return [code for text in _strings(value) for code in codes_in(text)], None
    return None, "the answer holds no JSON object"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def character_differences(expected: str, got: str) -> list[str]:
    """``character 16 is '1', expected '0'`` for each position where two codes differ."""
    if len(expected) != len(got):
        return [f"{len(got)} characters, expected {len(expected)}"]
    return [f"character {index + 1} is {g!r}, expected {e!r}"
            for index, (e, g) in enumerate(zip(expected, got)) if e != g]


def code_problems(expected: Sequence[PlacedNeedle], found: Sequence[str],
                  hidden: Sequence[str] = ()) -> list[str]:
    """One line per expected code the answer lacks, and per code it has that it should not.

    ``hidden`` lists every code in the document, so an answer that gives another
    key's code is told apart from one that invents a code.
    """
    wanted = {needle.code for needle in expected}
    strays = [code for code in dict.fromkeys(found) if code not in wanted]
    problems = []
    for needle in expected:
        if needle.code in found:
            continue
        near = [(len(diff), code, diff) for code in strays
                for diff in [character_differences(needle.code, code)]
                if len(code) == len(needle.code) and len(diff) <= NEAR_MISS_CHARS]
        if near:
            _, code, diff = min(near)
            strays.remove(code)
            problems.append(f"the code at {needle.depth_label} depth is wrong: {code} instead of {needle.code} "
                            f"({'; '.join(diff)})")
        else:
            problems.append(f"the code at {needle.depth_label} depth, {needle.code}, is missing")
    problems += [f"{code} is another key's code, not one asked for" if code in hidden
                 else f"{code} was never hidden in the document" for code in strays]
    return problems
