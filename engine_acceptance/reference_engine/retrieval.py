"""The reference model's long-context rule: really search the document for the codes.

A question that wraps a document in ``<document>…</document>`` (TEST-PLAN §8, seed
001's explicit field-extraction prompt) is answered by reading that document:

* the instruction names a field prefix such as ``jade-50-1-``: the answer is the code
  in the document that starts with it, or ``NOT_FOUND`` (seed 001's control);
* the instruction asks for JSON: the answer is ``{"codes": [...]}`` with every code in
  the document, in order (seed 000's million-token check).

Nothing here knows where the suite hid the codes; a prompt that loses its middle
(the ``drop-middle`` defect) loses the codes there too. The helpers at the bottom are
the defects' single points of action on long prompts and on codes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .conversation import Conversation

__all__ = [
    "CODE",
    "DROP_MIDDLE_MIN_CHARS",
    "NOT_FOUND",
    "corrupt_first_code",
    "drop_middle",
    "retrieval_rule",
]

OPEN, CLOSE = "<document>", "</document>"
NOT_FOUND = "NOT_FOUND"
# What the reference model takes for a code: word-number-number-six digits.
CODE = re.compile(r"(?<![A-Za-z0-9-])[a-z]+-\d{1,3}-\d{1,3}-\d{6}(?![A-Za-z0-9-])")
# A field name in the instruction: a code without its digits, e.g. "jade-50-1-".
_FIELD = re.compile(r"(?<![A-Za-z0-9-])([a-z]+-\d{1,3}-\d{1,3})-(?!\d)")
_WANTS_JSON = re.compile(r"(?<![A-Za-z])JSON(?![A-Za-z])", re.IGNORECASE)
# drop-middle only bites on long messages, so short conversations are untouched.
DROP_MIDDLE_MIN_CHARS = 4096
# The part of a long message that drop-middle loses (fractions of its length).
DROP_MIDDLE_SPAN = (0.3, 0.7)


def _split(question: str) -> tuple[str, str] | None:
    """(document, instruction) of a question that carries a document, else None."""
    start = question.find(OPEN)
    end = question.rfind(CLOSE)
    if start < 0 or end < start:
        return None
    return question[start + len(OPEN):end], question[:start] + question[end + len(CLOSE):]


def retrieval_rule(conv: Conversation, zh: bool) -> tuple[str, str] | None:
    """(reasoning, answer) for a question about a ``<document>``, else None."""
    parts = _split(conv.question)
    if parts is None:
        return None
    document, instruction = parts
    codes = CODE.findall(document)
    if _WANTS_JSON.search(instruction):
        answer = json.dumps({"codes": codes}, ensure_ascii=False)
        if zh:
            return f"用户要求找出文档中的全部密钥并以 JSON 输出。逐段查找，共找到 {len(codes)} 个。", answer
        return f"The user wants every code in the document as JSON. Searching it finds {len(codes)}.", answer
    field = _FIELD.search(instruction)
    if field is None:
        return None
    prefix = field.group(1) + "-"
    found = [code for code in codes if code.startswith(prefix)]
    answer = found[0] if found else NOT_FOUND
    if zh:
        where = f"找到 {len(found)} 处" if found else "没有找到"
        return f"用户要求从文档中提取以 {prefix} 开头的密钥。逐段查找，{where}。", answer
    where = f"finds {len(found)}" if found else "finds none"
    return f"The user wants the code starting with {prefix} from the document. Searching it {where}.", answer


# --- defect helpers ----------------------------------------------------------------------

def _drop_middle_text(text: str) -> str:
    if len(text) < DROP_MIDDLE_MIN_CHARS:
        return text
    start, end = (int(len(text) * fraction) for fraction in DROP_MIDDLE_SPAN)
    return text[:start] + text[end:]


def drop_middle(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a middle-truncating engine would read them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content = _drop_middle_text(content)
        elif isinstance(content, list):
            content = [
                {**part, "text": _drop_middle_text(part["text"])}
                if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        out.append({**message, "content": content})
    return out


def corrupt_first_code(text: str) -> str:
    """``text`` with the last digit of its first code changed (0->1, ..., 9->0)."""
    match = CODE.search(text)
    if match is None:
        return text
    position = match.end() - 1
    digit = str((int(text[position]) + 1) % 10)
    return text[:position] + digit + text[position + 1:]
