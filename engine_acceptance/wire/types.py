"""The types every layer above the wire shares: where the engine is, how long to wait, and one exchange.

Most modules that talk about a request only carry these around (a check reads an
:class:`Exchange`, the load generator is handed an :class:`EngineTarget`, the options
build :class:`ClientTimeouts`); they import them from here, not from the clients in
:mod:`engine_acceptance.wire.client`, so that knowing the types never means loading
an HTTP stack. Like vLLM's ``RequestFuncInput``/``RequestFuncOutput``: data only. The
only modules named here are the parsers whose results an exchange holds (an SSE event,
a reassembled reply), and they import nothing of the suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.wire.reassembly import Reply
from engine_acceptance.wire.sse import SSEEvent

__all__ = ["ClientTimeouts", "EngineTarget", "Exchange"]


@dataclass(frozen=True)
class ClientTimeouts:
    """Seconds: to connect, of silence between two reads, and for the whole request."""

    connect: float = 10.0
    idle: float = 60.0
    total: float = 300.0


@dataclass(frozen=True)
class EngineTarget:
    """Where the engine is and how to talk to it."""

    base_url: str
    model: str
    # Out of the repr: pytest prints a failing test's arguments, and a target may be one.
    api_key: str | None = field(default=None, repr=False)
    timeouts: ClientTimeouts = ClientTimeouts()
    # Whether a connection may carry another request after a streamed reply: False for an engine that
    # closes it (llama.cpp's llama-server; its engine profile says so), where the load opens one per request.
    reuse_connections: bool = True

    @property
    def v1_url(self) -> str:
        return self.base_url.rstrip("/") + "/v1"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass
class Exchange:
    """One request and what came back. ``reply`` is set when a 2xx body arrived."""

    method: str
    url: str
    request: dict[str, Any] | None
    stream: bool
    status: int | None = None
    reply: Reply | None = None
    body: Any = None
    error_kind: str | None = None
    error: str | None = None
    raw: bytes = b""
    raw_truncated: bool = False
    elapsed_s: float | None = None
    events: list[SSEEvent] = field(default_factory=list, repr=False)
    # What had arrived when it ended: bytes, and seconds after sending until the
    # response headers and until the newest byte (None: never).
    bytes_received: int = 0
    headers_after_s: float | None = None
    last_byte_after_s: float | None = None
    # Response headers, names lower-cased (the raw client keeps them: the wire checks read Content-Type).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        # A reply rebuilt from a stream cut by a timeout or a reset is evidence, not a success.
        return (self.error_kind is None and self.status is not None and 200 <= self.status < 300
                and self.reply is not None)

    def describe_failure(self) -> str:
        """One line for an assertion message when the exchange did not succeed."""
        if self.error_kind:
            return f"{self.error_kind}: {self.error}"
        if self.status is not None and not 200 <= self.status < 300:
            return f"HTTP {self.status}: {_short(self.body if self.body is not None else self.raw)}"
        if self.reply is None:
            return f"no reply could be read: {_short(self.raw)}"
        return "ok"


def _short(value: Any, limit: int = 300) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= limit else text[:limit] + "…"
