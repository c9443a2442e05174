"""Keep secrets and bulky payloads out of reports, logs and test ids.

API keys are replaced wherever they occur; base64 media and very long strings
(million-token prompts) are replaced by a short description that still lets a
reader tell two payloads apart (length and a hash prefix).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

__all__ = ["REDACTED", "Redactor", "describe_blob"]

REDACTED = "***"
# Long enough for every hand-written prompt in the suite, far below a haystack.
DEFAULT_MAX_STRING = 4000
_DATA_URI = re.compile(r"data:([\w.+-]+/[\w.+-]+)?;base64,([A-Za-z0-9+/=_-]*)")
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


def describe_blob(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:12]
    return f"{len(text)} chars, sha256 {digest}"


class Redactor:
    """Redacts the given secrets and long payloads from strings and JSON-like values."""

    def __init__(self, secrets: Iterable[str | None] = (), *, max_string: int = DEFAULT_MAX_STRING) -> None:
        # Longest first so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._max_string = max_string

    def with_limit(self, max_string: int) -> "Redactor":
        """The same secrets, another length limit (raw bytes get more room than fields)."""
        return Redactor(self._secrets, max_string=max_string)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, REDACTED)
        value = _BEARER.sub(lambda m: m.group(1) + REDACTED, value)
        value = _DATA_URI.sub(_describe_data_uri, value)
        if len(value) > self._max_string:
            head = value[: self._max_string // 2]
            value = f"{head}…[truncated: {describe_blob(value)}]"
        return value

    def value(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {key: self._field(key, item) for key, item in data.items()}
        if isinstance(data, (list, tuple)):
            if len(data) > 64 and all(isinstance(item, int) for item in data):
                return f"[{len(data)} token ids]"
            return [self.value(item) for item in data]
        return data

    def headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {key: (REDACTED if key.lower() in {"authorization", "api-key", "x-api-key"} else self.text(val))
                for key, val in headers.items()}

    def _field(self, key: str, item: Any) -> Any:
        if isinstance(item, str) and key.lower() in {"api_key", "authorization", "password", "token"}:
            return REDACTED
        return self.value(item)


def _describe_data_uri(match: re.Match[str]) -> str:
    mime = match.group(1) or "unknown"
    payload = match.group(2)
    if len(payload) <= 64:
        return match.group(0)
    return f"data:{mime};base64,<{describe_blob(payload)}>"
