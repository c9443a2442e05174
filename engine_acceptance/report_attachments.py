"""What a check attaches to the Allure report: JSON values and whole exchanges, always redacted.

Attachments go through ``allure.attach``, which does nothing when no Allure results
directory is configured, so checks and fixtures attach unconditionally. Nothing here
needs pytest: the checks, the fixture modules and the plugin's own report code share it.
"""

from __future__ import annotations

import json
from typing import Any

import allure

from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.redaction import Redactor

__all__ = ["RAW_ATTACH_LIMIT", "attach_exchange", "attach_json"]

# The raw response bytes attached per exchange: enough to read a broken stream, not a whole long reply.
RAW_ATTACH_LIMIT = 64 * 1024


def attach_json(name: str, data: Any, redactor: Redactor) -> None:
    allure.attach(
        json.dumps(redactor.value(data), ensure_ascii=False, indent=2, default=str),
        name=name,
        attachment_type=allure.attachment_type.JSON,
    )


def attach_exchange(exchange: Exchange, redactor: Redactor, label: str = "") -> None:
    """Attach one request, its reply (reassembled) and the raw response bytes, redacted."""
    prefix = f"{label} " if label else ""
    mode = "streamed" if exchange.stream else "non-streamed"
    attach_json(f"{prefix}request ({mode})", {"method": exchange.method, "url": exchange.url,
                                                "body": exchange.request}, redactor)
    outcome = {
        "status": exchange.status,
        "elapsed_s": round(exchange.elapsed_s, 4) if exchange.elapsed_s is not None else None,
        "error_kind": exchange.error_kind,
        "error": exchange.error,
    }
    if exchange.reply is not None:
        outcome["reply"] = exchange.reply.summary()
    elif exchange.body is not None:
        outcome["body"] = exchange.body
    attach_json(f"{prefix}response ({mode})", outcome, redactor)
    if exchange.raw:
        raw = exchange.raw[:RAW_ATTACH_LIMIT].decode("utf-8", "replace")
        note = "" if len(exchange.raw) <= RAW_ATTACH_LIMIT and not exchange.raw_truncated else "\n…[truncated]"
        allure.attach(redactor.with_limit(RAW_ATTACH_LIMIT).text(raw) + note, name=f"{prefix}raw response bytes",
                      attachment_type=allure.attachment_type.TEXT)
