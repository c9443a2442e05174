"""Incremental Server-Sent Events parser for OpenAI-style streams.

Engines send ``data: <json>\\n\\n`` events and end with ``data: [DONE]``. Real
streams arrive split at arbitrary bytes (even inside a UTF-8 character), several
events per read, with ``:`` keep-alive comments, CRLF line ends, or no final
``[DONE]`` at all. The parser copes with all of these and never raises: what it
could not make sense of is reported on the event, with the raw bytes kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["SSEEvent", "SSEParser", "parse_sse"]

DONE_SENTINEL = "[DONE]"
# An event ends at a blank line; any of the three line-end styles may be used.
_EVENT_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n")
_LINE_SPLIT = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class SSEEvent:
    """One complete event: its ``data`` lines joined, and when it was complete."""

    data: str
    event: str | None = None
    comments: tuple[str, ...] = ()
    raw: bytes = b""
    received_at: float | None = None
    decode_error: str | None = None

    @property
    def is_done(self) -> bool:
        return self.data.strip() == DONE_SENTINEL

    @property
    def has_data(self) -> bool:
        return bool(self.data)


@dataclass
class SSEParser:
    """Feed bytes as they arrive; complete events come back from :meth:`feed`.

    ``close()`` returns what was left in the buffer when the stream ended: an
    unterminated final event is still parsed (real servers do close without the
    trailing blank line), and the leftover bytes are reported.
    """

    _buffer: bytearray = field(default_factory=bytearray)
    total_bytes: int = 0
    # Bytes of the buffer already searched for a boundary. A boundary is at most 4
    # bytes, so the next search starts 3 bytes before: an event that arrives in a
    # thousand reads is scanned once, not a thousand times (linear, not quadratic).
    _scanned: int = 0

    def feed(self, chunk: bytes, received_at: float | None = None) -> list[SSEEvent]:
        self.total_bytes += len(chunk)
        self._buffer.extend(chunk)
        events: list[SSEEvent] = []
        while True:
            match = _EVENT_BOUNDARY.search(self._buffer, max(0, self._scanned - 3))
            if match is None:
                self._scanned = len(self._buffer)
                break
            block = bytes(self._buffer[: match.start()])
            del self._buffer[: match.end()]
            self._scanned = 0
            event = _parse_block(block, received_at)
            if event is not None:
                events.append(event)
        return events

    def close(self, received_at: float | None = None) -> tuple[list[SSEEvent], bytes]:
        """End of stream: parse any unterminated final event; return it and the leftover."""
        leftover = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        if not leftover.strip():
            return [], b""
        event = _parse_block(leftover, received_at)
        return ([event] if event is not None else []), leftover

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)


def _parse_block(block: bytes, received_at: float | None) -> SSEEvent | None:
    decode_error = None
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = block.decode("utf-8", errors="replace")
        decode_error = f"invalid UTF-8 at byte {exc.start}"
    data_lines: list[str] = []
    comments: list[str] = []
    event_name: str | None = None
    for line in _LINE_SPLIT.split(text):
        if not line:
            continue
        if line.startswith(":"):
            comments.append(line[1:].strip())
            continue
        name, sep, value = line.partition(":")
        if not sep:
            name, value = line, ""
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event_name = value
        # id: and retry: carry nothing an OpenAI stream uses.
    if not data_lines and not comments and event_name is None:
        return None
    return SSEEvent(
        data="\n".join(data_lines),
        event=event_name,
        comments=tuple(comments),
        raw=block,
        received_at=received_at,
        decode_error=decode_error,
    )


def parse_sse(payload: bytes) -> tuple[list[SSEEvent], bytes]:
    """Parse a whole stream body at once; returns the events and any leftover bytes."""
    parser = SSEParser()
    events = parser.feed(payload)
    tail, leftover = parser.close()
    return events + tail, leftover
